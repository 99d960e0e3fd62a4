"""Step metrics: every step's counters under its own namespace, following the in/out/outcome contract."""

from __future__ import annotations

import pickle

import apache_beam as beam

from beamtrove.metrics import StepMetrics
from tests.conftest import run_and_collect


class _Judge(beam.DoFn):
    """Counts each review as kept, skipped, dropped or errored by its length, as a filter would."""

    def __init__(self):
        self._metrics = StepMetrics("judge")

    def process(self, text: str):
        self._metrics.received()
        words = len(text.split())
        self._metrics.observe("doc_words", words)
        if words < 200:
            self._metrics.skipped("short")
        elif words > 1500:
            self._metrics.dropped("long")
        elif "!" in text[:10]:
            self._metrics.errored("exclaims")
        else:
            self._metrics.emitted()
            yield text


def test_counters_follow_the_contract_and_reach_the_stats(movie_reviews):
    texts = list(movie_reviews.values())[:300]
    steps = run_and_collect(lambda p: p | beam.Create(texts) | "judge" >> beam.ParDo(_Judge()))
    counters = steps["judge"]["counters"]
    lengths = [len(text.split()) for text in texts]
    assert counters["in"] == 300
    assert counters["skipped.short"] == sum(n < 200 for n in lengths)
    assert counters["dropped.long"] == sum(n > 1500 for n in lengths)
    assert counters["in"] == counters["out"] + sum(v for k, v in counters.items() if "." in k)
    words = steps["judge"]["distributions"]["doc_words"]
    assert (words["count"], words["sum"], words["min"], words["max"]) == (300, sum(lengths), min(lengths), max(lengths))


def test_metrics_pickle_as_their_step_name():
    metrics = StepMetrics("url_filter")
    metrics.inc("in")
    copy = pickle.loads(pickle.dumps(metrics))
    assert copy.step == "url_filter" and copy._namespace == "beamtrove/url_filter"
    assert len(pickle.dumps(metrics)) < 100, "a DoFn holding metrics ships the name, not Beam's counter objects"
