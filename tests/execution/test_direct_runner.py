"""The DirectRunner as beamtrove runs it: straight to the FnApiRunner, never first trying to fetch and run Prism.

That a real run never tries Prism is checked by tests/execution/test_run.py's first run.
"""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.execution.direct_runner import pipeline_runner


def test_beams_own_direct_runner_tries_prism_first(prism_tries):
    # What beamtrove's runner avoids: without it, every DirectRunner run starts with a try of Prism.
    with beam.Pipeline(options=PipelineOptions([])) as pipeline:
        _ = pipeline | beam.Create([1, 2]) | beam.Map(lambda value: value + 1)
    assert prism_tries == ["prism"]


@pytest.mark.parametrize(
    "runner", [None, "DirectRunner", "direct", "apache_beam.runners.direct.direct_runner.DirectRunner"]
)
def test_every_name_of_the_direct_runner_gets_beamtroves(runner):
    argv = [] if runner is None else ["--runner", runner]
    assert type(pipeline_runner(PipelineOptions(argv))).__name__ == "_FnApiDirectRunner"


@pytest.mark.parametrize("runner", ["PrismRunner", "FlinkRunner", "DataflowRunner", "PortableRunner"])
def test_other_runners_are_left_to_beam(runner):
    assert pipeline_runner(PipelineOptions(["--runner", runner])) is None
