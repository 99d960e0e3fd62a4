"""A DoFn base that processes its elements in batches.

Models (fastText, tokenizers) are much faster on a batch than one element at
a time. A batch spans elements, so each output is emitted in its own input's
window with its own timestamp rather than those of the element that happened
to fill the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.utils.windowed_value import WindowedValue

__all__ = ["BatchDoFn"]


class BatchDoFn(beam.DoFn):
    """Buffers up to ``batch_size`` elements, then calls :meth:`transform_batch`.

    The buffer is flushed when full and at the end of every bundle. (Not named
    ``process_batch``: Beam reserves that name for its own batched DoFns.)
    """

    def __init__(self, batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (got {batch_size}).")
        self.batch_size = batch_size

    def start_bundle(self):
        self._pending: list[tuple[Any, Any, Any]] = []

    def process(self, element, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
        self._pending.append((element, timestamp, window))
        if len(self._pending) >= self.batch_size:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def transform_batch(self, elements: list[Any]) -> Sequence[Any]:
        """Exactly one output per element, in order: a value or a ``TaggedOutput``."""
        raise NotImplementedError

    def _flush(self):
        batch, self._pending = self._pending, []
        if not batch:
            return
        outputs = self.transform_batch([element for element, _, _ in batch])
        for (_, timestamp, window), output in zip(batch, outputs, strict=True):
            if isinstance(output, pvalue.TaggedOutput):
                yield pvalue.TaggedOutput(output.tag, WindowedValue(output.value, timestamp, (window,)))
            else:
                yield WindowedValue(output, timestamp, (window,))
