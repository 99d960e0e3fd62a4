"""ProcessInputs over real WARC pages: per-input outputs, markers and counters."""

from __future__ import annotations

import gzip
import json

import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that

from beamtrove.fs import InputFile
from beamtrove.transforms.extractors import Extract, Resiliparse
from beamtrove.transforms.filters import Filter, GopherQualityFilter
from beamtrove.transforms.per_input import ProcessInputs, input_stem
from beamtrove.transforms.readers import ReadJsonl, ReadWarc
from tests.conftest import jsonl_lines


def test_input_stem_keeps_the_relative_path_and_drops_extensions():
    assert input_stem(InputFile("/d/a/x.warc.gz", "a/x.warc.gz", 1)) == "a--x"
    assert input_stem(InputFile("/d/x.jsonl", "x.jsonl", 1)) == "x"


def test_inputs_that_would_share_output_names_are_refused(tmp_path):
    (tmp_path / "part.jsonl").write_text('{"text": "a"}\n')
    with gzip.open(tmp_path / "part.jsonl.gz", "wt") as out:
        out.write('{"text": "b"}\n')
    reader = ReadJsonl(str(tmp_path))
    with pytest.raises(ValueError, match="'part'"):
        ProcessInputs(reader, reader.files, [], str(tmp_path / "out"), "sha")


def test_each_input_gets_its_outputs_and_a_marker_counting_them(data_dir, tmp_path):
    reader = ReadWarc(str(data_dir / "warc" / "dolma_wget_sample-000*.warc.gz"))
    quality = Filter(GopherQualityFilter())
    steps = [("extract", Extract(Resiliparse()).step_fn()), (quality.step, quality.step_fn())]
    out = tmp_path / "out"

    def check(markers):
        assert sorted(m["name"] for m in markers) == [f"dolma_wget_sample-000{i}.warc.gz" for i in (0, 1)]
        for marker in markers:
            stem = marker["name"].removesuffix(".warc.gz")
            documents = out / "documents" / f"{stem}.jsonl.gz"
            excluded = out / "excluded" / "gopher_quality" / f"{stem}.jsonl.gz"
            assert marker["outputs"][f"documents/{stem}.jsonl.gz"]["bytes"] == documents.stat().st_size
            rows = [json.loads(line) for line in jsonl_lines([documents])]
            assert len(rows) == marker["counts"]["documents"] > 0
            assert {row["metadata"]["file_path"] for row in rows} == {marker["input"]}
            dropped = [json.loads(line) for line in jsonl_lines([excluded])]
            assert len(dropped) == marker["counts"]["excluded"]["gopher_quality"] > 0
            assert all(row["metadata"]["filter_reason"].startswith("gopher_") for row in dropped)
            assert marker["config_sha256"] == "sha"

    with BeamTestPipeline() as pipeline:
        markers = pipeline | ProcessInputs(reader, reader.files, steps, str(out), "sha")
        assert_that(markers, check)
    assert json.loads((out / "_completed" / "dolma_wget_sample-0000.json").read_text())["counts"]["read"] > 0
