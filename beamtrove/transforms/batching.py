"""A DoFn base that processes its elements in batches.

Models (fastText, tokenizers) are much faster on a batch than one element at
a time. A batch spans elements, so each output is emitted in its own input's
window with its own timestamp rather than those of the element that happened
to fill the batch.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any, ClassVar

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.utils.windowed_value import WindowedValue

__all__ = ["BatchDoFn"]


class BatchDoFn(beam.DoFn):
    """Buffers up to ``batch_size`` elements, then hands them to :meth:`transform_batch`.

    The buffer is flushed when full and at the end of every bundle. Each
    batch is started with :meth:`begin_batch`; a subclass that sets
    ``in_flight`` > 0 (say, one that starts work in background threads that
    release the GIL) has its batches transformed only once that many later
    batches were started or the bundle ends, so that the work on batches runs
    while earlier outputs are emitted and the next batch is gathered. (Not
    named ``process_batch``: Beam reserves that name for its own batched
    DoFns.)
    """

    #: Batches kept between :meth:`begin_batch` and :meth:`transform_batch`.
    in_flight: ClassVar[int] = 0

    def __init__(self, batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (got {batch_size}).")
        self.batch_size = batch_size

    def start_bundle(self):
        self._pending: list[tuple[Any, Any, Any]] = []
        self._started: collections.deque[tuple[list[tuple[Any, Any, Any]], Any]] = collections.deque()

    def process(self, element, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
        self._pending.append((element, timestamp, window))
        if len(self._pending) >= self.batch_size:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()
        while self._started:
            yield from self._emit(*self._started.popleft())

    def begin_batch(self, elements: list[Any]) -> Any:
        """Starts work on a batch; the result reaches :meth:`transform_batch`. By default, nothing."""
        return None

    def transform_batch(self, elements: list[Any], begun: Any) -> Sequence[Any]:
        """Exactly one output per element, in order: a value or a ``TaggedOutput``.

        Args:
            elements: The batch.
            begun: What :meth:`begin_batch` returned for it.
        """
        raise NotImplementedError

    def _flush(self):
        batch, self._pending = self._pending, []
        if batch:
            self._started.append((batch, self.begin_batch([element for element, _, _ in batch])))
        while len(self._started) > self.in_flight:
            yield from self._emit(*self._started.popleft())

    def _emit(self, batch, begun):
        outputs = self.transform_batch([element for element, _, _ in batch], begun)
        for (_, timestamp, window), output in zip(batch, outputs, strict=True):
            if isinstance(output, pvalue.TaggedOutput):
                yield pvalue.TaggedOutput(output.tag, WindowedValue(output.value, timestamp, (window,)))
            else:
                yield WindowedValue(output, timestamp, (window,))
