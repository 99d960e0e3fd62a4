"""WriteTokenShards: order, shards, shuffling, file splits, atomic finalize."""

from __future__ import annotations

import pathlib

import apache_beam as beam
import numpy as np
import pytest

from beamtrove.transforms.tokens import TokenizedDocument, WriteTokenShards, humanized_token_count
from tests.conftest import run_and_collect

TOKENIZER = "gpt2/tokenizer.json"


@pytest.fixture(scope="module")
def tokenized(udhr_documents, gpt2) -> list[TokenizedDocument]:
    """Forty UDHR translations as GPT-2 tokens, ids ``udhr/<n>``."""
    documents = udhr_documents[:40]
    encodings = gpt2.encode_batch([d.text for d in documents])
    return [
        TokenizedDocument(d.id, np.array([*e.ids, 50256], dtype="<u2"))
        for d, e in zip(documents, encodings, strict=True)
    ]


def _write(documents, output, **options) -> dict:
    def build(pipeline):
        pipeline | beam.Create(documents) | WriteTokenShards(str(output), tokenizer=TOKENIZER, **options)

    return run_and_collect(build)["write_tokens"]


def _read(path: pathlib.Path) -> list[bytes]:
    """The documents of one shard as raw token bytes, split by the index (read from the format's definition)."""
    data = path.read_bytes()
    ends = np.frombuffer(pathlib.Path(f"{path}.index").read_bytes(), dtype="<u8")
    starts = np.concatenate([[0], ends[:-1]])
    return [data[2 * int(start) : 2 * int(end)] for start, end in zip(starts, ends, strict=True)]


def _files(output: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(output.iterdir()) if p.name.startswith("tokens_")}


def test_one_unshuffled_shard_holds_the_documents_in_id_order(tokenized, tmp_path):
    scrambled = tokenized[7:] + tokenized[:7]
    stats = _write(scrambled, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tokens_00000_00000.ds",
        "tokens_00000_00000.ds.index",
        "tokens_00000_00000.ds.metadata",
    ]
    # udhr/2 before udhr/10: digit runs compare as numbers.
    assert _read(tmp_path / "tokens_00000_00000.ds") == [d.tokens.tobytes() for d in tokenized]
    total = sum(len(d.tokens) for d in tokenized)
    assert (tmp_path / "tokens_00000_00000.ds.metadata").read_text() == (
        f"{TOKENIZER}|2\n{total}\n{humanized_token_count(total)}"
    )
    assert stats["counters"] == {"in": 40, "out": 40, "tokens": total, "files": 1}


def test_a_seed_shuffles_the_same_way_every_time_and_loses_nothing(tokenized, tmp_path):
    _write(tokenized, tmp_path / "a", num_shards=3, seed=7)
    _write(list(reversed(tokenized)), tmp_path / "b", num_shards=3, seed=7)
    _write(tokenized, tmp_path / "c", num_shards=3, seed=8)
    first = _files(tmp_path / "a")
    assert first == _files(tmp_path / "b")
    assert first != _files(tmp_path / "c")
    shards = [_read(tmp_path / "a" / name) for name in first if name.endswith(".ds")]
    assert len(shards) == 3 and all(shards)
    written = [document for shard in shards for document in shard]
    assert sorted(written) == sorted(d.tokens.tobytes() for d in tokenized)
    assert written != [d.tokens.tobytes() for d in tokenized]


def test_files_are_split_before_they_pass_the_token_limit(tokenized, tmp_path):
    limit = 6000
    _write(tokenized, tmp_path, max_tokens_per_file=limit)
    parts = sorted(tmp_path.glob("tokens_00000_*.ds"))
    assert len(parts) > 3
    for part in parts:
        documents = _read(part)
        assert sum(len(d) // 2 for d in documents) <= limit or len(documents) == 1
        assert part.with_name(part.name + ".metadata").exists()
    assert [d for part in parts for d in _read(part)] == [d.tokens.tobytes() for d in tokenized]


def test_loss_masks_go_to_a_loss_file_aligned_with_the_tokens(tokenized, tmp_path):
    masked = [
        TokenizedDocument(d.id, d.tokens, (np.arange(len(d.tokens)) % 3 != 0).astype(np.uint8)) for d in tokenized[:10]
    ]
    _write(masked, tmp_path)
    expected = b"".join(d.loss_mask.tobytes() for d in sorted(masked, key=lambda d: int(d.id.split("/")[1])))
    assert (tmp_path / "tokens_00000_00000.ds.loss").read_bytes() == expected


def test_documents_without_a_mask_count_every_token_in_a_shard_with_masks(tokenized, tmp_path):
    mixed = [
        TokenizedDocument(d.id, d.tokens, np.zeros(len(d.tokens), dtype=np.uint8) if n % 2 else None)
        for n, d in enumerate(tokenized[:6])
    ]
    _write(mixed, tmp_path)
    expected = b"".join((b"\x00" if n % 2 else b"\x01") * len(d.tokens) for n, d in enumerate(mixed))
    assert (tmp_path / "tokens_00000_00000.ds.loss").read_bytes() == expected


def test_an_earlier_run_is_refused_unless_overwritten_then_replaced_entirely(tokenized, tmp_path):
    _write(tokenized, tmp_path, num_shards=3)
    assert len(list(tmp_path.glob("*.ds"))) == 3
    with pytest.raises(FileExistsError, match="--overwrite"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER)
    (tmp_path / "tokens_v2_00000_00000.ds").write_bytes(b"")  # another prefix's file is not touched
    _write(tokenized[:5], tmp_path, num_shards=1, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tokens_00000_00000.ds",
        "tokens_00000_00000.ds.index",
        "tokens_00000_00000.ds.metadata",
        "tokens_v2_00000_00000.ds",
    ]
    assert _read(tmp_path / "tokens_00000_00000.ds") == [d.tokens.tobytes() for d in tokenized[:5]]


def test_nothing_is_written_for_no_documents_and_no_temporary_files_remain(tmp_path):
    def build(pipeline):
        empty = pipeline | beam.Create([], reshuffle=False).with_output_types(TokenizedDocument)
        empty | WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, num_shards=2)

    run_and_collect(build)
    assert list(tmp_path.iterdir()) == []


def test_bad_configuration_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="num_shards"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, num_shards=0)
    with pytest.raises(ValueError, match="max_tokens_per_file"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, max_tokens_per_file=0)
    with pytest.raises(ValueError, match="prefix"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, prefix="../up")
