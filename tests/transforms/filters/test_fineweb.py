"""FineWeb's quality rules on real reviews, articles, wikitext and UDHR texts."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.text import TERMINAL_PUNCTUATION, split_words
from beamtrove.transforms.filters import Drop, Filter, FineWebQualityFilter
from tests.conftest import run_and_collect
from tests.transforms.filters.conftest import article, outcomes


def reason(rule, text: str) -> str:
    verdict = rule.filter(Document(text=text, id="doc"))
    return verdict.reason if isinstance(verdict, Drop) else "kept"


def test_keeps_prose(inaugural, udhr_texts):
    rule = FineWebQualityFilter()
    for text in (inaugural["2009-Obama"], inaugural["1961-Kennedy"], udhr_texts["eng"]):
        assert reason(rule, text) == "kept"


def test_empty_and_line_punctuation(udhr_texts, movie_reviews):
    rule = FineWebQualityFilter()
    assert reason(rule, udhr_texts["nku"]) == "empty"
    # The review corpus ends every line with " . \n": the last character of each line is a space, so no line
    # ends in terminal punctuation (ratio 0 < 0.12), although 31 of its 35 lines end in one before that space.
    review = movie_reviews["neg/cv000_29416"]
    lines = [line for line in review.split("\n") if line.strip()]
    assert all(line.endswith(" ") for line in lines)
    assert (len(lines), sum(line.rstrip().endswith(TERMINAL_PUNCTUATION) for line in lines)) == (35, 31)
    assert reason(rule, review) == "line_punct_ratio"
    # line_punct_exclude_zero spares documents where no line at all ends so; the review then passes.
    assert reason(FineWebQualityFilter(line_punct_exclude_zero=True), review) == "kept"
    assert reason(FineWebQualityFilter(line_punct_thr=0), review) == "kept"


def test_short_lines(wikipedia_pages):
    # The wikitext of "List of anthropologists": "==A==", "*[[Talal Asad]]", ... 253 of its 284 lines are
    # at most 30 characters (0.89 > 0.67), and none ends in terminal punctuation.
    page = wikipedia_pages["List of anthropologists"]
    lines = [line for line in page.split("\n") if line.strip()]
    assert "*[[Talal Asad]]" in lines
    assert (len(lines), sum(len(line) <= 30 for line in lines)) == (284, 253)
    assert reason(FineWebQualityFilter(), page) == "line_punct_ratio"
    assert reason(FineWebQualityFilter(line_punct_exclude_zero=True), page) == "short_line_ratio"
    assert reason(FineWebQualityFilter(line_punct_exclude_zero=True, short_line_thr=0.9), page) != "short_line_ratio"


def test_duplicated_lines(ground_truth):
    # A Nigerian news article embedding two tweets from the Senate's account: the attribution line
    # "— The Nigerian Senate (@NGRSenate) October 9, 2018" appears twice, 50 repeated characters of 1,153
    # (0.043 > 0.01).
    body = article(ground_truth, "0dd1357045")["articleBody"]
    attribution = "— The Nigerian Senate (@NGRSenate) October 9, 2018"
    assert body.split("\n").count(attribution) == 2 and len(attribution) == 50
    assert len(body) - body.count("\n") == 1153
    assert reason(FineWebQualityFilter(), body) == "char_dup_ratio"
    assert reason(FineWebQualityFilter(char_duplicates_ratio=0.05), body) == "kept"


def test_list_ratio(ground_truth):
    # The benchmark's 181 article URLs, one per line, as a link list: each URL is one word, so there are
    # 180 newlines for 181 words (0.99 > 0.3). No URL ends in punctuation, so the zero exemption is needed.
    links = "\n".join(entry["url"] for entry in ground_truth.values())
    assert len(split_words(links)) == 181
    assert reason(FineWebQualityFilter(), links) == "line_punct_ratio"
    assert reason(FineWebQualityFilter(line_punct_exclude_zero=True), links) == "list_ratio"


def test_fineweb_filter_in_a_pipeline(inaugural, udhr_texts, movie_reviews, ground_truth, wikipedia_pages):
    docs = [
        Document(text=inaugural["2009-Obama"], id="2009-Obama"),
        Document(text=udhr_texts["eng"], id="eng"),
        Document(text=udhr_texts["nku"], id="nku"),
        Document(text=movie_reviews["neg/cv000_29416"], id="cv000"),
        Document(text=wikipedia_pages["List of anthropologists"], id="anthropologists"),
        Document(text=article(ground_truth, "0dd1357045")["articleBody"], id="senate"),
        Document(text="\n".join(entry["url"] for entry in ground_truth.values()), id="links"),
    ]

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(FineWebQualityFilter(line_punct_exclude_zero=True))
        assert_that(
            outcomes(result),
            equal_to(
                [
                    ("kept", "2009-Obama"),
                    ("kept", "eng"),
                    ("excluded", "nku", "empty"),
                    ("kept", "cv000"),
                    ("excluded", "anthropologists", "short_line_ratio"),
                    ("excluded", "senate", "char_dup_ratio"),
                    ("excluded", "links", "list_ratio"),
                ]
            ),
        )

    counters = run_and_collect(build)["fineweb_quality"]["counters"]
    assert counters == {
        "in": 7,
        "out": 3,
        "dropped.empty": 1,
        "dropped.short_line_ratio": 1,
        "dropped.char_dup_ratio": 1,
        "dropped.list_ratio": 1,
    }


def test_spacy_words_give_datatrove_list_ratio_on_text_without_spaces(udhr_texts):
    # DataTrove 0.10.1's FineWebQualityFilter() drops these declarations by list_ratio (newlines per spaCy
    # word); beamtrove's default splitter counts a word per character, so it keeps them.
    pytest.importorskip("spacy", reason="word_splitter='spacy' needs spaCy: pip install 'beamtrove[spacy]'")
    for language in ("jpn", "cmn_hans", "khm", "lao"):
        assert reason(FineWebQualityFilter(word_splitter="spacy"), udhr_texts[language]) == "list_ratio"
        assert reason(FineWebQualityFilter(), udhr_texts[language]) == "kept"
