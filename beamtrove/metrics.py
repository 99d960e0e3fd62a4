"""Beam Metrics under beamtrove's naming scheme.

Each step owns a namespace ``beamtrove/<step>``. Within it, counters follow one
contract that ``stats.json`` and ``beamtrove stats`` rely on:

* ``in``: records the step received (for readers: records read from files);
* ``out``: records it passed on;
* ``skipped.<reason>``: records that were not meant for the output (a WARC
  request record, a non-HTML payload, ...);
* ``dropped.<reason>``: records a filter removed;
* ``errors.<reason>``: records that could not be processed (dead letters).

so that ``in == out + skipped + dropped + errors`` for every per-record step.
Distributions (document length, ...) use free names. After a run,
:func:`collect_stats` merges the results per step (a step's DoFns may report
from several Beam transforms and workers) into what ``stats.json`` holds.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pipeline import PipelineVisitor

from beamtrove.progress import count_progress
from beamtrove.stats import add_distribution, order_steps

__all__ = ["NAMESPACE_PREFIX", "StepMetrics", "collect_stats", "counters_recorded"]

NAMESPACE_PREFIX = "beamtrove/"


# Per thread: a runner may process several bundles at once, each in its own thread.
_recording = threading.local()


@contextlib.contextmanager
def counters_recorded() -> Iterator[dict[str, dict[str, int]]]:
    """Records, besides reporting them to Beam, the counters this thread increments inside the block.

    Yields:
        ``{step: {counter: value}}``, filled as the block runs: what a
        resumable run stores in an input's completion marker, so that the
        stats of an output total every input whichever run completed it.
    """
    counts: dict[str, dict[str, int]] = {}
    outer = getattr(_recording, "counts", None)
    _recording.counts = counts
    try:
        yield counts
    finally:
        _recording.counts = outer


class StepMetrics:
    """Counters and distributions of one step, created lazily on workers.

    Instances pickle as their step name only, so DoFns and sources can hold
    one and ship it to any runner.
    """

    def __init__(self, step: str):
        self.step = step
        self._namespace = NAMESPACE_PREFIX + step
        self._counters = {}
        self._distributions = {}

    def __getstate__(self):
        return self.step

    def __setstate__(self, step):
        self.__init__(step)

    def inc(self, name: str, value: int = 1) -> None:
        """Adds ``value`` to the counter ``name``."""
        counter = self._counters.get(name)
        if counter is None:
            counter = self._counters[name] = Metrics.counter(self._namespace, name)
        counter.inc(value)
        count_progress(self.step, name, value)
        recorded = getattr(_recording, "counts", None)
        if recorded is not None:
            step = recorded.setdefault(self.step, {})
            step[name] = step.get(name, 0) + value

    def observe(self, name: str, value: int) -> None:
        """Records ``value`` in the distribution ``name``."""
        distribution = self._distributions.get(name)
        if distribution is None:
            distribution = self._distributions[name] = Metrics.distribution(self._namespace, name)
        distribution.update(value)

    def received(self, count: int = 1) -> None:
        self.inc("in", count)

    def emitted(self, count: int = 1) -> None:
        self.inc("out", count)

    def chars(self, direction: str, text: str) -> None:
        """Counts ``text``'s characters in ``chars_in`` or ``chars_out``: a dedup step's ratio beside its documents'."""
        self.inc(f"chars_{direction}", len(text))

    def skipped(self, reason: str) -> None:
        self.inc("skipped." + reason)

    def dropped(self, reason: str) -> None:
        self.inc("dropped." + reason)

    def errored(self, reason: str) -> None:
        self.inc("errors." + reason)


def _value(result) -> Any:
    # Some runners only report attempted values.
    committed = getattr(result, "committed", None)
    return result.attempted if committed is None else committed


def _step_of(result) -> str | None:
    namespace = result.key.metric.namespace
    return namespace[len(NAMESPACE_PREFIX) :] if namespace.startswith(NAMESPACE_PREFIX) else None


class _GraphOrder(PipelineVisitor):
    """Ranks every label of the graph in the order the transforms were applied."""

    def __init__(self):
        self.rank: dict[str, int] = {}

    def enter_composite_transform(self, transform_node):
        self.visit_transform(transform_node)

    def visit_transform(self, transform_node):
        self.rank.setdefault(transform_node.full_label.rsplit("/", 1)[-1], len(self.rank))


# The time a runner measured each transform taking: its processing, not what it waited for.
_EXECUTION_TIME = "metric:ptransform_execution_time:total_msecs:v1"


def collect_stats(
    result: beam.runners.runner.PipelineResult,
    pipeline: beam.Pipeline | None = None,
    funnel: Sequence[str] = (),
    writers: Sequence[str] = (),
) -> dict:
    """Merges a finished run's beamtrove metrics per step, in pipeline order.

    Args:
        result: The run's result.
        pipeline: The pipeline that ran: steps not in ``funnel`` take their
            place in it as they were applied (otherwise they come last, by
            name).
        funnel: The steps records pass through, in order (reader, steps,
            sink): each is listed, with no counters when it counted nothing.
        writers: The writers of what steps set aside, listed after the rest.

    Returns:
        ``{step: {"counters": {name: int}, "distributions": {name: {count,
        sum, min, max, mean}}}}``, with ``"seconds"`` per step when the runner
        measured the time its transforms took.
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
        add_distribution(
            steps[step]["distributions"], distribution.key.metric.name, value.count, value.sum, value.min, value.max
        )
    for step, seconds in _execution_seconds(result, {*steps, *funnel, *writers}).items():
        steps[step]["seconds"] = seconds
    rank = {}
    if pipeline is not None:
        visitor = _GraphOrder()
        pipeline.visit(visitor)
        rank = visitor.rank
    return order_steps(steps, funnel, writers, rank)


def _execution_seconds(result, steps: set[str]) -> dict[str, float]:
    """Seconds each step's transforms took, where the runner measured them (the Python SDK's local runners do).

    A transform's time goes to the outermost step its label is inside: a
    step's time includes that of the steps applied within it.
    """
    monitoring = getattr(result, "monitoring_metrics", None)
    if monitoring is None:
        return {}
    try:
        counters = monitoring().query()["counters"]
    except Exception:  # a runner's own metrics are a bonus: a runner that cannot give them gives none
        return {}
    milliseconds: dict[str, float] = collections.defaultdict(float)
    for counter in counters:
        if counter.key.metric.name != _EXECUTION_TIME or not counter.key.step:
            continue
        for label in counter.key.step.split("/"):
            if label in steps:
                milliseconds[label] += _value(counter) or 0
                break
    return {step: round(total / 1000, 3) for step, total in milliseconds.items()}
