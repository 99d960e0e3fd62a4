"""Resiliparse on real article pages of the article-extraction-benchmark."""

from __future__ import annotations

import collections
import pickle
import re
import statistics

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.extractors import Extract, Resiliparse
from tests.transforms.extractors.conftest import PAGES, page_id


def extractor(**options) -> Resiliparse:
    result = Resiliparse(**options)
    result.setup()
    return result


@pytest.mark.parametrize("prefix", sorted(PAGES))
def test_keeps_the_article_and_drops_the_boilerplate(benchmark, prefix):
    sentence, boilerplate = PAGES[prefix]
    page = benchmark[page_id(benchmark, prefix)]
    assert sentence in page["articleBody"]
    assert boilerplate not in page["articleBody"]

    assert sentence in extractor().extract(page["html"])
    assert boilerplate not in extractor().extract(page["html"])
    # The boilerplate is real page text: only the main-content heuristics remove it.
    assert boilerplate in extractor(main_content=False).extract(page["html"])


def test_keeps_paragraph_breaks(benchmark):
    text = extractor().extract(benchmark[page_id(benchmark, "06e5123e4ef7")]["html"])
    assert text.startswith("(Reuters) — The New York State Attorney General (NYAG) is investigating WeWork")
    assert "\n\nA spokesperson for the NYAG declined to comment.\n\n" in text


def test_a_page_without_visible_text_gives_an_empty_string():
    html = "<html><head><script>var x = 1;</script><style>p {}</style></head><body><nav></nav></body></html>"
    assert extractor().extract(html) == ""


def test_configuration_survives_pickling(benchmark):
    restored = pickle.loads(pickle.dumps(Resiliparse(main_content=False, skip_elements=("nav",))))
    assert restored.options["main_content"] is False
    assert restored.options["skip_elements"] == ["nav"]
    restored.setup()
    html = benchmark[page_id(benchmark, "16c30add7e96")]["html"]
    text = restored.extract(html)
    # Both options reach the library: the cookie banner outside the main content stays, the <nav> menu goes.
    assert "By choosing I Accept, you consent to our use of cookies" in text
    assert "Vox main menu" not in text
    assert "Vox main menu" in extractor(main_content=False).extract(html)


def test_mean_token_f1_on_the_whole_benchmark(benchmark):
    # Bag-of-words F1 per page as in benchmarks/extraction_quality.py; the defaults measured 0.92.
    def tokens(text):
        return collections.Counter(re.findall(r"\w+", text.lower()))

    resiliparse = extractor()
    scores = []
    for page in benchmark.values():
        gold, predicted = tokens(page["articleBody"]), tokens(resiliparse.extract(page["html"]))
        overlap = sum((gold & predicted).values())
        precision = overlap / max(1, sum(predicted.values()))
        recall = overlap / max(1, sum(gold.values()))
        scores.append(2 * precision * recall / (precision + recall) if overlap else 0.0)
    assert len(scores) == 181
    assert statistics.mean(scores) > 0.91
    assert statistics.median(scores) > 0.95


def _summary(document: Document):
    """What the Beam test checks of each extracted document, as a comparable tuple."""
    sentence, boilerplate = PAGES[document.id[:12]]
    return document.id[:12], document.metadata["url"], sentence in document.text, boilerplate in document.text


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_extract_transform_in_a_pipeline(benchmark, timeout):
    documents = [
        Document(text=benchmark[key]["html"], id=key, metadata={"url": benchmark[key]["url"]})
        for key in (page_id(benchmark, prefix) for prefix in sorted(PAGES))
    ]
    # Dropped as empty rather than emitted with no text.
    documents.append(Document(text="<html><body><script>track()</script></body></html>", id="empty", metadata={}))
    expected = [(prefix, benchmark[page_id(benchmark, prefix)]["url"], True, False) for prefix in sorted(PAGES)]

    with BeamTestPipeline() as pipeline:
        extracted = pipeline | beam.Create(documents) | Extract(Resiliparse(), timeout=timeout)
        assert_that(extracted | beam.Map(_summary), equal_to(expected))
