"""ReadTokenShards on shards laid out by the format's definition, by WriteTokenShards, and damaged ones."""

from __future__ import annotations

import pathlib

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.transforms.tokens import ReadTokenShards, TokenizedDocument, WriteTokenShards
from tests.conftest import run_and_collect


@pytest.fixture(scope="module")
def encodings(udhr_texts, gpt2) -> list[np.ndarray]:
    names = ["eng", "fra", "cym", "jpn", "rus"]
    return [np.array([*e.ids, 50256], dtype="<u2") for e in gpt2.encode_batch([udhr_texts[n] for n in names])]


def _lay_out(path: pathlib.Path, documents: list[np.ndarray], *, loss: list[np.ndarray] | None = None) -> None:
    """Writes a shard byte by byte as the format defines it (DataTrove writes no other way)."""
    path.write_bytes(b"".join(d.tobytes() for d in documents))
    ends = np.cumsum([len(d) for d in documents]).astype("<u8")
    pathlib.Path(f"{path}.index").write_bytes(ends.tobytes())
    if loss is not None:
        pathlib.Path(f"{path}.loss").write_bytes(b"".join(m.tobytes() for m in loss))


def _read(paths, **options):
    found = {}

    def build(pipeline):
        documents, dead_letters = pipeline | ReadTokenShards(paths, **options).with_dead_letters()
        found["documents"], found["dead"] = documents, dead_letters

    return found, build


def test_documents_come_back_as_token_arrays_with_their_masks(encodings, tmp_path):
    masks = [(np.arange(len(e)) % 2).astype(np.uint8) for e in encodings]
    _lay_out(tmp_path / "000_a.ds", encodings[:3], loss=masks[:3])
    _lay_out(tmp_path / "001_b.ds", encodings[3:])
    expected = [TokenizedDocument(f"000_a.ds/{n}", encodings[n], masks[n]) for n in range(3)]
    expected += [TokenizedDocument(f"001_b.ds/{n}", encodings[3 + n]) for n in range(2)]

    def build(pipeline):
        assert_that(pipeline | ReadTokenShards(str(tmp_path)), equal_to(expected))

    stats = run_and_collect(build)["ReadTokenShards"]["counters"]
    assert stats["in"] == stats["out"] == 5 and stats["files"] == 2


def test_four_byte_tokens_are_told_by_the_metadata_file(tmp_path):
    ids = np.array([70000, 3, 204817, 1], dtype="<u4")
    _lay_out(tmp_path / "wide.ds", [ids[:2], ids[2:]])
    (tmp_path / "wide.ds.metadata").write_text("udhr-words/tokenizer.json|4\n4\n4.00 T")

    def build(pipeline):
        expected = [TokenizedDocument("wide.ds/0", ids[:2]), TokenizedDocument("wide.ds/1", ids[2:])]
        assert_that(pipeline | ReadTokenShards(str(tmp_path / "*.ds")), equal_to(expected))

    run_and_collect(build)


def test_what_writetokenshards_wrote_reads_back_unchanged(encodings, tmp_path):
    documents = [TokenizedDocument(f"doc/{n}", e, np.ones(len(e), dtype=np.uint8)) for n, e in enumerate(encodings)]

    def write(pipeline):
        pipeline | beam.Create(documents) | WriteTokenShards(str(tmp_path), tokenizer="gpt2", num_shards=1)

    run_and_collect(write)
    renamed = [TokenizedDocument(f"tokens_00000_00000.ds/{n}", d.tokens, d.loss_mask) for n, d in enumerate(documents)]

    def read(pipeline):
        assert_that(pipeline | ReadTokenShards(str(tmp_path)), equal_to(renamed))

    run_and_collect(read)


def test_damaged_shards_give_what_is_readable_and_dead_letters(encodings, tmp_path):
    _lay_out(tmp_path / "cut.ds", encodings[:3])
    data = (tmp_path / "cut.ds").read_bytes()
    (tmp_path / "cut.ds").write_bytes(data[: len(data) - 10])  # ends inside the third document
    _lay_out(tmp_path / "long.ds", encodings[3:4])
    with (tmp_path / "long.ds").open("ab") as extra:
        extra.write(encodings[4].tobytes())
    (tmp_path / "orphan.ds").write_bytes(encodings[0].tobytes())
    _lay_out(tmp_path / "bad_index.ds", encodings[:1])
    (tmp_path / "bad_index.ds.index").write_bytes(b"\x00" * 5)

    found, build = _read(str(tmp_path))

    def checked(pipeline):
        build(pipeline)
        ids = found["documents"] | beam.Map(lambda d: d.id)
        assert_that(ids, equal_to(["cut.ds/0", "cut.ds/1", "long.ds/0"]))
        reasons = found["dead"] | "Reasons" >> beam.Map(lambda d: (d.file.rsplit("/", 1)[1], d.reason))
        expected = [
            ("cut.ds", "truncated"),
            ("long.ds", "trailing_tokens"),
            ("orphan.ds", "missing_index"),
            ("bad_index.ds", "invalid_shard"),
        ]
        assert_that(reasons, equal_to(expected), label="DeadLetters")

    counters = run_and_collect(checked)["ReadTokenShards"]["counters"]
    assert counters["out"] == 3
    assert counters["errors.truncated"] == counters["errors.trailing_tokens"] == 1
    assert counters["errors.missing_index"] == counters["errors.invalid_shard"] == 1
