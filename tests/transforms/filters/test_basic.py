"""Sampling, regex, length and predicate filters on real speeches and reviews."""

from __future__ import annotations

import re

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.filters import Drop, Filter, LambdaFilter, LengthFilter, RegexFilter, SamplerFilter
from tests.conftest import run_and_collect
from tests.transforms.filters.conftest import outcomes


def dropped(rule, docs: list[Document]) -> dict[str, str]:
    """``{id: reason}`` of the documents ``rule`` drops."""
    verdicts = {doc.id: rule.filter(doc) for doc in docs}
    return {doc_id: verdict.reason for doc_id, verdict in verdicts.items() if isinstance(verdict, Drop)}


def as_docs(texts: dict[str, str]) -> list[Document]:
    return [Document(text=text, id=name) for name, text in texts.items()]


def test_sampler_keeps_a_stable_fraction(movie_reviews):
    reviews = as_docs(movie_reviews)
    assert len(reviews) == 2000
    quarter = {doc.id for doc in reviews if not isinstance(SamplerFilter(0.25).filter(doc), Drop)}
    # Binomial(2000, 0.25): mean 500, standard deviation 19.4; 440..560 is beyond three deviations.
    assert 440 <= len(quarter) <= 560
    # The draw depends on the id and the seed only: a new instance agrees, another seed does not.
    assert quarter == {doc.id for doc in reviews if not isinstance(SamplerFilter(0.25).filter(doc), Drop)}
    reseeded = {doc.id for doc in reviews if not isinstance(SamplerFilter(0.25, seed=1).filter(doc), Drop)}
    assert reseeded != quarter and 440 <= len(reseeded) <= 560
    # A larger rate keeps a superset: a document is kept when its hash falls below the rate.
    half = {doc.id for doc in reviews if not isinstance(SamplerFilter(0.5).filter(doc), Drop)}
    assert quarter < half
    assert set(dropped(SamplerFilter(0.0), reviews[:50]).values()) == {"sampled_out"}
    assert dropped(SamplerFilter(1.0), reviews[:50]) == {}
    with pytest.raises(ValueError, match="between 0 and 1"):
        SamplerFilter(1.5)


def test_regex_filter(state_union):
    # Only Nixon's 1974 address names "the so-called Watergate affair".
    assert "the investigations of the so-called Watergate affair" in state_union["1974-Nixon"]
    assert dropped(RegexFilter(r"\bWatergate\b"), as_docs(state_union)) == {"1974-Nixon": "regex"}
    # Flags apply: "sputnik" in lower case matches Kennedy's 1961 "Sputnik" only when ignoring case.
    assert dropped(RegexFilter(r"\bsputnik\b"), as_docs(state_union)) == {}
    assert dropped(RegexFilter(r"\bsputnik\b", re.IGNORECASE), as_docs(state_union)) == {"1961-Kennedy": "regex"}


def test_length_filter(inaugural):
    # The shortest inaugural address is Washington's second (791 characters), the longest William Henry
    # Harrison's (49,700); the next longest is Taft's (32,164).
    lengths = {name: len(text) for name, text in inaugural.items()}
    assert (lengths["1793-Washington"], lengths["1841-Harrison"], lengths["1909-Taft"]) == (791, 49700, 32164)
    rule = LengthFilter(min_chars=1000, max_chars=40000)
    assert dropped(rule, as_docs(inaugural)) == {"1793-Washington": "too_short", "1841-Harrison": "too_long"}
    assert dropped(LengthFilter(min_chars=791), as_docs(inaugural)) == {}
    assert dropped(LengthFilter(max_chars=49699), as_docs(inaugural)) == {"1841-Harrison": "too_long"}
    with pytest.raises(ValueError, match="min_chars"):
        LengthFilter()


def test_lambda_filter(inaugural):
    rule = LambdaFilter(lambda doc: "Almighty" in doc.text, reason="no_almighty")
    kennedy = Document(text=inaugural["1961-Kennedy"], id="1961-Kennedy")
    # Kennedy swore "before you and Almighty God"; Washington's second address names no God.
    assert "before you and Almighty God" in kennedy.text
    assert rule.filter(kennedy) is kennedy
    assert rule.filter(Document(text=inaugural["1793-Washington"], id="1793")) == Drop("no_almighty")
    assert LambdaFilter(lambda doc: False).filter(kennedy) == Drop("lambda")


def second_line_has_words(doc: Document) -> bool:
    """Keeps reviews whose second line has more than 5 words; a one-line review raises IndexError."""
    return len(doc.text.splitlines()[1].split()) > 5


def test_basic_filters_in_a_pipeline(movie_reviews, inaugural):
    # cv506 is the corpus's only one-line review ("this film is extraordinarily horrendous ..."): the predicate
    # indexes its missing second line and raises. cv000's second line is "they get into an accident . " (6
    # words), cv001's "damn that y2k bug . " (5).
    reviews = [
        Document(text=movie_reviews[name], id=name, metadata={"url": f"file:///movie_reviews/{name}.txt"})
        for name in ("neg/cv000_29416", "neg/cv001_19502", "neg/cv506_17521", "pos/cv000_29590")
    ]
    speeches = [Document(text=inaugural[name], id=name) for name in ("1793-Washington", "1841-Harrison", "2009-Obama")]

    def build(pipeline):
        lines = (
            pipeline
            | "Reviews" >> beam.Create(reviews)
            | "Lines" >> Filter(LambdaFilter(second_line_has_words, reason="short_second_line"))
        )
        lengths = pipeline | "Speeches" >> beam.Create(speeches) | Filter(LengthFilter(1000, 40000))
        assert_that(
            (outcomes(lines, "L"), outcomes(lengths, "S")) | beam.Flatten(),
            equal_to(
                [
                    ("kept", "neg/cv000_29416"),
                    ("excluded", "neg/cv001_19502", "short_second_line"),
                    ("dead", "neg/cv506_17521", "IndexError"),
                    ("kept", "pos/cv000_29590"),
                    ("excluded", "1793-Washington", "too_short"),
                    ("excluded", "1841-Harrison", "too_long"),
                    ("kept", "2009-Obama"),
                ]
            ),
        )
        assert_that(
            # The message names the exception and the frame that raised it.
            lines.dead_letters
            | beam.Map(
                lambda d: (
                    d.step,
                    d.message.split(" (at ")[0],
                    d.message.endswith(" in second_line_has_words)"),
                    d.url,
                    d.excerpt,
                )
            ),
            equal_to(
                [
                    (
                        "lambda_filter",
                        "IndexError: list index out of range",
                        True,
                        "file:///movie_reviews/neg/cv506_17521.txt",
                        movie_reviews["neg/cv506_17521"],
                    )
                ]
            ),
            label="DeadLetter",
        )

    stats = run_and_collect(build)
    assert stats["lambda_filter"]["counters"] == {
        "in": 4,
        "out": 2,
        "dropped.short_second_line": 1,
        "errors.IndexError": 1,
    }
    assert stats["length_filter"]["counters"] == {"in": 3, "out": 1, "dropped.too_short": 1, "dropped.too_long": 1}
