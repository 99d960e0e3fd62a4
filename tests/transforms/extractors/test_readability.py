"""ReadabilityInscriptis on real article pages of the article-extraction-benchmark, and on hostile input."""

from __future__ import annotations

import collections
import pickle
import random
import re
import statistics

import apache_beam as beam
import lxml.html
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.extractors import Extract, ReadabilityInscriptis
from tests.conftest import run_and_collect
from tests.transforms.extractors.conftest import PAGES, page_id

PROSE = "Paragraph one, long enough to count as prose here. " * 10


def extractor(**options) -> ReadabilityInscriptis:
    result = ReadabilityInscriptis(**options)
    result.setup()
    return result


def text_of(benchmark, prefix: str, **options) -> str:
    return extractor(**options).extract(benchmark[page_id(benchmark, prefix)]["html"])


def one_paragraph_page(length: int) -> str:
    return f"<html><body><div id='story'><p>{('Sentence, of words. ' * 30)[:length]}</p></div></body></html>"


@pytest.mark.parametrize(
    ("prefix", "length", "start", "end"),
    [
        (
            "06e5123e4ef7",
            3494,
            "(Reuters) — The New York State Attorney General (NYAG) is investigating WeWork, according to two",
            "Koh Gui Qing, with reporting by Herb Lash and Megan Davies, editing by Martin Howell.)",
        ),
        (
            "16c30add7e96",
            14742,
            "Another cloud of choking smoke and dust is set to descend upon the 20 million residents of Delhi",
            "“But what you need is political will and a bit of imagination.”",
        ),
        (
            "0ec95c7261d1",
            2511,
            "엘제이의 리벤지인가, 류화영의 코스프레인가\n\n[엔터미디어=정덕현의 이슈공감] 엘제이의 리벤지인가",
            "엔터미디어(\n\nwww.entermedia.co.kr\n\n), 무단전재 및 재배포금지",
        ),
        # As DataTrove's, it takes the forum thread under this article for the page's main text.
        (
            "232a43fb15ab",
            2806,
            "I agree but it begs the question...who the heck was/is in charge of the company...Ive or Cook?",
            "Best situation is to sell your 15” and buy the 16” and stop pounding on concrete. Just my 2¢.",
        ),
    ],
)
def test_text_of_real_pages(benchmark, prefix, length, start, end):
    text = text_of(benchmark, prefix)
    assert (len(text), text[: len(start)], text[-len(end) :]) == (length, start, end)
    assert "\n\n\n" not in text


@pytest.mark.parametrize("prefix", ["06e5123e4ef7", "16c30add7e96", "0ec95c7261d1"])
def test_keeps_the_article_and_drops_the_boilerplate(benchmark, prefix):
    sentence, boilerplate = PAGES[prefix]
    text = text_of(benchmark, prefix)
    assert sentence in text
    assert boilerplate not in text
    # The boilerplate is text of the page: only the article finder leaves it out.
    page_text = lxml.html.document_fromstring(benchmark[page_id(benchmark, prefix)]["html"]).text_content()
    assert boilerplate in " ".join(page_text.split())


def test_a_page_needs_enough_paragraph_text():
    # One paragraph of n >= 25 characters scores sqrt(n - 25), which must exceed 20.
    assert extractor().extract(one_paragraph_page(425)) == ""
    assert extractor().extract(one_paragraph_page(426)).endswith("Sentence, of words. Senten")
    assert extractor(min_text_score=19).extract(one_paragraph_page(425)).endswith("Sentence, of words. Sente")


def test_tables_and_figures_are_left_out_and_line_breaks_capped():
    html = (
        f"<html><body><article><p>{PROSE}</p><table><tr><td>a table cell</td></tr></table>"
        f"<pre>a\n\n\n\n\nb</pre><p>{PROSE}</p><figure><figcaption>A caption</figcaption></figure>"
        "</article></body></html>"
    )
    prose = PROSE.strip()
    assert extractor().extract(html) == f"{prose}\n\na\n\nb\n\n{prose}"
    assert extractor(max_new_lines=4).extract(html) == f"{prose}\n\na\n\n\n\nb\n\n{prose}"


def test_hostile_input_gives_an_empty_text():
    garbage = random.Random(0).randbytes(20_000).decode("utf-8", "replace")
    deep = "<html><body>" + "<div>" * 5000 + f"<p>{PROSE}</p>" + "</div>" * 5000 + "</body></html>"
    for html in ("", " \n", "\x00" * 10, garbage, "<!-- only a comment -->", '<?xml version="1.0"?>', deep):
        assert extractor().extract(html) == ""


def test_bad_configuration_fails_at_construction():
    with pytest.raises(ValueError, match="must not be negative, not -1, 25, 20"):
        ReadabilityInscriptis(max_new_lines=-1)


def test_configuration_survives_pickling(benchmark):
    restored = pickle.loads(pickle.dumps(ReadabilityInscriptis(min_text_score=1e9)))
    restored.setup()
    assert restored.extract(benchmark[page_id(benchmark, "06e5123e4ef7")]["html"]) == ""


@pytest.mark.slow
def test_a_huge_page_times_out_and_the_next_pages_are_extracted(benchmark):
    huge = "<html><body>" + f"<div class='c'><p>{PROSE}</p></div>" * 4000 + "</body></html>"
    documents = [
        Document(text=huge, id="huge", metadata={}),
        Document(text="\x00\xff garbage", id="garbage", metadata={}),
        Document(text=benchmark[page_id(benchmark, "06e5123e4ef7")]["html"], id="06e5123e4ef7", metadata={}),
    ]

    def build(pipeline):
        texts, dead_letters = (
            pipeline
            | beam.Create(documents)
            | "extract" >> Extract(ReadabilityInscriptis(), timeout=0.2).with_dead_letters()
        )
        assert_that(texts | beam.Map(lambda d: (d.id, len(d.text))), equal_to([("06e5123e4ef7", 3494)]))
        assert_that(
            dead_letters | beam.Map(lambda d: (d.reason, d.record_id)), equal_to([("timeout", "huge")]), label="dl"
        )

    counters = run_and_collect(build)["extract"]["counters"]
    assert counters == {"in": 3, "out": 1, "dropped.empty": 1, "errors.timeout": 1}


def test_mean_token_f1_on_the_whole_benchmark(benchmark):
    # Bag-of-words F1 per page as in benchmarks/extraction_quality.py.
    def tokens(text):
        return collections.Counter(re.findall(r"\w+", text.lower()))

    readability = extractor()
    scores = []
    for page in benchmark.values():
        gold, predicted = tokens(page["articleBody"]), tokens(readability.extract(page["html"]))
        overlap = sum((gold & predicted).values())
        precision = overlap / max(1, sum(predicted.values()))
        recall = overlap / max(1, sum(gold.values()))
        scores.append(2 * precision * recall / (precision + recall) if overlap else 0.0)
    assert len(scores) == 181
    assert round(statistics.mean(scores), 3) == 0.927
