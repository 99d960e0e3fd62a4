"""What a finished run leaves: its :class:`RunResult`, its ``stats.json`` record and its ``report.html``.

One builder of ``stats.json`` (:func:`run_stats`) serves ``beamtrove run``,
``--staged`` runs and ``beamtrove elastic merge``, so a run folder says the
same things however it was made.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beamtrove import __version__
from beamtrove.execution.resume import configuration
from beamtrove.fs import filesystem, join
from beamtrove.layout import REPORT_FILE
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.report import write_report

__all__ = ["RunInterrupted", "RunResult", "run_stats", "write_run_report"]

_LOGGER = logging.getLogger(__name__)


class RunInterrupted(Exception):
    """The run was interrupted (Ctrl-C, SIGTERM); the message says what the output kept and how to go on."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    """A finished run.

    Attributes:
        state: The pipeline's final state, e.g. ``DONE``.
        stats: What ``stats.json`` holds: version, pipeline, runner, state,
            wall time and every step's counters; for a resumable run, the
            counters total every completed input (``inputs_completed``) and
            ``run_steps`` holds this run's alone.
        stats_path: Where ``stats.json`` was written; empty when the run did
            not succeed (nothing was written).
        report_path: Where ``report.html`` was written; empty when the run
            did not succeed or the report could not be drawn.
        detail: Why a run that did not succeed ended, and how to go on,
            when more is known than its state.
    """

    state: str
    stats: dict[str, Any]
    stats_path: str
    report_path: str = ""
    detail: str = ""

    @property
    def succeeded(self) -> bool:
        return self.state == PipelineState.DONE


def run_stats(
    spec: PipelineSpec,
    options: PipelineOptions,
    state: str,
    funnel: Sequence[Any],
    steps: Mapping[str, Any],
    *,
    runner: str = "DirectRunner",
    **details: Any,
) -> dict[str, Any]:
    """What ``stats.json`` holds: the version, pipeline, runner, state, options, funnel and step counters.

    Args:
        spec: The pipeline.
        options: Its options (those that identify its results are recorded).
        state: The run's final state.
        funnel: The steps documents go through, in order.
        steps: Every step's counters.
        runner: The runner that ran it.
        details: More sections: ``wall_seconds``, a staged run's ``staged``, a merged job's ``elastic``.
    """
    return {
        "beamtrove_version": __version__,
        "pipeline": spec.name,
        "runner": runner,
        "state": state,
        "options": configuration(spec.name, options, spec.option_classes)["options"],
        "funnel": list(funnel),
        "steps": dict(steps),
        **details,
    }


def write_run_report(folder: str, output: str) -> str:
    """Writes ``report.html`` beside ``stats.json`` in ``folder``; returns its path, or "" when it could not be drawn.

    A report that cannot be drawn leaves none: the one an earlier run into a
    resumable output wrote would describe that run.
    """
    try:
        return write_report(folder)
    except Exception as exc:  # the run's results are in place: a report that cannot be drawn does not undo them
        fs, path = filesystem(join(folder, REPORT_FILE))
        if fs.exists(path):
            fs.rm(path)
        _LOGGER.warning(
            "report.html was not written (%s: %s); `beamtrove report %s` retries", type(exc).__name__, exc, output
        )
        return ""
