"""The filter contract and the ``Filter`` transform, on real inaugural addresses and UDHR texts."""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.metrics import collect_stats
from beamtrove.text import count_sentences, is_punctuation, split_words
from beamtrove.transforms.filters import (
    FILTER_REASON_KEY,
    DocumentFilter,
    DocumentFormatter,
    Drop,
    Filter,
    load_once,
)
from beamtrove.transforms.filters.gopher import GopherRepetitionFilter
from tests.conftest import run_and_collect
from tests.transforms.filters.conftest import outcomes


class WordsPerSentence(DocumentFilter):
    """Drops documents whose sentences average more than ``limit`` words, noting the average.

    It divides by the sentence count without a guard, so an empty document
    raises ZeroDivisionError: the bug a dead letter must contain.
    """

    name = "words_per_sentence"
    batch_size = 3

    def __init__(self, limit: float):
        self.limit = limit

    def filter(self, document: Document):
        words = [token for token in split_words(document.text) if not is_punctuation(token)]
        average = len(words) / count_sentences(document.text)
        if average > self.limit:
            annotated = dataclasses.replace(document, metadata={**document.metadata, "words_per_sentence": average})
            return Drop("long_sentences", annotated)
        return document


class Title(DocumentFormatter):
    """Keeps only the first line of a document."""

    name = "title"

    def format(self, document: Document) -> Document:
        return dataclasses.replace(document, text=document.text.split("\n", 1)[0])


def test_filter_and_formatter_contract(inaugural, udhr_texts):
    rule = WordsPerSentence(limit=40)
    washington = Document(text=inaugural["1789-Washington"], id="1789-Washington", metadata={"source": "inaugural"})
    obama = Document(text=inaugural["2009-Obama"], id="2009-Obama", metadata={"source": "inaugural"})
    # Washington's first inaugural is famous for its long periods: 1,431 words in 23 sentences, 62.2 each;
    # Obama's 2009 address has 2,411 words in 110 sentences, 21.9 each.
    verdict = rule.filter(washington)
    assert isinstance(verdict, Drop) and verdict.reason == "long_sentences"
    assert verdict.document.metadata["source"] == "inaugural"
    assert 55 < verdict.document.metadata["words_per_sentence"] < 70
    assert "words_per_sentence" not in washington.metadata  # the input is never mutated
    assert rule.filter(obama) is obama
    assert rule.filter_batch([obama, washington])[0] is obama
    assert Drop("x").document is None
    # A formatter keeps every document, rewritten.
    english = Document(text=udhr_texts["eng"], id="eng")
    assert Title().filter(english).text == "Universal Declaration of Human Rights"
    assert english.text == udhr_texts["eng"]


def test_load_once_loads_once_per_key():
    calls = []

    def loader():
        calls.append(1)
        return object()

    first = load_once(("test_base", "model-a"), loader)
    assert load_once(("test_base", "model-a"), loader) is first
    assert load_once(("test_base", "model-b"), loader) is not first
    assert len(calls) == 2


def test_filter_routes_kept_excluded_and_dead_letters_with_counters(inaugural, udhr_texts):
    docs = [
        Document(text=inaugural["1789-Washington"], id="1789-Washington", metadata={"source": "inaugural"}),
        Document(text=inaugural["1961-Kennedy"], id="1961-Kennedy", metadata={"source": "inaugural"}),
        Document(text=inaugural["2009-Obama"], id="2009-Obama", metadata={"source": "inaugural"}),
        # The UDHR file for Nkoya (nku) is empty in the NLTK corpus: no sentence, so the rule divides by zero.
        Document(text=udhr_texts["nku"], id="nku", metadata={"url": "https://www.ohchr.org/en/human-rights/udhr"}),
        Document(text=udhr_texts["eng"], id="eng"),
    ]
    assert udhr_texts["nku"] == ""

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(WordsPerSentence(limit=40), step="wps")
        assert_that(
            outcomes(result),
            equal_to(
                [
                    ("excluded", "1789-Washington", "long_sentences"),
                    ("kept", "1961-Kennedy"),
                    ("kept", "2009-Obama"),
                    ("dead", "nku", "ZeroDivisionError"),
                    # The UDHR's preamble is one long sentence of "Whereas" clauses, but its 30 articles are
                    # short: 1,747 words in 61 sentences, 28.6 words each.
                    ("kept", "eng"),
                ]
            ),
        )
        assert_that(
            result.excluded
            | beam.Map(lambda d: (d.id, sorted(d.metadata), d.metadata[FILTER_REASON_KEY], d.text[:14])),
            equal_to(
                [
                    (
                        "1789-Washington",
                        [FILTER_REASON_KEY, "source", "words_per_sentence"],
                        "long_sentences",
                        "Fellow-Citizen",
                    ),
                ]
            ),
            label="Excluded",
        )
        assert_that(
            # The message names the exception and where it was raised, cut here to its stable start.
            result.dead_letters | beam.Map(lambda d: {**d.to_row(), "message": d.message.split(" (at ")[0]}),
            equal_to(
                [
                    {
                        "step": "wps",
                        "reason": "ZeroDivisionError",
                        "message": "ZeroDivisionError: division by zero",
                        "record_id": "nku",
                        "url": "https://www.ohchr.org/en/human-rights/udhr",
                        "excerpt": "",
                    }
                ]
            ),
            label="DeadLetters",
        )

    counters = run_and_collect(build)["wps"]["counters"]
    assert counters == {"in": 5, "out": 3, "dropped.long_sentences": 1, "errors.ZeroDivisionError": 1}


def test_batched_outputs_keep_their_own_window_and_timestamp(inaugural):
    # Five inaugural addresses, each stamped with its year and windowed by decade; the rule batches
    # three at a time, so a batch mixes decades and each output must keep its own element's window.
    years = ["1789-Washington", "1793-Washington", "1797-Adams", "1801-Jefferson", "1805-Jefferson"]
    docs = [Document(text=inaugural[key], id=key) for key in years]

    class WindowStart(beam.DoFn):
        def process(self, document, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
            yield document.id, int(timestamp), int(window.start)

    pipeline = BeamTestPipeline()
    result = (
        pipeline
        | beam.Create(docs)
        | beam.Map(lambda d: beam.window.TimestampedValue(d, int(d.id[:4])))
        | beam.WindowInto(beam.window.FixedWindows(10))
        | Filter(WordsPerSentence(limit=1000), step="wps")
    )
    assert_that(
        result.kept | beam.ParDo(WindowStart()),
        equal_to([(key, int(key[:4]), int(key[:3]) * 10) for key in years]),
    )
    pipeline.run().wait_until_finish()


def _verdict(rule: DocumentFilter, document: Document) -> tuple:
    verdict = rule.filter(document)
    return ("excluded", document.id, verdict.reason) if isinstance(verdict, Drop) else ("kept", document.id)


@pytest.mark.slow
def test_a_document_that_uses_up_its_cpu_time_is_a_timeout_dead_letter_and_the_others_are_judged_as_ever(inaugural):
    # A megabyte of punctuation in one record: it took 0.12.1's splitter a day, the linear one a fraction of a
    # second, still more than the tenth of a CPU second these steps may spend on one document here. The other
    # documents (real addresses) share batches with it in the batched rule.
    addresses = [
        Document(text=inaugural[name], id=name) for name in ("1789-Washington", "1793-Washington", "2009-Obama")
    ]
    stalling = Document(text="Marks: " + "!?.,;" * 200_000, id="symbol-run")
    documents = [addresses[0], stalling, *addresses[1:]]
    batched, repetition = WordsPerSentence(limit=40), GopherRepetitionFilter()
    # An SDK worker process runs the steps in threads other than its main one, as on Prism and Dataflow. (Not
    # multi_threading: on Beam 2.77 it drops elements.)
    pipeline = BeamTestPipeline(
        options=PipelineOptions(["--direct_running_mode=multi_processing", "--direct_num_workers=1"])
    )
    created = pipeline | beam.Create(documents)
    for label, rule in (("batched", batched), ("repetition", repetition)):
        result = created | label >> Filter(rule, step=label, timeout=0.1)
        expected = [_verdict(rule, document) for document in addresses] + [("dead", "symbol-run", "timeout")]
        assert_that(outcomes(result, f"{label}Outcomes"), equal_to(expected), label=f"{label}Check")
        messages = result.dead_letters | f"{label}Messages" >> beam.Map(lambda letter: (letter.step, letter.message))
        assert_that(
            messages,
            equal_to([(label, f"{label} used more than 0.1 s of CPU time")]),
            label=f"{label}MessagesCheck",
        )
    result = pipeline.run()
    result.wait_until_finish()
    stats = collect_stats(result, pipeline)
    assert stats["batched"]["counters"]["errors.timeout"] == 1
    assert stats["repetition"]["counters"]["errors.timeout"] == 1
    assert stats["repetition"]["counters"]["in"] == 4


def test_a_cpu_time_limit_that_is_not_positive_seconds_is_refused():
    for timeout in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            Filter(GopherRepetitionFilter(), timeout=timeout)
