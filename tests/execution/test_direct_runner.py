"""The DirectRunner as beamtrove runs it: straight to the FnApiRunner, never first trying to fetch and run Prism.

That a real run never tries Prism is checked by tests/execution/test_run.py's first run.
"""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from beamtrove.execution.direct_runner import pipeline_runner, settle_direct_workers
from beamtrove.execution.direct_workers import INPUT_PER_WORKER, default_workers
from beamtrove.fs import InputFile
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec


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


def _settled(argv: list[str], sizes: list[int]) -> tuple[str, int]:
    """The running mode and worker count a convert run with ``argv`` gets for input files of ``sizes`` bytes."""
    options = parse(pipeline_spec("convert"), ["--input", "x", "--output", "y", *argv])
    files = [InputFile(f"part-{at}.jsonl", f"part-{at}.jsonl", size) for at, size in enumerate(sizes)]
    settle_direct_workers(options, files, len(files))
    direct = options.view_as(DirectOptions)
    return direct.direct_running_mode, direct.direct_num_workers


def test_a_run_that_names_no_workers_gets_what_the_machine_and_input_allow():
    large = [2 * INPUT_PER_WORKER] * 8
    workers = default_workers(8, sum(large))
    assert _settled([], large) == (("multi_processing", workers) if workers > 1 else ("in_memory", 1))
    # One file, or little input, runs in memory, in the command's process.
    assert _settled([], [100 * INPUT_PER_WORKER]) == ("in_memory", 1)
    assert _settled([], [INPUT_PER_WORKER // 4] * 4) == ("in_memory", 1)
    # --direct_num_workers 0 is bounded as the default is; what the command line names is kept.
    assert _settled(["--direct_running_mode=multi_processing", "--direct_num_workers=0"], [1]) == ("in_memory", 1)
    assert _settled(["--direct_running_mode", "multi_processing"], [1]) == ("multi_processing", 1)
    assert _settled(["--direct_num_workers", "3"], large) == ("in_memory", 3)
    assert _settled(["--direct_running_mode=in_memory"], large) == ("in_memory", 1)
    # Other runners are Beam's.
    assert _settled(["--runner", "PrismRunner"], large) == ("in_memory", 1)
