"""Run statistics: Beam Metrics merged per step into ``stats.json``.

Every beamtrove step counts into its own metrics namespace (see
:mod:`beamtrove.metrics`). After a run, :func:`collect_stats` merges the
results per step (a step's DoFns may report from several Beam transforms and
workers), :func:`write_stats` stores them beside the output, and
:func:`format_stats` renders them as the table ``beamtrove stats`` prints.
"""

from __future__ import annotations

import collections
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.pipeline import PipelineVisitor

from beamtrove.fs import filesystem, join, move, open_url
from beamtrove.layout import STATS_FILE
from beamtrove.metrics import NAMESPACE_PREFIX, OUTCOME_PREFIXES

__all__ = ["collect_stats", "format_stats", "merge_stats", "read_stats", "write_stats"]


def _value(result) -> Any:
    # Some runners only report attempted values.
    committed = getattr(result, "committed", None)
    return result.attempted if committed is None else committed


def _step_of(result) -> str | None:
    namespace = result.key.metric.namespace
    return namespace[len(NAMESPACE_PREFIX) :] if namespace.startswith(NAMESPACE_PREFIX) else None


class _StepOrder(PipelineVisitor):
    def __init__(self):
        self.order: dict[str, int] = {}

    def enter_composite_transform(self, transform_node):
        self.visit_transform(transform_node)

    def visit_transform(self, transform_node):
        self.order.setdefault(transform_node.full_label.rsplit("/", 1)[-1], len(self.order))


def collect_stats(result: beam.runners.runner.PipelineResult, pipeline: beam.Pipeline | None = None) -> dict:
    """Merges a finished run's beamtrove metrics per step.

    Args:
        result: The run's result.
        pipeline: The pipeline that ran; orders the steps as they were applied
            (otherwise by name).

    Returns:
        ``{step: {"counters": {name: int}, "distributions": {name: {count,
        sum, min, max, mean}}}}``.
    """
    query = result.metrics().query()
    steps: dict[str, dict] = collections.defaultdict(lambda: {"counters": {}, "distributions": {}})
    for counter in query["counters"]:
        step = _step_of(counter)
        if step is not None:
            counters = steps[step]["counters"]
            counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + _value(counter)
    for distribution in query["distributions"]:
        step, value = _step_of(distribution), _value(distribution)
        if step is None or value is None or not value.count:
            continue
        _add_distribution(
            steps[step]["distributions"], distribution.key.metric.name, value.count, value.sum, value.min, value.max
        )
    order: dict[str, int] = {}
    if pipeline is not None:
        visitor = _StepOrder()
        pipeline.visit(visitor)
        order = visitor.order
    return {step: steps[step] for step in sorted(steps, key=lambda s: (order.get(s, math.inf), s))}


def _add_distribution(
    distributions: dict[str, dict], name: str, count: int, total: float, low: float, high: float
) -> None:
    merged = distributions.setdefault(name, {"count": 0, "sum": 0, "min": math.inf, "max": -math.inf})
    merged["count"] += count
    merged["sum"] += total
    merged["min"] = min(merged["min"], low)
    merged["max"] = max(merged["max"], high)
    merged["mean"] = merged["sum"] / merged["count"]


def merge_stats(runs: Iterable[Mapping[str, Any]]) -> dict:
    """Adds up the per-step stats of several runs (the ``steps`` of their ``stats.json``).

    Counters are summed; distributions merge their count, sum, min and max.
    Steps keep the order in which they first appear.
    """
    steps: dict[str, dict] = {}
    for run in runs:
        for step, entry in run.items():
            merged = steps.setdefault(step, {"counters": {}, "distributions": {}})
            for name, value in entry.get("counters", {}).items():
                merged["counters"][name] = merged["counters"].get(name, 0) + value
            for name, d in entry.get("distributions", {}).items():
                _add_distribution(merged["distributions"], name, d["count"], d["sum"], d["min"], d["max"])
    return steps


def write_stats(stats: Mapping[str, Any], output_dir: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Writes ``stats`` as ``<output_dir>/stats.json``; returns its path."""
    path = join(output_dir, STATS_FILE)
    fs, fs_path = filesystem(output_dir, storage_options)
    fs.makedirs(fs_path, exist_ok=True)
    # Written beside its final name and moved there whole: an interrupted write leaves no half stats.json.
    temporary = join(output_dir, f".{STATS_FILE}.{uuid.uuid4().hex}")
    with open_url(temporary, "w", storage_options) as out:
        json.dump(stats, out, indent=2)
        out.write("\n")
    move(temporary, path, storage_options)
    return path


def read_stats(path: str, storage_options: Mapping[str, Any] | None = None) -> dict:
    """Reads a ``stats.json`` file, or the one inside the directory ``path``."""
    fs, fs_path = filesystem(path, storage_options)
    if fs.isdir(fs_path):
        path = join(path, STATS_FILE)
    with open_url(path, "r", storage_options) as source:
        return json.load(source)


def _number(value: float) -> str:
    return f"{value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{int(value):,}"


def format_stats(stats: Mapping[str, Any]) -> str:
    """Renders stats as a table: per step, the record funnel then the details.

    ``unaccounted`` shows records a step received but neither emitted,
    skipped, dropped nor errored; it is 0 for every sound per-record step.
    """
    steps = stats.get("steps", stats)
    columns = ("in", "out", "skipped", "dropped", "errors")
    rows = []
    for step, entry in steps.items():
        counters = entry.get("counters", {})
        totals = {prefix.rstrip("."): 0 for prefix in OUTCOME_PREFIXES}
        for name, value in counters.items():
            for prefix in OUTCOME_PREFIXES:
                if name.startswith(prefix):
                    totals[prefix.rstrip(".")] += value
        row = [step, *(counters.get(c, 0) for c in columns[:2]), *totals.values()]
        rows.append((row, counters, entry.get("distributions", {})))
    width = max([len("step"), *(len(r[0][0]) for r in rows)])
    lines = [f"{'step':<{width}}  " + "  ".join(f"{c:>12}" for c in columns)]
    for row, counters, distributions in rows:
        lines.append(f"{row[0]:<{width}}  " + "  ".join(f"{_number(v):>12}" for v in row[1:]))
        if "in" in counters and "out" in counters:
            unaccounted = row[1] - row[2] - sum(row[3:])
            if unaccounted:
                lines.append(f"    unaccounted: {_number(unaccounted)}")
        for name in sorted(counters):
            if name not in columns:
                lines.append(f"    {name}: {_number(counters[name])}")
        for name, d in distributions.items():
            lines.append(
                f"    {name}: count {_number(d['count'])}, mean {_number(d['mean'])}, "
                f"min {_number(d['min'])}, max {_number(d['max'])}"
            )
    return "\n".join(lines)
