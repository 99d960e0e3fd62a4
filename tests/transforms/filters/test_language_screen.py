"""LanguageScreen: fastText on a page's cheap text, before extraction, on real pages."""

from __future__ import annotations

import gzip
import html
import math
import pathlib
import re

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.extractors import Resiliparse
from beamtrove.transforms.filters import DEFAULT_SCREEN_THRESHOLD, Drop, Filter, LanguageFilter, LanguageScreen
from beamtrove.transforms.filters.language import UnknownLanguageError
from tests.conftest import require, run_and_collect
from tests.transforms.filters.conftest import outcomes


@pytest.fixture(scope="module")
def model_path(data_dir) -> str:
    return str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))


def _page(path: str, url: str) -> Document:
    html = gzip.decompress(pathlib.Path(path).read_bytes()).decode("utf-8", "replace")
    return Document(text=html, id=pathlib.Path(path).name.split(".")[0], metadata={"url": url})


@pytest.fixture(scope="module")
def page_files(data_dir, ground_truth) -> list[tuple[str, str]]:
    """The 181 pages of the article-extraction-benchmark: their files and URLs."""
    paths = sorted(require(data_dir / "article-extraction-benchmark" / "html").glob("*.html.gz"))
    return [(str(path), ground_truth[path.name.split(".")[0]]["url"]) for path in paths]


@pytest.fixture(scope="module")
def article_pages(page_files, ground_truth) -> list[tuple[Document, str]]:
    """The pages with their gold article text."""
    pages = [_page(path, url) for path, url in page_files]
    return [(page, ground_truth[page.id]) for page in pages]


def screen(model_path, **options) -> LanguageScreen:
    rule = LanguageScreen(model_path, **options)
    rule.setup()
    return rule


def test_keeps_every_page_whose_article_is_english_and_drops_most_others(model_path, article_pages):
    # The judge is the language filter on each page's gold article text: 161 English articles, 20 in Japanese,
    # Korean, Portuguese, ...
    gold = LanguageFilter(model_path)
    gold.setup()
    english = gold.wanted_scores([truth["articleBody"] for _, truth in article_pages])
    verdicts = screen(model_path).filter_batch([page for page, _ in article_pages])
    visible_text = Resiliparse(main_content=False, preserve_formatting=False)
    visible_text.setup()
    kept = [not isinstance(verdict, Drop) for verdict in verdicts]
    assert sum(score > 0.65 for score in english) == 161
    assert all(keep for keep, score in zip(kept, english, strict=True) if score > 0.65)
    # 4 of the others hold English somewhere, which extraction and the language filter then judge: a table of
    # drivers' names, English comment forms below Indonesian articles, English product titles.
    assert (sum(kept), len(kept)) == (165, 181)
    for (page, _), verdict in zip(article_pages, verdicts, strict=True):
        if isinstance(verdict, Drop):
            # What is set aside is what the decision was made on: the page's visible text, not its HTML.
            assert verdict.reason == "language_screen"
            assert verdict.document.text == visible_text.extract(page.text)
            assert len(verdict.document.text) < len(page.text) / 2
            metadata = verdict.document.metadata
            assert metadata["url"] == page.metadata["url"]
            assert metadata["language_screen_score"] < DEFAULT_SCREEN_THRESHOLD
            assert metadata["language_screen_language"] != "en" and metadata["language_screen_language_score"] > 0.5
        else:
            # A kept page passes on unchanged: what follows decides as if there were no screen.
            assert verdict is page


def test_english_anywhere_in_the_text_keeps_a_page(model_path, udhr_texts):
    rule = screen(model_path)
    chinese, russian, english = udhr_texts["cmn_hans"], udhr_texts["rus"], udhr_texts["eng"]
    # 1,400 characters of English, between the 4,676 of the Chinese declaration and the 13,493 of the Russian one.
    paragraph = html.escape(english[:1400])
    page = f"<html><body><div>{chinese}</div><div>{paragraph}</div><div>{russian}</div></body></html>"
    assert rule.filter(Document(page, "inside")).text == page
    # Without it, the page is dropped, judged on all of its text.
    dropped = rule.filter(Document(page.replace(paragraph, ""), "without"))
    assert isinstance(dropped, Drop)
    assert dropped.document.text.startswith("世界人权宣言") and dropped.document.text.endswith("настоящей Декларации.")
    assert dropped.document.metadata["language_screen_score"] < 0.1
    # A short article amid long navigation and sidebars in another language, found as the page's main text.
    menu = "".join(f"<li><a href='/{at}'>{word}</a></li>" for at, word in enumerate(russian.split()[:500]))
    short = " ".join(english.split()[:60])
    page = f"<html><body><nav><ul>{menu}</ul></nav><main><article><p>{short}</p></article></main></body></html>"
    assert rule.filter(Document(page, "short")).text == page


def test_the_best_of_the_wanted_languages_counts(model_path, article_pages):
    # A Portuguese page.
    (page,) = [page for page, _ in article_pages if page.id.startswith("23aaecd14171")]
    assert isinstance(screen(model_path).filter(page), Drop)
    assert screen(model_path, languages=("en", "pt")).filter(page) is page
    # A threshold at 1 drops even the English pages.
    (english,) = [page for page, _ in article_pages if page.id.startswith("042bb7b5feda")]
    assert screen(model_path).filter(english) is english
    dropped = screen(model_path, threshold=1.0).filter(english)
    assert isinstance(dropped, Drop) and 0.5 < dropped.document.metadata["language_screen_score"] < 1


def test_pages_with_too_little_text_or_unreadable_ones_are_kept(model_path, udhr_texts):
    rule = screen(model_path, threshold=1.0)
    chinese = udhr_texts["cmn_hans"]
    assert isinstance(rule.filter(Document(f"<p>{chinese[:200]}</p>", "long")), Drop)
    # Under 100 characters of text (87 here, spaces collapsed) are too few to judge; so is a page without text.
    short = Document(f"<html><script>{chinese}</script><p>{chinese[:99]}</p></html>", "short")
    empty = Document("<html><body><img src='a.png'></body></html>", "empty")
    # Resiliparse cannot encode a lone surrogate: the extractor decides about such a page, as without the screen.
    unreadable = Document(f"<p>\ud800{chinese[:200]}</p>", "unreadable")
    assert rule.filter_batch([short, empty, unreadable]) == [short, empty, unreadable]


@pytest.mark.parametrize("threshold", [0, -0.1, 1.5, math.nan])
def test_a_threshold_out_of_range_is_refused(model_path, threshold):
    with pytest.raises(ValueError, match=re.escape(f"threshold must be above 0 and at most 1, not {threshold}.")):
        LanguageScreen(model_path, threshold=threshold)


def test_languages_are_checked_at_construction(model_path):
    with pytest.raises(ValueError, match="needs the languages to keep"):
        LanguageScreen(model_path, languages=())
    with pytest.raises(UnknownLanguageError, match=r"english: not a language code of the lid\.176 model"):
        LanguageScreen(model_path, languages=("english",))
    with pytest.raises(FileNotFoundError, match="beamtrove assets fetch"):
        LanguageScreen(model_path + ".missing")


def test_through_a_pipeline_every_page_is_kept_or_excluded_with_its_reason(model_path, page_files, article_pages):
    pages = [page for page, _ in article_pages]
    verdicts = screen(model_path).filter_batch(pages)
    english = {page.id for page, verdict in zip(pages, verdicts, strict=True) if not isinstance(verdict, Drop)}

    def build(pipeline):
        # The pages are read inside the pipeline: a graph holding them would be pickled and compressed whole.
        read = pipeline | beam.Create(page_files) | "ReadPages" >> beam.MapTuple(_page)
        result = read | Filter(LanguageScreen(model_path))
        assert_that(
            outcomes(result),
            equal_to([("kept", p.id) if p.id in english else ("excluded", p.id, "language_screen") for p in pages]),
        )

    counters = run_and_collect(build)["language_screen"]["counters"]
    assert counters == {"in": 181, "out": 165, "dropped.language_screen": 16}
