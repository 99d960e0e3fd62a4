"""The shared file source: vanished files, skip and limit across files, work spread over workers."""

from __future__ import annotations

import json
import os
import re

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.fs import InputFile
from beamtrove.transforms.readers import ReadJsonl, RowError, RowFields
from tests.conftest import run_and_collect


def _write_udhr_files(directory, udhr_texts, files=3, per_file=4):
    languages = sorted(udhr_texts)
    for f in range(files):
        rows = [
            {"id": languages[f * per_file + i], "text": udhr_texts[languages[f * per_file + i]]}
            for i in range(per_file)
        ]
        (directory / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return languages[: files * per_file]


def test_a_file_that_vanishes_after_matching_is_a_dead_letter(tmp_path, udhr_texts):
    ids = _write_udhr_files(tmp_path, udhr_texts)
    reader = ReadJsonl(str(tmp_path / "*.jsonl")).with_dead_letters()
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
