"""The file sink every writer shares: templated destinations, rollover the format asks for, atomic finalize."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re

import apache_beam as beam
import pytest

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.layout import WRITER_TEMP_PREFIX
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers import FileFormat, FilenameTemplate, RecordWriter, RolloverNeeded, WriteFiles
from beamtrove.transforms.writers.base import TempFile, document_fields, document_key
from tests.conftest import jsonl_rows, run_and_collect


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
    # Missing, empty and dot-only values become "unknown"; separators and other unsafe characters become "_",
    # and a leading "." that would hide the name from readers "%".
    assert template.destination({"language": "../../etc"}) == "unknown/%._.._etc/part-${shard}.jsonl.gz"
    assert template.destination({"dump": "..", "language": ""}) == "unknown/unknown/part-${shard}.jsonl.gz"
    assert FilenameTemplate.with_shard("en/part-${shard}.jsonl.gz", 12) == "en/part-00012.jsonl.gz"
    for bad, message in (("part.jsonl", r"needs a \$\{shard\}"), ("/tmp/part-${shard}", "absolute path"),
                         ("../part-${shard}", "climbs out")):  # fmt: skip
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


def _reviews_jsonl(movie_reviews, path: pathlib.Path, tags: list[str]) -> pathlib.Path:
    """Real movie reviews as a JSONL file, review ``i`` tagged ``tags[i]`` in its metadata."""
    reviews = list(movie_reviews.items())[: len(tags)]
    rows = [
        {"text": text, "id": name, "metadata": {"tag": tag}} for (name, text), tag in zip(reviews, tags, strict=True)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _name_bytes(directory: pathlib.Path) -> list[int]:
    return [len(part.encode()) for path in directory.rglob("*") for part in path.relative_to(directory).parts]


def test_values_too_long_for_a_file_name_keep_their_start_and_end_in_a_hash_of_the_whole_value():
    template = FilenameTemplate("${url}/part-${shard}.jsonl")
    url = "https://example.com/search?q=" + "beam+" * 60
    name = template.destination({"url": url}).split("/")[0]
    # 83 bytes of the value made safe, "-", 16 hex digits: 100 bytes.
    start = "https___example.com_search_q=" + "beam+" * 10 + "beam"
    assert name == f"{start}-{hashlib.sha256(url.encode()).hexdigest()[:16]}" and len(name) == 100
    assert template.destination({"url": url}) == template.destination({"url": url})
    # Two values that differ only past the cut still get different names.
    assert template.destination({"url": url + "x"}) != template.destination({"url": url})
    # A cut never splits a character: Japanese takes 3 bytes each.
    japanese = template.destination({"url": "日本語のページ" * 40}).split("/")[0]
    assert len(japanese.encode()) <= 100 and japanese.startswith("日本語のページ")
    # Several placeholders in one name share its 255 bytes, ${shard} keeping room for a six-digit number.
    crowded = FilenameTemplate("${dump}-${language}-${url}-part-${shard}.jsonl.gz")
    rendered = crowded.with_shard(crowded.destination({"dump": url, "language": url, "url": url}), 123456)
    assert len(rendered.encode()) <= 255 and "/" not in rendered


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("x::file:///tmp/out/${shard}.jsonl", "holds '::'"),
        ("file:///tmp/out/${shard}.jsonl", r"holds a URL \(file://\.\.\.\)"),
        ("memory://out/${shard}.jsonl", r"holds a URL \(memory://\.\.\.\)"),
        ("en/gs://bucket/${shard}.jsonl", r"holds a URL \(gs://\.\.\.\)"),
        ("/tmp/out/part-${shard}.jsonl", "is an absolute path"),
        ("en/../../part-${shard}.jsonl", "climbs out of the output directory"),
        ("en//part-${shard}.jsonl", "has an empty or '.' folder name"),
        ("./part-${shard}.jsonl", "has an empty or '.' folder name"),
        ("x" * 256 + "/part-${shard}.jsonl", "could render longer than 255 bytes"),
        ("".join(f"${{k{i}}}" for i in range(11)) + "-${shard}.jsonl", "could render longer than 255 bytes"),
    ],
)
def test_templates_that_could_not_name_a_file_inside_the_output_fail_at_construction(template, problem):
    example = re.escape(
        "A template is a path relative to the output directory, e.g. '${language}/part-${shard}.jsonl.gz'"
    )
    with pytest.raises(ValueError, match=f"{problem}.*{example}"):
        FilenameTemplate(template)
    with pytest.raises(ValueError, match=problem):
        WriteFiles("/tmp/out", template, _LinesFormat(per_file=4), fields_of=document_fields, key_of=document_key)


def test_a_metadata_value_too_long_for_a_file_name_does_not_end_the_run(movie_reviews, tmp_path):
    # Issue 16, case 8: a 300-byte value in --filename_template ended the run at finalize with
    # "OSError: File name too long", leaving no stats.json and the temporary files behind.
    long_tag = next(text for text in movie_reviews.values() if len(text) > 400)[:300]
    tags = ["short"] * 20
    tags[5] = long_tag
    jsonl = _reviews_jsonl(movie_reviews, tmp_path / "reviews.jsonl", tags)
    out = tmp_path / "out"
    argv = ["run", "convert", "--input", str(jsonl), "--input_format", "jsonl", "--output", str(out)]
    assert main([*argv, "--filename_template", "${tag}/part-${shard}.jsonl"]) == 0

    hashed = re.sub(r"[^\w.=+-]", "_", long_tag)[:83] + "-" + hashlib.sha256(long_tag.encode()).hexdigest()[:16]
    assert [row["id"] for row in jsonl_rows(out / hashed)] == [list(movie_reviews)[5]]
    assert len(jsonl_rows(out / "short")) == 19
    assert max(_name_bytes(out)) <= 255
    assert json.loads((out / "stats.json").read_text())["steps"]["write"]["counters"]["out"] == 20
    assert not list(out.glob(f"{WRITER_TEMP_PREFIX}*"))


@pytest.mark.parametrize(
    "template",
    ["x::file://{target}/${shard}.jsonl", "file://{target}/${shard}.jsonl", "memory://{target}/${shard}.jsonl"],
)
def test_a_template_naming_another_place_fails_before_any_work(movie_reviews, tmp_path, capsys, template):
    # Issue 16, case 9: with '::' every shard wrote the same file; file:// and memory:// templates failed only
    # once every document had been processed.
    jsonl = _reviews_jsonl(movie_reviews, tmp_path / "reviews.jsonl", ["en", "fr"] * 10)
    out, target = tmp_path / "out", tmp_path / "target"
    argv = ["run", "convert", "--input", str(jsonl), "--input_format", "jsonl", "--output", str(out)]
    assert main([*argv, "--filename_template", template.replace("{target}", str(target))]) == 2
    assert "A template is a path relative to the output directory" in capsys.readouterr().err
    assert not out.exists() and not target.exists()


def test_values_never_render_names_readers_skip_or_a_runs_own_folders(movie_reviews, tmp_path):
    # A tag "_draft" made a folder every reader skips as bookkeeping, and a tag "dead_letters" mixed documents into
    # the run's dead letters, which the dead letters writer then replaced.
    tags = ["_draft", ".hidden", "dead_letters", "en"] * 5
    jsonl = _reviews_jsonl(movie_reviews, tmp_path / "reviews.jsonl", tags)
    out = tmp_path / "out"
    argv = ["run", "convert", "--input", str(jsonl), "--input_format", "jsonl", "--output", str(out)]
    assert main([*argv, "--filename_template", "${tag}/part-${shard}.jsonl"]) == 0

    folders = sorted(path.name for path in out.iterdir() if path.is_dir())
    dead_letters = "dead_letters-" + hashlib.sha256(b"dead_letters").hexdigest()[:16]
    assert folders == sorted(["%hidden", dead_letters, "en", "~draft"])
    assert all(len(jsonl_rows(out / folder)) == 5 for folder in folders)
    # Read back as a folder, every document is there.
    assert main(["run", "convert", "--input", str(out), "--output", str(tmp_path / "back")]) == 0
    assert len(jsonl_rows(tmp_path / "back")) == 20


def test_a_template_naming_a_hidden_folder_is_refused():
    with pytest.raises(ValueError, match="readers skip as bookkeeping"):
        FilenameTemplate("_meta/part-${shard}.jsonl")
