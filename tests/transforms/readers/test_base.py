"""The shared file reader: files matched when the run starts, skip and limit across files, work spread over workers."""

from __future__ import annotations

import itertools
import json
import os
import re
import uuid

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.dead_letter import DeadLetter
from beamtrove.execution.build import build as build_pipeline
from beamtrove.fs import InputFile, match_inputs
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.transforms.readers import ReadJsonl, ReadWarc, RowError, RowFields
from tests.conftest import require, run_and_collect


def _write_udhr_files(directory, udhr_texts, files=3, per_file=4):
    languages = sorted(udhr_texts)
    for f in range(files):
        rows = [
            {"id": languages[f * per_file + i], "text": udhr_texts[languages[f * per_file + i]]}
            for i in range(per_file)
        ]
        (directory / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return languages[: files * per_file]


def test_files_are_matched_again_when_the_run_starts(tmp_path, udhr_texts):
    ids = _write_udhr_files(tmp_path, udhr_texts, files=4)
    (tmp_path / "part-3.jsonl").rename(tmp_path / "later.txt")
    reader = ReadJsonl(str(tmp_path / "*.jsonl")).with_dead_letters()
    assert [file.name for file in reader.files] == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"]
    os.remove(tmp_path / "part-1.jsonl")
    (tmp_path / "later.txt").rename(tmp_path / "part-3.jsonl")

    def build(pipeline):
        docs, dead = pipeline | reader
        assert_that(docs | beam.Map(lambda d: d.id), equal_to(ids[:4] + ids[8:]), label="Docs")
        assert_that(dead, equal_to([]), label="Dead")

    counters = run_and_collect(build)["ReadJsonl"]["counters"]
    assert (counters["in"], counters["out"], counters["files"]) == (12, 12, 3)


def test_a_listed_file_that_vanishes_is_a_dead_letter(tmp_path, udhr_texts):
    ids = _write_udhr_files(tmp_path, udhr_texts)
    # Listed files (as --input_ranges lists them) are read as listed, not matched again.
    reader = ReadJsonl(match_inputs(str(tmp_path / "*.jsonl"))).with_dead_letters()
    os.remove(tmp_path / "part-1.jsonl")

    def build(pipeline):
        docs, dead = pipeline | reader
        assert_that(docs | beam.Map(lambda d: d.id), equal_to(ids[:4] + ids[8:]), label="Docs")
        assert_that(
            dead | beam.Map(lambda d: (d.reason, d.file, d.message.split(":")[0])),
            equal_to([("read_failed", str(tmp_path / "part-1.jsonl"), "FileNotFoundError")]),
            label="Dead",
        )

    stats = run_and_collect(build)
    counters = stats["ReadJsonl"]["counters"]
    assert (counters["in"], counters["out"], counters["errors.read_failed"]) == (9, 8, 1)


def test_a_pattern_that_matches_nothing_when_the_run_starts_is_a_dead_letter(tmp_path, udhr_texts):
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    gone.mkdir()
    ids = _write_udhr_files(kept, udhr_texts, files=1)
    _write_udhr_files(gone, udhr_texts, files=2)
    reader = ReadJsonl([str(kept), str(gone / "*.jsonl")]).with_dead_letters()
    for path in gone.iterdir():
        path.unlink()

    def build(pipeline):
        docs, dead = pipeline | reader
        assert_that(docs | beam.Map(lambda d: d.id), equal_to(ids), label="Docs")
        assert_that(
            dead | beam.Map(lambda d: (d.step, d.reason, d.file, d.message)),
            equal_to(
                [
                    (
                        "ReadJsonl",
                        "no_match",
                        str(gone / "*.jsonl"),
                        f"No files match {str(gone / '*.jsonl')!r}: check the path and the pattern.",
                    )
                ]
            ),
            label="Dead",
        )

    counters = run_and_collect(build)["ReadJsonl"]["counters"]
    assert (counters["in"], counters["out"], counters["errors.no_match"], counters["files"]) == (5, 4, 1, 1)


def test_a_run_reads_what_each_matched_file_reads_alone(data_dir):
    warcs = require(data_dir / "warc")
    # Folders and patterns that overlap, with files of other kinds beside the WARCs: each WARC is read once.
    reader = ReadWarc([str(warcs), str(warcs / "*.warc.gz"), str(warcs / "warcio-edge-cases" / "*.arc.gz")])
    expected = [
        (outcome.id, outcome.text)
        for file in reader.files
        for outcome in reader.read_file(file)
        if not isinstance(outcome, DeadLetter)
    ]
    assert len(expected) == 89

    def build(pipeline):
        assert_that(pipeline | reader | beam.Map(lambda d: (d.id, d.text)), equal_to(expected))

    counters = run_and_collect(build)["ReadWarc"]["counters"]
    assert (counters["out"], counters["files"]) == (89, len(reader.files))


def test_the_graph_holds_the_patterns_not_the_files_they_match(tmp_path, monkeypatch):
    spec = pipeline_spec("filter")
    folder = tmp_path / "input"
    folder.mkdir()

    def graph_bytes() -> int:
        # Random names (staging folders, the ids cloudpickle gives the classes it pickles) change a graph's size by
        # a few bytes from one build to the next; numbered alike in both builds, only the input can differ.
        numbers = itertools.count()
        monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(numbers)))
        argv = ["--input", str(folder), "--output", str(tmp_path / "out"), "--steps", "gopher_repetition"]
        built = build_pipeline(spec, parse(spec, argv), inspect_output=False)
        assert len(built.flow.reader.files) == len(list(folder.iterdir()))
        return len(built.pipeline.to_runner_api().SerializeToString())

    def add_files(count: int) -> None:
        for number in range(len(list(folder.iterdir())), count):
            (folder / f"part-{number:05d}.jsonl").write_text('{"text": "tiny"}\n')

    add_files(20)
    twenty = graph_bytes()
    add_files(20_000)
    assert graph_bytes() <= twenty


def test_skip_and_limit_count_documents_across_files(tmp_path, udhr_texts):
    ids = _write_udhr_files(tmp_path, udhr_texts)

    def build(pipeline):
        docs = pipeline | ReadJsonl(str(tmp_path), skip=3, limit=5)
        assert_that(docs | beam.Map(lambda d: d.id), equal_to(ids[3:8]))

    stats = run_and_collect(build)
    counters = stats["ReadJsonl"]["counters"]
    # the third file is never opened: the limit was reached in the second
    assert counters == {"in": 8, "out": 5, "skipped.skip_option": 3, "files": 2, "bytes": _sizes(tmp_path, 2)}


def _sizes(directory, files):
    return sum((directory / f"part-{f}.jsonl").stat().st_size for f in range(files))


@pytest.mark.slow
def test_files_are_spread_over_workers(tmp_path, udhr_texts):
    _write_udhr_files(tmp_path, udhr_texts, files=4, per_file=2)

    def build(pipeline):
        pids = pipeline | ReadJsonl(str(tmp_path)) | beam.Map(lambda d: os.getpid()) | beam.Distinct()
        assert_that(pids | beam.combiners.Count.Globally(), equal_to([2]))

    pipeline = test_pipeline.TestPipeline(
        options=PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    )
    build(pipeline)
    pipeline.run().wait_until_finish()


def test_rows_the_coder_or_a_writer_could_not_store_are_refused_with_a_reason(udhr_texts):
    file = InputFile("/data/udhr.jsonl", "udhr.jsonl", 1)
    english = udhr_texts["eng"][:2000]
    deep = {"leaf": 1}
    for _ in range(150):
        deep = {"k": deep}
    # Python's json module reads the escape \ud800 as a lone surrogate, which UTF-8 (so every writer) cannot encode.
    refused = {
        "lone_surrogate": ({"text": english + "\ud800"}, "text holds the lone surrogate U+D800 at character 2000"),
        "nested_too_deep": ({"text": english, "metadata": {"deep": deep}}, "metadata nests 152 levels"),
        "not_json": ({"text": english, "big": 2**64}, "metadata['big'] cannot be stored as JSON: Integer exceeds"),
    }
    for reason, (row, message) in refused.items():
        with pytest.raises(RowError, match=re.escape(message)) as error:
            RowFields().to_document(row, file, 0)
        assert error.value.reason == reason
    kept = RowFields().to_document({"text": english, "metadata": {"languages": [{"code": "en"}]}}, file, 0)
    assert kept.metadata == {"languages": [{"code": "en"}], "file_path": "/data/udhr.jsonl"}
