"""The merge_tokens pipeline: shards of one tokenizer in, re-sharded (and shuffled, or context-shuffled) shards out."""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import pytest
from tokenizers import Tokenizer

from beamtrove.cli import main
from beamtrove.pipelines import pipeline_spec
from tests.pipelines.conftest import EOS, shard_documents


@pytest.fixture(scope="module")
def shards(corpus, gpt2_path, tmp_path_factory) -> pathlib.Path:
    """The corpus tokenized with GPT-2 into 3 shards of beamtrove's."""
    folder, _ = corpus
    output = tmp_path_factory.mktemp("tokens")
    argv = ["--input", str(folder), "--input_format", "jsonl", "--output", str(output), "--tokenizer", gpt2_path]
    assert main(["run", "tokenize", *argv, "--num_shards", "3"]) == 0
    return output


def test_shards_without_metadata_merge_with_the_token_size_given(shards, tmp_path):
    # DataTrove's older shards carry no .ds.metadata: the token size comes from --token_size.
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in shards.glob("*.ds*"):
        if not path.name.endswith(".metadata"):
            (bare / path.name).write_bytes(path.read_bytes())
    merged = tmp_path / "merged"
    assert main(["run", "merge_tokens", "--input", str(bare), "--output", str(merged), "--token_size", "2"]) == 0
    assert collections.Counter(shard_documents(merged)) == collections.Counter(shard_documents(shards))
    assert (merged / "tokens_00000_00000.ds.metadata").read_text().splitlines()[0] == "Unknown Tokenizer|2"


def test_shards_of_different_tokenizers_are_refused_before_anything_runs(shards, tmp_path, capsys):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for path in shards.glob("*.ds*"):
        (mixed / path.name).write_bytes(path.read_bytes())
    metadata = sorted(mixed.glob("*.metadata"))[-1]
    metadata.write_text("another/tokenizer.json|2\n" + "".join(metadata.read_text().splitlines(True)[1:]))
    assert main(["run", "merge_tokens", "--input", str(mixed), "--output", str(tmp_path / "out")]) == 2
    assert "come from different tokenizers or token sizes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_merging_is_a_global_step_shards_cannot_take():
    spec = pipeline_spec("merge_tokens")
    assert not spec.shard_safe and not spec.resumable
    assert spec.global_steps == "merging rewrites token shards across the whole input"


def test_context_shuffle_moves_windows_of_the_documents_in_input_order(corpus, gpt2_path, tmp_path):
    folder, texts = corpus
    gpt2 = Tokenizer.from_file(gpt2_path)
    stream = np.concatenate([np.array([*e.ids, EOS], dtype="<u2") for e in gpt2.encode_batch(texts)])
    windows = [stream[start : start + 2049].tobytes() for start in range(0, len(stream) - 2048, 2049)]
    expected = b"".join(windows[i] for i in np.random.default_rng(8).permutation(len(windows)))
    unshuffled = tmp_path / "unshuffled"
    argv = ["--input", str(folder), "--input_format", "jsonl", "--output", str(unshuffled), "--tokenizer", gpt2_path]
    assert main(["run", "tokenize", *argv, "--max_tokens_per_file", "100000"]) == 0
    assert len(list(unshuffled.glob("*.ds"))) == 6
    out = tmp_path / "context"
    options = ["--shuffle_seed", "8", "--context_shuffle", "2049"]
    assert main(["run", "merge_tokens", "--input", str(unshuffled), "--output", str(out), *options]) == 0
    assert len(windows) == 233
    assert (out / "tokens_00000_00000.ds").read_bytes() == expected
    ends = np.frombuffer((out / "tokens_00000_00000.ds.index").read_bytes(), "<u8")
    assert set(range(2049, 233 * 2049 + 1, 2049)) <= set(ends.tolist()) and ends[-1] == 233 * 2049


def test_context_shuffle_needs_a_seed(shards, tmp_path, capsys):
    argv = ["--input", str(shards), "--output", str(tmp_path / "out"), "--context_shuffle", "2049"]
    assert main(["run", "merge_tokens", *argv]) == 2
    assert "needs a seed (--shuffle_seed)" in capsys.readouterr().err
