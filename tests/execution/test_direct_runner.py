"""The DirectRunner as beamtrove runs it: straight to the FnApiRunner, never first trying to fetch and run Prism."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import prism_runner

from beamtrove.execution.direct_runner import pipeline_runner
from beamtrove.execution.run import run_pipeline
from beamtrove.options import parse
from beamtrove.pipelines import pipeline_spec
from tests.conftest import jsonl_rows, require


@pytest.fixture
def prism_tries(monkeypatch) -> list[str]:
    """Each time Beam tries to run a pipeline on Prism; the try fails as a download fails offline."""
    tries = []

    def run_on_prism(self, pipeline, options):
        tries.append("prism")
        raise RuntimeError("Unable to fetch remote prism binary")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", run_on_prism)
    return tries


def test_beams_own_direct_runner_tries_prism_first(prism_tries):
    # What beamtrove's runner avoids: without it, every DirectRunner run starts with a try of Prism.
    with beam.Pipeline(options=PipelineOptions([])) as pipeline:
        _ = pipeline | beam.Create([1, 2]) | beam.Map(lambda value: value + 1)
    assert prism_tries == ["prism"]


def test_a_direct_runner_run_goes_straight_to_the_fn_api_runner(data_dir, tmp_path, prism_tries):
    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path), "--extractor", "resiliparse", "--progress_interval", "0"]
    result = run_pipeline(extract, parse(extract, [*argv, "--runner", "DirectRunner"]))
    assert result.succeeded
    assert prism_tries == []
    assert result.stats["runner"] == "DirectRunner"
    assert result.stats["steps"]["write_documents"]["counters"]["out"] == len(jsonl_rows(tmp_path / "documents")) > 0


@pytest.mark.parametrize(
    "runner", [None, "DirectRunner", "direct", "apache_beam.runners.direct.direct_runner.DirectRunner"]
)
def test_every_name_of_the_direct_runner_gets_beamtroves(runner):
    argv = [] if runner is None else ["--runner", runner]
    assert type(pipeline_runner(PipelineOptions(argv))).__name__ == "_FnApiDirectRunner"


@pytest.mark.parametrize("runner", ["PrismRunner", "FlinkRunner", "DataflowRunner", "PortableRunner"])
def test_other_runners_are_left_to_beam(runner):
    assert pipeline_runner(PipelineOptions(["--runner", runner])) is None
