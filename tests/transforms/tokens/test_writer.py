"""WriteTokenShards: order, shards, shuffling, chunk shuffling, file splits, Megatron datasets, atomic finalize."""

from __future__ import annotations

import hashlib
import itertools
import pathlib
import struct

import apache_beam as beam
import numpy as np
import pytest

from beamtrove.transforms.tokens import ChunkShuffle, TokenizedDocument, WriteTokenShards, humanized_token_count
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


@pytest.mark.slow
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


@pytest.mark.parametrize("seed", [None, 7])
def test_documents_sharing_an_id_are_ordered_by_their_tokens_whatever_order_they_arrive_in(tokenized, seed, tmp_path):
    # Four texts under each of five ids: only the tokens tell the documents of one id apart.
    shared = [TokenizedDocument(f"dup/{n % 5}", d.tokens) for n, d in enumerate(tokenized[:20])]
    _write(shared, tmp_path / "a", seed=seed)
    _write(list(reversed(shared)), tmp_path / "b", seed=seed)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    written = _read(tmp_path / "a" / "tokens_00000_00000.ds")
    assert sorted(written) == sorted(d.tokens.tobytes() for d in shared)
    for doc_id in {d.id for d in shared}:
        tokens = [d.tokens.tobytes() for d in shared if d.id == doc_id]
        # The documents of one id are written next to each other, in the order of a digest of their tokens.
        start = min(written.index(t) for t in tokens)
        assert written[start : start + 4] == sorted(tokens, key=lambda t: hashlib.blake2b(t, digest_size=8).digest())


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


def _chunk_files(documents, seed, size, shuffle_documents) -> tuple[bytes, list[int]]:
    """The tokens and index DataTrove writes for chunk shuffling, from its definition: one generator, documents
    permuted (or not), joined, cut into ``size``-token chunks (the rest dropped), chunks permuted; the index holds
    every document end inside a chunk and every chunk end."""
    generator = np.random.default_rng(seed)
    if shuffle_documents:
        documents = [documents[i] for i in generator.permutation(len(documents))]
    stream = np.concatenate([d.tokens for d in documents])
    ends = set(np.cumsum([len(d.tokens) for d in documents]).tolist())
    count = len(stream) // size
    tokens, index = [], []
    for chunk in generator.permutation(count):
        start = int(chunk) * size
        tokens.append(stream[start : start + size].tobytes())
        base = (len(index) and index[-1]) or 0
        index += [base + end - start for end in sorted(ends) if start < end < start + size] + [base + size]
    return b"".join(tokens), index


@pytest.mark.parametrize("shuffle_documents", [True, False])
def test_chunks_are_shuffled_as_datatrove_shuffles_them(tokenized, tmp_path, shuffle_documents):
    stats = _write(tokenized, tmp_path, seed=3, chunks=ChunkShuffle(2049, shuffle_documents=shuffle_documents))
    tokens, index = _chunk_files(tokenized, 3, 2049, shuffle_documents)
    total = sum(len(d.tokens) for d in tokenized)
    assert (total, total // 2049) == (347_788, 169)  # the last 1,507 tokens are dropped
    assert (tmp_path / "tokens_00000_00000.ds").read_bytes() == tokens
    assert np.frombuffer((tmp_path / "tokens_00000_00000.ds.index").read_bytes(), "<u8").tolist() == index
    assert (tmp_path / "tokens_00000_00000.ds.metadata").read_text().splitlines()[1] == str(169 * 2049)
    assert stats["counters"]["tokens"] == 169 * 2049
    assert stats["counters"]["out"] == len(index)


def test_chunk_parts_split_on_chunk_boundaries_and_a_short_shard_writes_nothing(tokenized, tmp_path):
    _write(tokenized, tmp_path / "parts", seed=3, chunks=ChunkShuffle(2049), max_tokens_per_file=10_000)
    tokens, _ = _chunk_files(tokenized, 3, 2049, True)
    parts = sorted((tmp_path / "parts").glob("*.ds"))
    assert [p.stat().st_size // 2 for p in parts] == [4 * 2049] * 42 + [2049]
    assert b"".join(p.read_bytes() for p in parts) == tokens
    _write(tokenized[:1], tmp_path / "short", seed=3, chunks=ChunkShuffle(len(tokenized[0].tokens) + 1))
    assert not (tmp_path / "short").exists()


def test_megatron_shards_hold_the_documents_in_order_as_bin_and_idx(tokenized, tmp_path):
    stats = _write(tokenized, tmp_path, file_format="megatron", num_shards=2, max_tokens_per_file=60_000)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert all(name.endswith((".bin", ".idx")) for name in names)
    bins = [name for name in names if name.endswith(".bin")]
    assert len(bins) == stats["counters"]["files"] > 2
    assert [name[:-4] + ".idx" for name in bins] == [name for name in names if name.endswith(".idx")]
    written = []
    for name in bins:
        data = (tmp_path / name).read_bytes()
        idx = (tmp_path / name[:-4]).with_suffix(".idx").read_bytes()
        sequences = struct.unpack_from("<Q", idx, 18)[0]
        lengths = np.frombuffer(idx, "<i4", sequences, 34).tolist()
        assert sum(lengths) <= 60_000 and sum(lengths) * 2 == len(data)
        starts = np.cumsum([0, *lengths]).tolist()
        written += [data[2 * s : 2 * e] for s, e in itertools.pairwise(starts)]
    assert sorted(written) == sorted(d.tokens.tobytes() for d in tokenized)
    assert stats["counters"]["out"] == 40


def test_a_failed_megatron_run_leaves_no_final_file(tokenized, tmp_path):
    masked = [TokenizedDocument(d.id, d.tokens, np.ones(len(d.tokens), np.uint8)) for d in tokenized[:3]]
    with pytest.raises(Exception, match="no loss masks"):
        _write(tokenized[3:] + masked, tmp_path, file_format="megatron")
    finals = [p.name for p in tmp_path.iterdir() if not p.name.startswith(".beamtrove-tmp-")]
    assert finals == []


def test_bad_chunk_and_format_configuration_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="ds or megatron"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, file_format="bin")
    with pytest.raises(ValueError, match="--shuffle_seed"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, chunks=ChunkShuffle(10))
    with pytest.raises(ValueError, match="at least one token"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, seed=1, chunks=ChunkShuffle(0))
    with pytest.raises(ValueError, match="Megatron files hold whole documents"):
        WriteTokenShards(str(tmp_path), tokenizer=TOKENIZER, seed=1, chunks=ChunkShuffle(10), file_format="megatron")
