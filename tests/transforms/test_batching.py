"""BatchDoFn: elements in batches, each output in its own element's window and time, batches kept in flight."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beamtrove.transforms.batching import BatchDoFn


class _WordCounts(BatchDoFn):
    """One word count per text, computed a batch at a time; remembers the calls it got."""

    def __init__(self, batch_size: int, in_flight: int = 0):
        super().__init__(batch_size)
        self.in_flight = in_flight
        self.calls: list[tuple[str, int]] = []

    def begin_batch(self, texts):
        self.calls.append(("begin", len(texts)))
        return [len(text.split()) for text in texts]

    def transform_batch(self, texts, begun):
        self.calls.append(("transform", len(texts)))
        return begun


def _run_bundle(fn: BatchDoFn, texts: list[str]) -> list[WindowedValue]:
    """Runs one bundle by hand, as a runner would: each text at its own time, in its own window."""
    fn.start_bundle()
    outputs = []
    for second, text in enumerate(texts):
        moment = Timestamp(seconds=second)
        outputs += list(fn.process(text, moment, window.IntervalWindow(moment, moment + 1)) or ())
    return outputs + list(fn.finish_bundle() or ())


def test_outputs_keep_their_own_element_time_and_window(movie_reviews):
    texts = list(movie_reviews.values())[:10]
    fn = _WordCounts(batch_size=4)
    outputs = _run_bundle(fn, texts)
    assert [output.value for output in outputs] == [len(text.split()) for text in texts]
    assert [output.timestamp for output in outputs] == [Timestamp(seconds=s) for s in range(10)]
    assert [output.windows[0].start for output in outputs] == [Timestamp(seconds=s) for s in range(10)]
    assert fn.calls == [("begin", 4), ("transform", 4), ("begin", 4), ("transform", 4), ("begin", 2), ("transform", 2)]
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        _WordCounts(batch_size=0)


def test_batches_in_flight_are_begun_before_earlier_ones_are_transformed(movie_reviews):
    texts = list(movie_reviews.values())[:10]
    fn = _WordCounts(batch_size=4, in_flight=1)
    outputs = _run_bundle(fn, texts)
    assert [output.value for output in outputs] == [len(text.split()) for text in texts]
    assert fn.calls == [("begin", 4), ("begin", 4), ("transform", 4), ("begin", 2), ("transform", 4), ("transform", 2)]


def test_in_a_pipeline_every_element_gets_one_output(movie_reviews):
    texts = list(movie_reviews.values())[:250]
    with BeamTestPipeline() as pipeline:
        counts = pipeline | beam.Create(texts) | beam.ParDo(_WordCounts(batch_size=64, in_flight=2))
        assert_that(counts, equal_to([len(text.split()) for text in texts]))
