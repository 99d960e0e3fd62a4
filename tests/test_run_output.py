"""Reading a run's output folder: which folders are one, each kind of record, the writers' formats, lazy reading."""

from __future__ import annotations

import gzip
import itertools
import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import records as record_reading
from beamtrove.run_output import OutputRecord, RunOutput
from beamtrove.transforms.dedup.keep import ClusterMember


def _rows(movie_reviews, start: int, count: int, **metadata) -> list[dict]:
    """Real reviews laid out as beamtrove's writers lay documents out."""
    names = list(movie_reviews)[start : start + count]
    return [{"text": movie_reviews[name], "id": name, "metadata": {"review": name, **metadata}} for name in names]


def _write(path: pathlib.Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)


def _ids(records) -> list[str]:
    return [record.document.id for record in records]


@pytest.fixture
def run(movie_reviews, tmp_path) -> pathlib.Path:
    """A run's output folder: documents in the three forms writers write, two steps' exclusions, dead letters."""
    out = tmp_path / "run"
    _write(out / "documents" / "part-00000.jsonl.gz", _rows(movie_reviews, 0, 3))
    pq.write_table(pa.Table.from_pylist(_rows(movie_reviews, 3, 2)), out / "documents" / "part-00001.parquet")
    _write(out / "documents" / "part-00002.jsonl.zst", _rows(movie_reviews, 5, 1))
    _write(out / "documents" / ".part-00003.jsonl.gz.tmp", _rows(movie_reviews, 6, 1))
    _write(
        out / "excluded" / "gopher_quality" / "part-00000.jsonl.gz", _rows(movie_reviews, 10, 2, filter_reason="short")
    )
    _write(out / "excluded" / "c4_quality" / "part-00000.jsonl.gz", _rows(movie_reviews, 12, 1, filter_reason="curly"))
    letter = DeadLetter("read", "malformed_json", "unexpected end", file="a.jsonl", line=3, excerpt='{"text": "cut')
    _write(out / "dead_letters" / "part-00000.jsonl", [letter.to_row()])
    _write(out / "clusters" / "minhash" / "part-00000.jsonl.gz", [{"id": "b", "kept_id": "a", "cluster_size": 2}])
    (out / "stats.json").write_text(json.dumps({"pipeline": "fineweb", "steps": {"read": {"counters": {"in": 7}}}}))
    return out


def test_a_folder_holding_stats_or_a_resume_record_is_a_run_output(run, tmp_path):
    assert RunOutput.at(str(run)).folder == str(run)
    resumable = tmp_path / "resumable"
    resumable.mkdir()
    (resumable / "_resume.json").write_text("{}")
    assert RunOutput.at(str(resumable)) is not None
    for other in (run / "documents", run / "stats.json", tmp_path / "missing", f"{tmp_path}/*", " "):
        assert RunOutput.at(str(other)) is None, other
    assert RunOutput.at(str(run)).stats()["pipeline"] == "fineweb"


def test_documents_are_read_in_file_name_order_in_every_format_writers_write(run, movie_reviews):
    documents = RunOutput(str(run)).documents()
    assert [file.name for file in documents.files] == [
        "part-00000.jsonl.gz",
        "part-00001.parquet",
        "part-00002.jsonl.zst",
    ]
    records = list(documents)
    assert _ids(records) == list(movie_reviews)[:6]
    assert all(record.step is None and record.reason is None for record in records)
    assert [record.document.text for record in records] == [movie_reviews[name] for name in list(movie_reviews)[:6]]
    assert records[3].document.metadata["review"] == list(movie_reviews)[3]
    # Each iteration reads the files anew.
    assert _ids(documents) == _ids(records)


def test_a_run_writing_documents_into_its_folder_is_read_without_what_it_set_aside(run):
    for part in (run / "documents").iterdir():
        part.rename(run / part.name)
    (run / "documents").rmdir()
    output = RunOutput(str(run))
    assert output.documents_folder == str(run)
    assert [file.name for file in output.documents().files] == [
        "part-00000.jsonl.gz",
        "part-00001.parquet",
        "part-00002.jsonl.zst",
    ]
    for part in list(run.glob("part-*")):
        part.unlink()
    assert output.documents().files == () and list(output.documents()) == []


def test_excluded_documents_carry_their_step_and_reason_step_after_step(run, movie_reviews):
    output = RunOutput(str(run))
    assert output.excluded_steps() == ["c4_quality", "gopher_quality"]
    names = list(movie_reviews)
    assert [(r.document.id, r.step, r.reason) for r in output.excluded()] == [
        (names[12], "c4_quality", "curly"),
        (names[10], "gopher_quality", "short"),
        (names[11], "gopher_quality", "short"),
    ]
    assert [r.step for r in output.excluded(["gopher_quality", "c4_quality"])] == ["gopher_quality"] * 2 + [
        "c4_quality"
    ]
    assert _ids(output.excluded("c4_quality")) == [names[12]]
    assert list(output.excluded("no_such_step")) == []


def test_dead_letters_are_records_with_their_reason_step_and_excerpt(run):
    (record,) = RunOutput(str(run)).dead_letters()
    assert (record.step, record.reason, record.document.text) == ("read", "malformed_json", '{"text": "cut')
    assert record.document.metadata["file"] == "a.jsonl" and record.document.metadata["line"] == 3


def test_a_cluster_map_is_read_as_its_members(run):
    output = RunOutput(str(run))
    assert output.cluster_steps() == ["minhash"]
    assert list(output.clusters("minhash")) == [ClusterMember("b", "a", 2)]


def test_a_line_or_file_that_cannot_be_read_is_a_dead_letter_in_its_place(run, movie_reviews):
    folder = run / "excluded" / "gopher_quality"
    rows = _rows(movie_reviews, 20, 2, filter_reason="short")
    (folder / "part-00001.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n" + json.dumps(rows[1]) + "\n")
    (folder / "part-00002.jsonl.gz").write_bytes(b"not gzip")
    _write(folder / "part-00003.jsonl.gz", _rows(movie_reviews, 22, 1, filter_reason="short"))
    outcomes = list(RunOutput(str(run)).excluded("gopher_quality"))
    kinds = [type(outcome).__name__ for outcome in outcomes]
    assert kinds == ["OutputRecord"] * 3 + ["DeadLetter", "OutputRecord", "DeadLetter", "OutputRecord"]
    assert (outcomes[3].reason, outcomes[3].line) == ("malformed_json", 2)
    assert outcomes[5].file == str(folder / "part-00002.jsonl.gz")
    assert outcomes[-1] == OutputRecord(outcomes[-1].document, "gopher_quality", "short")


def test_a_file_is_opened_only_once_the_records_before_it_were_taken(run, monkeypatch):
    opened = []
    original = record_reading.open_url

    def recording(url, *args, **kwargs):
        opened.append(pathlib.Path(url).name)
        return original(url, *args, **kwargs)

    monkeypatch.setattr(record_reading, "open_url", recording)
    records = iter(RunOutput(str(run)).documents())
    assert opened == []
    list(itertools.islice(records, 3))
    assert opened == ["part-00000.jsonl.gz"]
    next(records)
    assert opened == ["part-00000.jsonl.gz", "part-00001.parquet"]
