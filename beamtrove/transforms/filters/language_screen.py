"""A cheap language screen that spares main-text extraction the pages clearly in another language."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from resiliparse.parse.html import HTMLTree

from beamtrove.document import Document
from beamtrove.transforms.extractors.resiliparse import Resiliparse
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict
from beamtrove.transforms.filters.language import LanguageFilter, LanguageScores

__all__ = ["DEFAULT_SCREEN_THRESHOLD", "DEFAULT_SCREEN_WINDOW", "LanguageScreen"]

#: The screen threshold. On the pages of ``benchmarks/screen_safety.py`` and the layouts built to mislead the screen
#: (docs/filters.md), the best sample of every page the FineWeb stack keeps scored 0.67 or more.
DEFAULT_SCREEN_THRESHOLD = 0.1

#: Characters of each window of a page's text the model scores.
DEFAULT_SCREEN_WINDOW = 1000


class LanguageScreen(DocumentFilter):
    """Drops HTML pages with no part in one of the wanted languages, before extraction.

    Main-text extraction (trafilatura) costs far more than language ID, and
    most pages of a crawl are then dropped by the language filter. The screen
    reads each page the cheap way, with Resiliparse: the visible text of the
    whole page, and its main text as Resiliparse's main-content heuristics find
    it. It asks the language filter's model about the main text whole (the
    visible text, when there is no main text), as the language filter asks
    about the extractor's text; unless one of ``languages`` scores
    ``threshold`` there, it asks whether one does in any window of ``window``
    characters of the visible text, each window overlapping the next by half,
    so that every stretch of the text one and a half windows long holds a
    whole window. A page is dropped as ``language_screen`` only when none
    does in any of these samples: an article after long navigation, sidebars
    in another language or a table is still found, wherever the extractor
    would find it. On the 1,254 real pages make_warc.py draws from, it took
    3.2 to 3.5 ms of CPU a page (the first 5,000 characters of the visible
    text alone, as the screen read pages before, took 1.4), against about 24
    for trafilatura.

    What is set aside is what the decision was made on, not the page: its text
    is the visible text the model scored, and its metadata (the page's URL and
    the rest of the record's) gains what the model said of the main text: the
    best score of ``languages`` as ``language_screen_score``, and its likeliest
    language as ``language_screen_language``, with its score as
    ``language_screen_language_score`` (every window scored below
    ``threshold`` too). Pages with fewer than ``min_chars`` characters of
    text, and pages the cheap extraction cannot read, are kept: too little to
    judge. Kept pages pass on unchanged, so whatever follows decides as if
    there were no screen.

    Args:
        model_path: The fastText language-ID model, as
            :class:`~beamtrove.transforms.filters.LanguageFilter` takes it.
        languages: ISO 639 codes of the languages kept.
        threshold: The score below which a page is dropped, in (0, 1].
        window: Characters of each window of the visible text scored.
        min_chars: Fewest characters of text a page is judged on.

    Raises:
        FileNotFoundError: There is no model at ``model_path``.
        UnknownLanguageError: A code of ``languages`` is not one of the model's labels.
        ValueError: No languages, a threshold outside (0, 1], or a window under 2 characters.
    """

    name = "language_screen"
    # Pages are held as HTML until their batch is scored: small batches keep few of them in memory.
    batch_size = 32

    def __init__(
        self,
        model_path: str,
        languages: Iterable[str] = ("en",),
        threshold: float = DEFAULT_SCREEN_THRESHOLD,
        window: int = DEFAULT_SCREEN_WINDOW,
        min_chars: int = 100,
    ):
        languages = frozenset(languages)
        if not languages:
            raise ValueError("The language screen needs the languages to keep: it cannot screen for any language.")
        if not 0 < threshold <= 1:
            raise ValueError(f"The language screen's threshold must be above 0 and at most 1, not {threshold}.")
        if window < 2:
            raise ValueError(f"The language screen's window must be at least 2 characters, not {window}.")
        # The language filter checks the model and the codes, and shares its loaded model with the screen.
        self._scorer = LanguageFilter(model_path, languages=languages)
        self._visible_text = Resiliparse(main_content=False, preserve_formatting=False)
        self._main_text = Resiliparse(main_content=True, preserve_formatting=False)
        self.languages = languages
        self.threshold = threshold
        self.window = window
        self.min_chars = min_chars

    def setup(self) -> None:
        self._scorer.setup()
        self._visible_text.setup()
        self._main_text.setup()

    def preload(self) -> None:
        self._scorer.preload()

    def filter(self, document: Document) -> Verdict:
        return self.filter_batch([document])[0]

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        pages = [self._read(document.text) for document in documents]
        judged = [page for page in pages if len(page.text) >= self.min_chars]
        # The main texts first, scored in full: a page whose main text is in one of the languages needs no window
        # scored; a page dropped is described by its main text's scores.
        for page, scores in zip(judged, self._scorer.language_scores([page.lead for page in judged]), strict=True):
            page.lead_scores = scores
        undecided = [page for page in judged if page.lead_scores.wanted < self.threshold]
        windows = [(page, window) for page in undecided for window in self._windows(page.text)]
        for (page, _), reached in zip(
            windows, self._scorer.reach([w for _, w in windows], self.threshold), strict=True
        ):
            page.reached |= reached
        return [self._verdict(document, page) for document, page in zip(documents, pages, strict=True)]

    def _read(self, html: str) -> _Page:
        """The page's visible text and main text; none when the cheap extraction cannot read it."""
        try:
            tree = HTMLTree.parse(html)
            return _Page(self._visible_text.extract(tree), self._main_text.extract(tree))
        except Exception:  # an unreadable page is left to the real extractor, as without the screen
            return _Page("", "")

    def _windows(self, text: str) -> list[str]:
        """Windows of ``self.window`` characters over all of ``text``, each starting half a window after the last,
        the last one ending with the text."""
        if len(text) <= self.window:
            return [text]
        starts = [*range(0, len(text) - self.window, self.window // 2), len(text) - self.window]
        return [text[start : start + self.window] for start in starts]

    def _verdict(self, document: Document, page: _Page) -> Verdict:
        scores = page.lead_scores
        if scores is None or scores.wanted >= self.threshold or page.reached:
            return document
        metadata = {
            **document.metadata,
            "language_screen_score": scores.wanted,
            "language_screen_language": scores.language,
            "language_screen_language_score": scores.score,
        }
        # The page's HTML is several times its text: the text scored is what a user audits the decision by.
        return Drop("language_screen", dataclasses.replace(document, text=page.text, metadata=metadata))


@dataclasses.dataclass
class _Page:
    """What the screen read of a page (its visible text and main text), and what the model said of it so far."""

    text: str
    main: str
    lead_scores: LanguageScores | None = None
    reached: bool = False

    @property
    def lead(self) -> str:
        """The sample scored first, in full: the main text, or the text itself when it has none."""
        return self.main or self.text
