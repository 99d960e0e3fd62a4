"""Publishing a run folder merged from the outputs of tasks or shards, as a run publishes its outputs.

A staged run (:mod:`beamtrove.execution.jobs.staged.run`) and ``beamtrove elastic
merge`` (:mod:`beamtrove.execution.jobs.merge`) lay out, after their
tasks or shards ran, the run folder one ``beamtrove run`` would have
written: both publish it with :func:`publish_merged`, through the output
folder contract of :mod:`beamtrove.execution.output`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from beamtrove.execution.output import OutputPlan
from beamtrove.execution.output_publish import reached
from beamtrove.execution.run_result import write_run_report
from beamtrove.fs import join
from beamtrove.layout import REPORT_FILE
from beamtrove.stats import write_stats

__all__ = ["publish_merged"]


def publish_merged(plan: OutputPlan, lay_out: Callable[[str], object], stats: Mapping[str, Any]) -> str:
    """Publishes a merged run folder through ``plan``, with its ``stats.json`` and ``report.html``.

    Stages the plan, has ``lay_out`` put the run's outputs into its staging
    folder, writes ``stats`` and the report beside them and publishes them
    together. The plan is done with once this returns: released once
    published; on any failure abandoned (what was staged is removed, a
    publish begun is left for the next run to finish) and the error raised.

    Args:
        plan: The run's plan, from :func:`~beamtrove.execution.output.plan_output`.
        lay_out: Called with the folder to lay the outputs out in.
        stats: What ``stats.json`` holds.

    Returns:
        The path of ``report.html`` in the output folder, or "" when it could not be drawn.
    """
    try:
        plan.stage()
        lay_out(plan.write_to)
        reached("laid out")
        write_stats(stats, plan.write_to, plan.storage_options)
        report = write_run_report(plan.write_to, plan.output)
        plan.publish()
    except BaseException:
        plan.abandon()
        raise
    plan.release()
    return report and join(plan.output, REPORT_FILE)
