"""The file sink every writer shares: templated destinations, rollover the format asks for, atomic finalize."""

from __future__ import annotations

import pathlib

import apache_beam as beam
import pytest

from beamtrove.document import Document
from beamtrove.layout import WRITER_TEMP_PREFIX
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers import FileFormat, FilenameTemplate, RecordWriter, RolloverNeeded, WriteFiles
from beamtrove.transforms.writers.base import TempFile, document_fields, document_key
from tests.conftest import run_and_collect


class _LinesWriter(RecordWriter):
    """One text per line; past ``per_file`` lines the file asks for a new one."""

    def __init__(self, stream, per_file: int):
        self._stream = stream
        self._per_file = per_file
        self.records = 0

    def write(self, document: Document) -> None:
        if self.records == self._per_file:
            raise RolloverNeeded([document])
        self._stream.write(document.text.replace("\n", " ").encode() + b"\n")
        self.records += 1

    def close(self) -> None:
        self._stream.flush()


class _LinesFormat(FileFormat):
    def __init__(self, per_file: int):
        self._per_file = per_file

    def open(self, stream, suffix: str, metrics: StepMetrics) -> RecordWriter:
        return _LinesWriter(stream, self._per_file)


def _reviews(movie_reviews, count: int) -> list[Document]:
    return [
        Document(text, name, metadata={"sentiment": name.split("/")[0]})
        for name, text in list(movie_reviews.items())[:count]
    ]


def test_each_destination_gets_contiguously_numbered_files_the_format_fills(movie_reviews, tmp_path):
    # The corpus lists negative reviews first: take both kinds.
    documents = _reviews(movie_reviews, 1000)[990:] + _reviews(movie_reviews, 1013)[1000:]
    sink = WriteFiles(
        str(tmp_path), "${sentiment}/part-${shard}.txt", _LinesFormat(per_file=4),
        fields_of=document_fields, key_of=document_key,
    )  # fmt: skip
    steps = run_and_collect(lambda p: p | beam.Create(documents) | "Write" >> sink)
    written = {path.relative_to(tmp_path).as_posix(): path.read_text().splitlines() for path in tmp_path.rglob("*.txt")}
    for sentiment, count in (("neg", 10), ("pos", 13)):
        names = sorted(name for name in written if name.startswith(f"{sentiment}/"))
        assert names == [f"{sentiment}/part-{shard:05d}.txt" for shard in range(len(names))]
        assert all(1 <= len(written[name]) <= 4 for name in names)
        assert sum(len(written[name]) for name in names) == count
    lines = sorted(line for file in written.values() for line in file)
    assert lines == sorted(document.text.replace("\n", " ") for document in documents)
    counters = steps["Write"]["counters"]
    assert (counters["in"], counters["out"], counters["files"]) == (23, 23, len(written))
    assert counters["bytes"] == sum(path.stat().st_size for path in tmp_path.rglob("*.txt"))
    assert not list(tmp_path.glob(f"{WRITER_TEMP_PREFIX}*")), "the temporary directory was left behind"


def test_templates_keep_every_file_inside_the_output():
    template = FilenameTemplate("${dump}/${language}/part-${shard}.jsonl.gz")
    assert template.suffix == ".jsonl.gz"
    assert (
        template.destination({"dump": "CC-MAIN-2024-22", "language": "en"})
        == "CC-MAIN-2024-22/en/part-${shard}.jsonl.gz"
    )
    # Missing, empty and dot-only values become "unknown"; separators and other unsafe characters become "_".
    assert template.destination({"language": "../../etc"}) == "unknown/.._.._etc/part-${shard}.jsonl.gz"
    assert template.destination({"dump": "..", "language": ""}) == "unknown/unknown/part-${shard}.jsonl.gz"
    assert FilenameTemplate.with_shard("en/part-${shard}.jsonl.gz", 12) == "en/part-00012.jsonl.gz"
    for bad, message in (("part.jsonl", r"needs a \$\{shard\}"), ("/tmp/part-${shard}", "relative path"),
                         ("../part-${shard}", "relative path")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            FilenameTemplate(bad)


def test_a_temporary_file_hands_back_what_its_format_could_not_take(movie_reviews, tmp_path):
    class _FullAtClose(_LinesWriter):
        """Like a Parquet writer whose last rows need another schema: closing hands back what it cannot write."""

        handed_back = False

        def close(self) -> None:
            if not self.handed_back:
                self.handed_back = True
                raise RolloverNeeded(["left over"])

    class _Format(_LinesFormat):
        def open(self, stream, suffix, metrics):
            return _FullAtClose(stream, self._per_file)

    temp = TempFile.open(str(tmp_path / "tmp"), ".txt", _Format(per_file=10), StepMetrics("write"))
    for document in _reviews(movie_reviews, 3):
        temp.writer.write(document)
    leftover, size = temp.close()
    assert leftover == ["left over"]
    assert size == pathlib.Path(temp.path).stat().st_size > 0 and temp.path.endswith(".txt")
