"""Runs a pipeline and waits for it: build, run, wait, collect the stats, write ``stats.json``.

What ``beamtrove run`` does, and what tests and elastic shard workers (through
``beamtrove run``) rely on. The runner is the one the options name, the
DirectRunner by default; a Prism or Flink run is pointed at the local copies
``beamtrove runners setup`` obtained, so nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState

from beamtrove import __version__
from beamtrove.execution.build import build
from beamtrove.execution.runner_parts import use_local_runner_parts
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.stats import collect_stats, write_stats

__all__ = ["RunResult", "run_pipeline"]


@dataclasses.dataclass(frozen=True)
class RunResult:
    """A finished run.

    Attributes:
        state: The pipeline's final state, e.g. ``DONE``.
        stats: What ``stats.json`` holds: version, pipeline, runner, state,
            wall time and every step's counters.
        stats_path: Where ``stats.json`` was written.
    """

    state: str
    stats: dict[str, Any]
    stats_path: str

    @property
    def succeeded(self) -> bool:
        return self.state == PipelineState.DONE


def run_pipeline(spec: PipelineSpec, options: PipelineOptions) -> RunResult:
    """Builds, runs and waits for the pipeline, then writes ``stats.json`` into its output folder.

    Raises:
        ConfigurationError: The pipeline cannot be built with these options
            (nothing ran).
    """
    use_local_runner_parts(options)
    built = build(spec, options)
    started = time.monotonic()
    result = built.pipeline.run()
    state = result.wait_until_finish()
    stats = {
        "beamtrove_version": __version__,
        "pipeline": spec.name,
        "runner": options.view_as(StandardOptions).runner or "DirectRunner",
        "state": str(state),
        "wall_seconds": round(time.monotonic() - started, 3),
        "steps": collect_stats(result, built.pipeline),
    }
    return RunResult(str(state), stats, write_stats(stats, built.flow.output))
