"""Real corpora for the filter tests, read once per session from ../shared/data."""

from __future__ import annotations

import bz2
import json
import re

import apache_beam as beam
import pytest

from beamtrove.transforms.filters import FILTER_REASON_KEY
from tests.conftest import require


@pytest.fixture(scope="session")
def ground_truth(data_dir) -> dict[str, dict]:
    """article-extraction-benchmark gold articles: ``{page hash: {"articleBody", "url"}}``."""
    path = require(data_dir / "article-extraction-benchmark" / "ground-truth.json")
    return json.loads(path.read_text(encoding="utf-8"))


def article(ground_truth: dict[str, dict], prefix: str) -> dict:
    """The gold article whose page hash starts with ``prefix``."""
    (key,) = [key for key in ground_truth if key.startswith(prefix)]
    return ground_truth[key]


@pytest.fixture(scope="session")
def wikipedia_pages(data_dir) -> dict[str, str]:
    """Raw wikitext of the pages of the Wikipedia XML excerpt, by title."""
    path = require(
        data_dir / "text-corpora" / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    )
    xml = bz2.decompress(path.read_bytes()).decode("utf-8")
    pages = re.finditer(r"<title>(.*?)</title>.*?<text[^>]*>(.*?)</text>", xml, re.DOTALL)
    return {page.group(1): page.group(2) for page in pages}


def outcomes(result, label: str = "Outcomes") -> beam.PCollection:
    """One PCollection summing up a ``Filter`` result, for a single ``assert_that``.

    Kept documents become ``("kept", id)``, excluded ones ``("excluded", id,
    filter_reason)`` and dead letters ``("dead", record_id, reason)``.
    """
    kept = result.kept | f"{label}Kept" >> beam.Map(lambda doc: ("kept", doc.id))
    excluded = result.excluded | f"{label}Excluded" >> beam.Map(
        lambda doc: ("excluded", doc.id, doc.metadata[FILTER_REASON_KEY])
    )
    dead = result.dead_letters | f"{label}Dead" >> beam.Map(lambda letter: ("dead", letter.record_id, letter.reason))
    return (kept, excluded, dead) | f"{label}Flatten" >> beam.Flatten()
