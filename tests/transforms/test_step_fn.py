"""The step protocol: what a per-document step's DoFn may use, checked when the step is declared."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.layout import DEAD_LETTERS, EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.pipelines.spec import DocumentStep
from beamtrove.transforms.filters import Filter
from beamtrove.transforms.filters.gopher import GopherQualityFilter
from beamtrove.transforms.step_fn import check_step_fn, run_step_fn


class _Counting(beam.DoFn):
    def __init__(self, step: str):
        self._metrics = StepMetrics(step)

    def process(self, document):
        self._metrics.received()
        yield document


class _WithBundleHook(_Counting):
    def start_bundle(self):
        self.seen = 0


class _WithSideInput(_Counting):
    def process(self, document, stopwords=beam.DoFn.SideInputParam):
        yield document


class _WithTimestamp(_Counting):
    def process(self, document, timestamp=beam.DoFn.TimestampParam):
        yield document


def test_a_dofn_keeping_to_the_protocol_is_declared():
    assert DocumentStep("count", _Counting("count")).name == "count"
    check_step_fn("gopher_quality", Filter(GopherQualityFilter()).step_fn())


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_WithBundleHook("count"), "overrides start_bundle, which a per-input"),
        (_WithSideInput("count"), r"process must take the document alone \(it takes \['document', 'stopwords'\]\)"),
        (_WithTimestamp("count"), "process must take the document alone"),
        (_Counting("counted_elsewhere"), r"counts nothing under the step's name: give it a StepMetrics\('count'\)"),
        (lambda document: [document], "is not a beam.DoFn"),
    ],
)
def test_a_dofn_a_per_input_run_would_drive_differently_is_refused_when_declared(fn, message):
    with pytest.raises(TypeError, match=message):
        DocumentStep("count", fn)


def test_a_batched_step_overriding_process_is_refused():
    filter_fn = type(Filter(GopherQualityFilter()).step_fn())

    class _Overriding(filter_fn):
        def process(self, element):
            yield element

    with pytest.raises(TypeError, match="overrides process"):
        check_step_fn("gopher_quality", _Overriding(GopherQualityFilter(), "gopher_quality", None))


def test_the_per_input_engine_gives_what_the_pardo_gives(reviews):
    documents = reviews[:120]
    fn = Filter(GopherQualityFilter()).step_fn()
    fn.setup()
    by_hand = list(run_step_fn(fn, documents))
    fn.teardown()
    kept_by_hand = [output.id for output in by_hand if not isinstance(output, beam.pvalue.TaggedOutput)]
    excluded_by_hand = [output.value.id for output in by_hand if isinstance(output, beam.pvalue.TaggedOutput)]
    assert len(kept_by_hand) + len(excluded_by_hand) == 120 and excluded_by_hand
    with BeamTestPipeline() as pipeline:
        outputs = (
            pipeline
            | beam.Create(documents)
            | beam.ParDo(Filter(GopherQualityFilter()).step_fn()).with_outputs(EXCLUDED, DEAD_LETTERS, main="kept")
        )
        assert_that(outputs.kept | "KeptIds" >> beam.Map(lambda d: d.id), equal_to(kept_by_hand), label="Kept")
        excluded_ids = outputs[EXCLUDED] | "ExcludedIds" >> beam.Map(lambda d: d.id)
        assert_that(excluded_ids, equal_to(excluded_by_hand), label="Excluded")
