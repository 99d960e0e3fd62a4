"""The tokenize pipeline, end to end through the CLI, on UDHR text with GPT-2 (and merge_tokens after it)."""

from __future__ import annotations

import collections
import json
import pathlib

import numpy as np
import pytest
from tokenizers import Tokenizer

from beamtrove.cli import main
from tests.conftest import require
from tests.pipelines.conftest import EOS, shard_documents


def _run(*args: str) -> int:
    return main(["run", *args, "--progress_interval", "0"])


def _tokenize(source: pathlib.Path, output: pathlib.Path, *options: str) -> int:
    if source.is_dir():
        options = ("--input_format", "jsonl", *options)
    return _run("tokenize", "--input", str(source), "--output", str(output), *options)


def test_tokenize_writes_shuffled_shards_holding_every_document_once(corpus, gpt2_path, tmp_path):
    folder, texts = corpus
    out = tmp_path / "tokens"
    options = ("--tokenizer", gpt2_path, "--num_shards", "3", "--shuffle_seed", "5", "--loss_mask")
    assert _tokenize(folder / "*.jsonl", out, *options) == 0
    assert sorted(p.name for p in out.glob("*.ds")) == [f"tokens_0000{n}_00000.ds" for n in range(3)]
    gpt2 = Tokenizer.from_file(gpt2_path)
    expected = [np.array([*e.ids, EOS], dtype="<u2").tobytes() for e in gpt2.encode_batch(texts)]
    written = shard_documents(out)
    assert collections.Counter(tokens for tokens, _ in written) == collections.Counter(expected)
    assert [tokens for tokens, _ in written] != expected  # shuffled
    masks = {tokens: loss for tokens, loss in written}
    masked = len(gpt2.encode(texts[0][:40]).ids)
    assert masks[expected[0]] == b"\x00" * masked + b"\x01" * (len(expected[0]) // 2 - masked)
    assert all(loss == b"\x01" * (len(tokens) // 2) for tokens, loss in written if tokens != expected[0])
    steps = json.loads((out / "stats.json").read_text())["steps"]
    assert steps["read"]["counters"]["out"] == steps["tokenize"]["counters"]["in"] == 60
    assert steps["write_tokens"]["counters"]["out"] == 60
    assert steps["write_tokens"]["counters"]["tokens"] == sum(len(t) // 2 for t in expected)
    assert steps["write_tokens"]["counters"]["files"] == 3


@pytest.mark.slow
def test_runner_modes_write_the_same_bytes(corpus, gpt2_path, tmp_path):
    folder, _ = corpus
    outputs = {}
    for mode, extra in {
        "in_memory": ["--direct_running_mode=in_memory"],
        "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    }.items():
        options = ("--tokenizer", gpt2_path, "--num_shards", "2", "--shuffle_seed", "9", "--loss_mask", *extra)
        assert _tokenize(folder, tmp_path / mode, *options) == 0
        outputs[mode] = {p.name: p.read_bytes() for p in (tmp_path / mode).glob("tokens_*")}
    assert len(outputs["in_memory"]) == 8  # 2 shards x .ds, .index, .loss, .metadata
    assert outputs["in_memory"] == outputs["multi_processing"]


def test_unshuffled_tokenize_then_merge_keeps_input_order(corpus, gpt2_path, tmp_path):
    folder, texts = corpus
    gpt2 = Tokenizer.from_file(gpt2_path)
    expected = [np.array([*e.ids, EOS], dtype="<u2").tobytes() for e in gpt2.encode_batch(texts)]
    first = tmp_path / "first"
    assert _tokenize(folder, first, "--tokenizer", gpt2_path, "--max_tokens_per_file", "40000") == 0
    parts = sorted(first.glob("*.ds"))
    assert len(parts) > 2
    assert [tokens for tokens, _ in shard_documents(first)] == expected  # <file>/<row> ids: input order

    merged = tmp_path / "merged"
    assert _run("merge_tokens", "--input", str(first), "--output", str(merged)) == 0
    assert [p.name for p in merged.glob("*.ds")] == ["tokens_00000_00000.ds"]
    assert [tokens for tokens, _ in shard_documents(merged)] == expected
    assert (merged / "tokens_00000_00000.ds.metadata").read_text().splitlines()[0] == f"{gpt2_path}|2"

    shuffled = tmp_path / "shuffled"
    options = ("--num_shards", "2", "--shuffle_seed", "1")
    assert _run("merge_tokens", "--input", str(first), "--output", str(shuffled), *options) == 0
    documents = [tokens for tokens, _ in shard_documents(shuffled)]
    assert collections.Counter(documents) == collections.Counter(expected) and documents != expected


def test_bad_configuration_fails_before_the_run_with_what_to_fix(corpus, gpt2_path, tmp_path, capsys, data_dir):
    jsonl = corpus[0] / "*.jsonl"
    assert _tokenize(jsonl, tmp_path) == 2
    assert "--tokenizer" in capsys.readouterr().err
    assert _tokenize(jsonl, tmp_path, "--tokenizer", gpt2_path, "--eos_token", "</s>") == 2
    assert "--eos_token" in capsys.readouterr().err
    warc = require(data_dir / "warc" / "clueweb09-ja_quirk.warc.gz")
    assert _tokenize(warc, tmp_path, "--tokenizer", gpt2_path) == 2
    assert "not WARC" in capsys.readouterr().err
    assert _tokenize(jsonl, tmp_path / "t", "--tokenizer", gpt2_path) == 0
    assert _tokenize(jsonl, tmp_path / "t", "--tokenizer", gpt2_path) == 2
    assert "--overwrite" in capsys.readouterr().err


def _megatron_documents(folder: pathlib.Path) -> list[bytes]:
    """Every document of every Megatron dataset in ``folder`` as token bytes, read from the .idx layout."""
    found = []
    for data_path in sorted(folder.glob("*.bin")):
        data, index = data_path.read_bytes(), data_path.with_suffix(".idx").read_bytes()
        assert index[:9] == b"MMIDIDX\x00\x00"
        sequences = int.from_bytes(index[18:26], "little")
        lengths = np.frombuffer(index, "<i4", sequences, 34)
        pointers = np.frombuffer(index, "<i8", sequences, 34 + 4 * sequences)
        found += [data[p : p + 2 * n] for p, n in zip(pointers.tolist(), lengths.tolist(), strict=True)]
    return found


def test_megatron_format_writes_bin_and_idx_per_shard(corpus, gpt2_path, tmp_path):
    folder, texts = corpus
    gpt2 = Tokenizer.from_file(gpt2_path)
    expected = [np.array([*e.ids, EOS], dtype="<u2").tobytes() for e in gpt2.encode_batch(texts)]
    out = tmp_path / "megatron"
    assert _tokenize(folder, out, "--tokenizer", gpt2_path, "--output_format", "megatron") == 0
    assert sorted(p.name for p in out.glob("tokens_*")) == ["tokens_00000_00000.bin", "tokens_00000_00000.idx"]
    assert _megatron_documents(out) == expected
    assert (out / "tokens_00000_00000.idx").stat().st_size == 9 + 25 + 20 * 60 + 8

    shuffled = tmp_path / "shuffled"
    options = ("--output_format", "megatron", "--num_shards", "2", "--shuffle_seed", "3", "--file_prefix", "udhr")
    assert _tokenize(folder, shuffled, "--tokenizer", gpt2_path, *options) == 0
    assert sorted(p.name for p in shuffled.glob("udhr_*")) == [
        f"udhr_0000{n}_00000.{suffix}" for n in range(2) for suffix in ("bin", "idx")
    ]
    documents = _megatron_documents(shuffled)
    assert collections.Counter(documents) == collections.Counter(expected) and documents != expected


def test_chunk_shuffle_keeps_every_full_chunk_of_the_shuffled_documents(corpus, gpt2_path, tmp_path):
    folder, texts = corpus
    gpt2 = Tokenizer.from_file(gpt2_path)
    documents = [np.array([*e.ids, EOS], dtype="<u2") for e in gpt2.encode_batch(texts)]
    generator = np.random.default_rng(4)
    stream = np.concatenate([documents[i] for i in generator.permutation(len(documents))])
    chunks = [stream[start : start + 4096].tobytes() for start in range(0, len(stream) - 4095, 4096)]
    expected = b"".join(chunks[i] for i in generator.permutation(len(chunks)))
    out = tmp_path / "chunks"
    options = ("--shuffle_seed", "4", "--shuffle_chunk_size", "4096")
    assert _tokenize(folder, out, "--tokenizer", gpt2_path, *options) == 0
    assert (len(stream), len(chunks)) == (478_719, 116)
    assert (out / "tokens_00000_00000.ds").read_bytes() == expected


def test_options_a_format_cannot_honour_fail_before_the_run(corpus, gpt2_path, tmp_path, capsys):
    folder, _ = corpus
    megatron = ("--tokenizer", gpt2_path, "--output_format", "megatron")
    assert _tokenize(folder, tmp_path / "a", *megatron, "--loss_mask") == 2
    assert "drop --loss_mask or write --output_format ds" in capsys.readouterr().err
    assert _tokenize(folder, tmp_path / "b", *megatron, "--shuffle_seed", "1", "--shuffle_chunk_size", "9") == 2
    assert "drop --shuffle_chunk_size" in capsys.readouterr().err
    assert _tokenize(folder, tmp_path / "c", "--tokenizer", gpt2_path, "--shuffle_chunk_size", "9") == 2
    assert "needs a seed (--shuffle_seed)" in capsys.readouterr().err
    # One --output_format for the pipelines that write several formats; each refuses the other's.
    assert _tokenize(folder, tmp_path / "d", "--tokenizer", gpt2_path, "--output_format", "parquet") == 2
    assert "tokenize writes --output_format ds or megatron, not 'parquet'." in capsys.readouterr().err
    convert = ["run", "convert", "--input", str(folder), "--output", str(tmp_path / "e"), "--output_format", "ds"]
    assert main(convert) == 2
    assert "convert writes --output_format jsonl or parquet, not 'ds'." in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in "abcde")
