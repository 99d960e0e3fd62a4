"""Main-text extraction with readability-lxml and inscriptis, as DataTrove's ``ReadabilityInscriptis``.

DataTrove calls Hugging Face's fork of readability-lxml, which is on no package
registry. readability-lxml 0.8.4.1 has the article finder of the commit the
fork branched from (0.9 rewrote it); :class:`_Article` runs it with the
fork's changes, so the texts are the same as DataTrove's.
"""

from __future__ import annotations

import re

import lxml.etree
import lxml.html
import readability
from inscriptis import get_text
from inscriptis.css_profiles import CSS_PROFILES
from inscriptis.model.config import ParserConfig
from lxml_html_clean import Cleaner
from readability.readability import REGEXES

from beamtrove.transforms.extractors.base import Extractor

__all__ = ["ReadabilityInscriptis"]

# DataTrove runs readability-lxml as changed by Hugging Face's fork of it; these are the fork's settings.
# Inline styles and <style> elements are kept: inscriptis reads ``display`` and ``white-space`` from them.
_CLEANER = Cleaner(
    scripts=True,
    javascript=False,
    comments=True,
    style=False,
    links=True,
    meta=False,
    add_nofollow=False,
    page_structure=False,
    processing_instructions=True,
    embedded=False,
    frames=False,
    forms=False,
    annoying_tags=False,
    remove_tags=None,
    remove_unknown_tags=False,
    safe_attrs_only=False,
)
_NEGATIVE = re.compile(REGEXES["negativeRe"].pattern + "|button|figure|form|input", re.I)
# Blocks of an article that are no prose, and the classes of ad and share widgets, left out of the text.
# fmt: off
_NOT_PROSE_TAGS = frozenset({
    "address", "amp-auto-ads", "audio", "button", "figcaption", "figure", "footer", "form", "header", "iframe", "img",
    "input", "map", "nav", "object", "output", "picture", "pirate", "script", "select", "source", "style", "table",
    "td", "th", "tr", "textarea", "tfoot", "video",
})
_WIDGET_CLASSES = frozenset({
    "ads-middle", "adsbygoogle", "cb_p6_patreon_button", "ezoic-ad", "ezoic-ad-adaptive", "ezoic-adpicker-ad",
    "inline-ad-slot", "jp-relatedposts", "sharedaddy",
})
# fmt: on
_READABLE_BLOCKS = "p, pre, article, div:has(> br)"
_UTF8_PARSER = lxml.html.HTMLParser(encoding="utf-8")


class _Article(readability.Document):
    """readability-lxml's article finder, run once as the fork DataTrove depends on runs it.

    A single lenient pass that keeps the elements readability-lxml would first
    discard as unlikely candidates, weighs forms, buttons and figures down, and
    leaves out of the article what :data:`_NOT_PROSE_TAGS` and
    :data:`_WIDGET_CLASSES` name.
    """

    def _parse(self, page: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
        return _CLEANER.clean_html(page)

    def class_weight(self, e) -> int:
        weight = 0
        for feature in (e.get("class"), e.get("id")):
            if feature:
                weight -= 25 if _NEGATIVE.search(feature) else 0
                weight += 25 if REGEXES["positiveRe"].search(feature) else 0
        return weight

    def get_clean_html(self) -> str:
        for element in self.html.findall(".//*"):
            if element.tag in _NOT_PROSE_TAGS or not _WIDGET_CLASSES.isdisjoint(element.classes):
                element.drop_tree()
        return lxml.html.tostring(self.html, encoding="unicode", method="html")

    def summary(self, html_partial: bool = False) -> str:
        """The article's HTML, or an empty string when no element scores as one."""
        self._html()
        for element in self.tags(self.html, "script", "style"):
            element.drop_tree()
        for body in self.tags(self.html, "body"):
            body.set("id", "readabilityBody")
        self.transform_misused_divs_into_paragraphs()
        candidates = self.score_paragraphs()
        best = self.select_best_candidate(candidates)
        if not best:
            return ""
        return self.sanitize(self.get_article(candidates, best, html_partial=html_partial), candidates) or ""


class ReadabilityInscriptis(Extractor):
    """readability-lxml finds the article, inscriptis lays its HTML out as text: DataTrove's ``ReadabilityInscriptis``.

    A page whose paragraphs do not add up to enough text is empty, as in
    Mozilla's ``isProbablyReaderable``: each paragraph-like block (``<p>``,
    ``<pre>``, ``<article>``, a ``<div>`` with a ``<br>`` child) that is no
    likely boilerplate and has at least ``min_text_length`` characters scores
    ``sqrt(length - min_text_length)``, and the page needs more than
    ``min_text_score`` in all. Tables, figures, forms, navigation and ad
    widgets inside the article are left out of its text.

    Args:
        max_new_lines: Most consecutive line breaks kept in the text.
        min_text_length: Characters below which a block neither counts towards
            the page's score nor is scored as article text by readability-lxml.
        min_text_score: Score the page's blocks must exceed for it to have a text.
    """

    name = "readability"

    def __init__(self, max_new_lines: int = 2, min_text_length: int = 25, min_text_score: float = 20):
        if min(max_new_lines, min_text_length, min_text_score) < 0:
            raise ValueError(
                "max_new_lines, min_text_length and min_text_score must not be negative, not "
                f"{max_new_lines!r}, {min_text_length!r}, {min_text_score!r}."
            )
        self.max_new_lines = max_new_lines
        self.min_text_length = min_text_length
        self.min_text_score = min_text_score

    def setup(self) -> None:
        self._layout = ParserConfig(css=CSS_PROFILES["strict"])
        self._excess_line_breaks = re.compile(f"\n{{{self.max_new_lines + 1},}}")

    def extract(self, html: str) -> str:
        try:
            page = lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=_UTF8_PARSER)
        except lxml.etree.ParserError:  # no element at all: nothing but whitespace, comments...
            return ""
        if not self._readable(page):
            return ""
        article = _Article(page, min_text_length=self.min_text_length).summary(html_partial=True)
        text = get_text(article, self._layout).strip()
        return self._excess_line_breaks.sub("\n" * self.max_new_lines, text)

    def _readable(self, page: lxml.html.HtmlElement) -> bool:
        score = 0.0
        for block in page.cssselect(_READABLE_BLOCKS):
            features = block.get("class", "") + block.get("id", "")
            unlikely = REGEXES["unlikelyCandidatesRe"].search(features)
            if unlikely and not REGEXES["okMaybeItsACandidateRe"].search(features):
                continue
            length = len(block.text_content())
            if length >= self.min_text_length:
                score += (length - self.min_text_length) ** 0.5
                if score > self.min_text_score:
                    return True
        return False
