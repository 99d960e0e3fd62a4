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
Distributions (document length, ...) use free names.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from apache_beam.metrics import Metrics

from beamtrove.progress import count_progress

__all__ = ["NAMESPACE_PREFIX", "OUTCOME_PREFIXES", "StepMetrics", "counters_recorded"]

NAMESPACE_PREFIX = "beamtrove/"
OUTCOME_PREFIXES = ("skipped.", "dropped.", "errors.")


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
