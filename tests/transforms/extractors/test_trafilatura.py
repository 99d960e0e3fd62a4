"""Trafilatura with DataTrove's defaults on real article pages."""

from __future__ import annotations

import gzip
import json

import apache_beam as beam
import pytest
import trafilatura
from apache_beam.testing.util import assert_that, equal_to
from resiliparse.extract.html2text import extract_plain_text
from trafilatura.deduplication import LRU_TEST

from beamtrove.document import Document
from beamtrove.transforms.extractors import Extract, Trafilatura
from tests.conftest import require, run_and_collect
from tests.transforms.extractors.conftest import PAGES, page_documents, page_id


@pytest.mark.parametrize("prefix", sorted(PAGES))
def test_extracts_the_article_without_its_boilerplate(benchmark, prefix):
    sentence, boilerplate = PAGES[prefix]
    page = benchmark[page_id(benchmark, prefix)]
    # The boilerplate is in the page's visible text: trafilatura had to leave it out.
    assert boilerplate in extract_plain_text(page["html"], main_content=False)
    text = Trafilatura().extract(page["html"])
    assert sentence in text
    assert boilerplate not in text


def test_tables_are_kept_as_trafilatura_and_datatrove_keep_them_unless_left_out(data_dir):
    # The first 60 benchmark pages that hold an HTML table: with tables (the default), their text is longer.
    root = require(data_dir / "article-extraction-benchmark")
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    with_tables = without_tables = 0
    for key in sorted(truth)[:60]:
        html = gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()).decode("utf-8", "replace")
        if "<table" not in html:
            continue
        with_tables += len(Trafilatura().extract(html))
        without_tables += len(Trafilatura(include_tables=False).extract(html))
    assert with_tables > without_tables > 0
    # DataTrove's FineWeb configuration: favour_precision and trafilatura's defaults, on a fresh process's memory.
    ours = Trafilatura().extract(html)
    LRU_TEST.clear()
    assert ours == trafilatura.extract(html, favor_precision=True, deduplicate=True)


def test_extract_in_a_pipeline_counts_extracted_and_empty(benchmark):
    documents = page_documents(benchmark)
    # An HTML page with no text at all: extraction is empty and the document is dropped.
    empty = Document(text="<html><head><title></title></head><body><script>x()</script></body></html>", id="empty")

    def build(pipeline):
        texts = pipeline | beam.Create([*documents, empty]) | "extract" >> Extract(Trafilatura(), timeout=30.0)
        assert_that(
            texts | beam.Map(lambda d: (d.id, PAGES[d.id][0] in d.text)),
            equal_to([(prefix, True) for prefix in sorted(PAGES)]),
        )

    counters = run_and_collect(build)["extract"]["counters"]
    assert counters == {"in": 5, "out": 4, "dropped.empty": 1}
