"""Main-text extraction with trafilatura."""

from __future__ import annotations

import logging
from typing import Any

import trafilatura
from trafilatura.deduplication import LRU_TEST

from beamtrove.transforms.extractors.base import Extractor

__all__ = ["Trafilatura"]


class Trafilatura(Extractor):
    """Trafilatura's ``extract`` with DataTrove's defaults.

    Args:
        favor_precision: Prefer less text over text that may not be the main
            content.
        include_comments: Keep the comment section of pages.
        include_tables: Keep the text of HTML tables, as trafilatura and
            DataTrove (and so FineWeb) do by default.
        deduplicate: Let trafilatura drop segments repeated within a page.
            Trafilatura's own memory of seen segments spans every page a
            process extracts, which would make a page's text depend on which
            pages the same worker saw before; it is cleared before each page
            so the same page always gives the same text.
        **options: Any other keyword argument of ``trafilatura.extract``.
    """

    name = "trafilatura"

    def __init__(
        self,
        favor_precision: bool = True,
        include_comments: bool = False,
        include_tables: bool = True,
        deduplicate: bool = True,
        **options: Any,
    ):
        self.options = dict(
            favor_precision=favor_precision,
            include_comments=include_comments,
            include_tables=include_tables,
            deduplicate=deduplicate,
            **options,
        )

    def setup(self) -> None:
        # Trafilatura warns about every page it finds no text in; the step's
        # dropped.empty counter already says how many.
        logging.getLogger("trafilatura").setLevel(logging.ERROR)

    def extract(self, html: str) -> str:
        if self.options["deduplicate"]:
            LRU_TEST.clear()
        return trafilatura.extract(html, **self.options) or ""
