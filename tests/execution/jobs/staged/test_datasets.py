"""Staged dataset files: every record a stage writes reads back as it was, and a file can only hold values, not code."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import pickle
import struct

import apache_beam as beam
import numpy as np
import pytest
from tokenizers import Tokenizer

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, Media, Origin
from beamtrove.execution.jobs.staged.datasets import (
    RECORD_TYPES,
    DamagedDataset,
    WriteDataset,
    encode_record,
    partition_of,
    read_records,
    written_files,
)
from beamtrove.transforms.dedup.components import Component
from beamtrove.transforms.dedup.index import IndexMatch
from beamtrove.transforms.dedup.keep import INDEX, ClusterMember, KeepOrder, index_node, input_node
from beamtrove.transforms.stages import KEYED, SAME, SLICED
from beamtrove.transforms.tokens.format import TokenizedDocument
from beamtrove.transforms.writers.base import WrittenFile
from tests.conftest import DATA, require

_LENGTH = struct.Struct("<I")


@pytest.fixture(scope="module")
def records(reviews) -> list:
    """A record of every shape the stages of dedup, dedup_index, tokenize and merge_tokens write, from real reviews.

    Each comment names the datasets that hold that shape in a staged run.
    """
    first, second = reviews[0], reviews[1]
    read = Document(
        second.text,
        second.id,
        media=[Media("m0", 0, "https://reviews.example/a.png", alt="cover", media_bytes=b"\x89PNG\x00", offset=3)],
        metadata={"url": "https://reviews.example/1", "score": 7, "rating": 3.5, "tags": ["a", None, True], "x": {}},
        origin=Origin("file:///reviews/part-0.jsonl", 1234),
    )
    # Beam's own coder refuses a lone surrogate in a plain string, not in a document's text.
    made_in_code = Document(first.text + "\ud800", first.id)
    node = KeepOrder().node(read)
    by_score = KeepOrder("-score").node(read)
    by_date = KeepOrder("-date").node(Document("x", "y", metadata={"date": "2024-05"}))
    tokenizer = Tokenizer.from_file(str(require(DATA / "tokenizers" / "gpt2" / "tokenizer.json")))
    ids = tokenizer.encode(first.text).ids
    return [
        read,  # read/documents, <step>/kept, <step>/excluded
        made_in_code,
        # Metadata JSON would give back otherwise (a tuple, NaN, bytes, a number as a key), and an origin past 64 bits.
        Document(first.text, "odd-metadata", metadata={"span": (1, 2), "nan": float("nan"), 3: b"x"}),
        Document(first.text, "odd-origin", origin=Origin("file:///reviews/part-0.jsonl", 2**64)),
        (bytes(range(16)), read),  # exact|url/keyed
        DeadLetter("read", "malformed_json", "Expecting value", file="part-0.jsonl", line=3, excerpt='{"id": '),
        ClusterMember(read.id, first.id, 2),  # <step>/clusters
        (b"\x01" * 16, IndexMatch(0, "indexed-7")),  # exact|url/indexed
        WrittenFile("/out/index/exact-00000.jsonl.gz", 10, 2048, "exact-${shard}.jsonl.gz", "00ff"),  # write_index
        TokenizedDocument(first.id, np.array(ids, dtype=np.uint16), np.ones(len(ids), dtype=np.uint8)),
        (3, TokenizedDocument(second.id, np.array(ids, dtype=np.uint32))),  # write_tokens/assigned
        (read.id, tuple(node[1])),  # shared_ids/ids
        (read.id, 2, [node[1], ("file:///reviews/part-1.jsonl", 17)]),  # shared_ids/shared
        (b"\x02" * 8, (node, np.arange(14, dtype=np.uint32).tobytes(), b"sketch")),  # minhash/signatures
        (b"\x03" * 8, (node, b"bands")),  # minhash/bands
        (node, by_score),  # minhash/band_links, copy_links
        (node, node),  # minhash/cc-links-NN, cc-large-NN, cc-converged-NN
        Component(by_score, node, 3),  # minhash/components
        (input_node(by_date), (index_node(1, "rank-id"), 3)),  # minhash/node_components against indexes
        (b"\x04" * 8, (index_node(0, None), -1)),  # sentence/indexed
        (b"\x05" * 8, ((7, node), 12)),  # sentence/spans
        ((7, node), (12, None)),  # sentence/repeats
        (3, (by_score, read, 9)),  # bloom/by_slice
        # bloom/candidates: a batch of two documents' shingles
        (2, ([by_score, node], np.array([2, 1]), np.array([1, 7, 2**64 - 1], np.uint64), np.array([1, 3, -2]))),
        (np.zeros(1 << 10, dtype=np.uint8), np.ones(1 << 10, dtype=np.uint8)),  # bloom/partial_filters
        np.zeros(1 << 10, dtype=np.uint8),  # bloom/twice
        (4, [(node, 12, [(by_score, 12)]), (by_score, 3, [(node, 1), (by_date, 2)])]),  # bloom/repeats
        (node, (read, np.zeros((3, 5), dtype=np.uint8))),  # substring/by_node
        (5, (node, 40, b"window")),  # substring/runs
        (node, (3, 90)),  # substring/spans
        ((read.id, 0), {"key": "ab" * 16, "ids": [read.id, first.id], "node": [INDEX, 0]}),  # write_index/grouped
        (b"\x06" * 16, None),  # write_index/sentence
        12,  # write_index/counts
        # What no stage writes today but the form holds: the edges of each type.
        (None, True, False, 0, -128, 127, 128, -(2**63), 2**63 - 1, 2**63, -(2**200), 0.1, -0.0, float("inf")),
        ("", "é" * 300, b"", b"\xff" * 300, (), [], {}, tuple(range(300))),
        {str(n): n for n in range(300)},
        [np.uint64(7), np.int32(-3), np.float32(0.5), np.bool_(True), np.array(2.5), np.zeros((2, 0), np.int16)],
        np.arange(6, dtype=">i4").reshape(2, 3),
        np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],
    ]


def comparable(value):
    """``value`` as plain tuples that compare equal only when the types, fields, order and bytes are the same."""
    kind = type(value)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return ("dict", tuple((comparable(key), comparable(item)) for key, item in value.items()))
    if dataclasses.is_dataclass(value):
        fields = [field.name for field in dataclasses.fields(value)]
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        fields = value._fields
    elif isinstance(value, TokenizedDocument):
        fields = TokenizedDocument.__slots__
    elif isinstance(value, list | tuple):
        return (kind.__name__, tuple(comparable(item) for item in value))
    else:
        return (kind.__name__, value)
    return (kind.__qualname__, tuple((name, comparable(getattr(value, name))) for name in fields))


def write(records: list, folder: pathlib.Path, placement: str = SAME, partitions: int = 1) -> list[pathlib.Path]:
    """Writes ``records`` as the task of partition 0 writes a dataset; returns its files."""
    with beam.Pipeline() as pipeline:
        # Made by a step, not given to Create: Beam's coder would refuse the lone surrogate before WriteDataset.
        made = pipeline | beam.Create([None]) | beam.FlatMap(lambda _: records)
        made | WriteDataset(str(folder), placement, partitions, 0)
    return sorted(folder.rglob("*.rec"))


@pytest.mark.parametrize(
    ("placement", "partition"),
    [
        (KEYED, lambda key: partition_of(key, 3)),
        # Slices 0-11 over 3 partitions: 4 each, where 12 hashed keys may leave one partition with none.
        (SLICED, lambda key: key % 3),
        (SAME, lambda key: 0),
    ],
)
def test_each_placement_sends_records_to_their_partitions(placement, partition, tmp_path):
    records = [(key, f"value {key}") for key in range(12)]
    files = write(records, tmp_path / "data", placement, partitions=3)
    found = {record: int(path.parent.name) for path in files for record in read_records(path)}
    assert found == {record: partition(record[0]) for record in records}


def test_every_record_a_stage_writes_reads_back_as_it_was(records, tmp_path):
    files = write(records, tmp_path / "data")
    read = [record for path in files for record in read_records(path)]
    # Types, field values, dict orders and array dtypes, shapes and bytes: all as written (Documents' origins too,
    # which their equality leaves out).
    assert sorted(map(repr, map(comparable, read))) == sorted(map(repr, map(comparable, records)))
    assert all(array.flags.writeable for array in read if isinstance(array, np.ndarray))


def test_every_record_type_is_written_with_every_field(records):
    written = {type(record) for record in records} | {
        type(item) for record in records if isinstance(record, tuple) for item in record
    }
    assert {kind for kind, _ in RECORD_TYPES} - written <= {Media, Origin}
    for kind, fields in RECORD_TYPES:
        every = (
            [field.name for field in dataclasses.fields(kind)]
            if dataclasses.is_dataclass(kind)
            else getattr(kind, "_fields", kind.__slots__)
        )
        assert sorted(fields) == sorted(every), kind


def test_equal_records_give_equal_bytes_however_they_were_built(reviews, tmp_path):
    # Pickle writes an object met twice as a reference to the first: the same node, shared or built twice,
    # pickles to other bytes, so equal partitions would get other checksums.
    first = reviews[0]
    shared_node = KeepOrder().node(dataclasses.replace(first, origin=Origin("part-0.jsonl", 12)))
    rebuilt_node = (first.id, (f"part-{0}.jsonl", 12))
    shared, rebuilt = (shared_node, shared_node, first), (shared_node, rebuilt_node, dataclasses.replace(first))
    assert pickle.dumps(shared, protocol=5) != pickle.dumps(rebuilt, protocol=5)
    assert encode_record(shared) == encode_record(rebuilt)
    write([shared] * 3, tmp_path / "shared")
    write([rebuilt] * 3, tmp_path / "rebuilt")
    digests = [written_files(tmp_path / name)["."]["0"][0]["sha256"] for name in ("shared", "rebuilt")]
    assert digests[0] == digests[1]


class _Stranger:
    """A type no stage may write: nothing says how to read it back but pickle."""

    def __init__(self, name: str):
        self.name = name


@pytest.mark.parametrize(
    ("record", "named"),
    [(_Stranger("x"), "tests.execution.jobs.staged.test_datasets._Stranger"), ((b"key", {1, 2}), "builtins.set")],
)
def test_a_record_of_an_unregistered_type_fails_its_task_naming_the_type(record, named, tmp_path):
    with pytest.raises(Exception, match="RECORD_TYPES") as failed:
        write([record], tmp_path / "data")
    message = str(failed.value)
    assert f"A staged dataset cannot hold a {named}: " in message
    assert "register the type there" in message and "beamtrove/execution/jobs/staged/datasets.py" in message
    assert not list((tmp_path / "data").rglob("*.rec.json"))


class RunsCode:
    """What a file in a job directory could hold: unpickling it makes a folder, as it could run anything else."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def pickle_frame(marker: pathlib.Path) -> bytes:
    """A frame of 0.15.0's first staged files whose pickle makes ``marker`` when read."""
    payload = pickle.dumps(RunsCode(marker), protocol=5)
    return _LENGTH.pack(len(payload)) + payload


def test_a_frame_holding_a_pickle_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    damaged = tmp_path / "data" / "00000" / "f.rec"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(pickle_frame(marker))
    with pytest.raises(DamagedDataset) as refused:
        list(read_records(damaged))
    assert str(refused.value) == (
        f"{damaged} holds no record at byte 0 (unknown tag 128): the file was changed or damaged."
    )
    assert not marker.exists()
    # What the file holds does run code, when unpickled.
    pickle.loads(damaged.read_bytes()[_LENGTH.size :])
    assert marker.is_dir()


def test_a_file_larger_than_the_read_buffer_reads_back_in_order(reviews, tmp_path):
    # Frames across the reader's megabyte chunks, and a document larger than a chunk.
    whole = Document(" ".join(review.text for review in reviews * 2), "every-review-twice")
    records = [*((number, review) for number, review in enumerate(reviews * 3)), whole, ("after", whole.id)]
    assert len(whole.text) > 1 << 20
    (path,) = write(records, tmp_path / "data")
    assert [comparable(record) for record in read_records(path)] == [comparable(record) for record in records]
    # Where a damaged frame starts is counted across the chunks.
    good = path.stat().st_size
    with path.open("ab") as file:
        file.write(_LENGTH.pack(1) + b"\xff")
    with pytest.raises(DamagedDataset, match=rf"holds no record at byte {good} \(unknown tag 255\)"):
        list(read_records(path))
    # A file cut inside the large document.
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"every-review-twice") - 10])
    with pytest.raises(DamagedDataset, match="ends inside a record: the file was cut short or changed"):
        list(read_records(path))


@pytest.fixture
def written(records, tmp_path) -> pathlib.Path:
    """A dataset file holding the first few records."""
    (path,) = write(records[:3], tmp_path / "data")
    return path


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (2, "ends inside a record's length: the file was cut short or changed."),
        (_LENGTH.size + 3, "ends inside a record: the file was cut short or changed."),
        (-1, "ends inside a record: the file was cut short or changed."),
    ],
)
def test_a_cut_file_is_damaged(written, cut, message):
    data = written.read_bytes()
    written.write_bytes(data[:cut])
    with pytest.raises(DamagedDataset, match="^" + str(written) + " " + message.replace(".", r"\.") + "$"):
        list(read_records(written))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "an empty frame"),
        (b"\x07\x05ab", "the record ends inside a value"),
        (b"\x0b\xff", "the record ends inside a value"),
        (b"\x0b\x02\x00", "the record ends inside a value"),
        (b"\x00\x00", "1 bytes after the record"),
        (b"\x11\x01O\x00", "an array of dtype object"),
        (b"\x11\x03xyz\x00", "no dtype b'xyz'"),
        (b"\x0f\x01\x0d\x00\x00", "unhashable type: 'list'"),
        (b"\x0b\x01" * 5000 + b"\x00", "nested too deep"),
        (b"\x20\x08\x01", "the record ends inside a value"),
    ],
)
def test_a_frame_that_is_not_one_record_is_damaged(written, payload, reason):
    first = written.read_bytes()
    written.write_bytes(first + _LENGTH.pack(len(payload)) + payload)
    with pytest.raises(DamagedDataset) as damaged:
        list(read_records(written))
    assert str(damaged.value) == (
        f"{written} holds no record at byte {len(first)} ({reason}): the file was changed or damaged."
    )
