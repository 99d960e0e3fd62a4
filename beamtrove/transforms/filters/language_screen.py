"""A cheap language screen that spares main-text extraction the pages clearly in another language."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from beamtrove.document import Document
from beamtrove.transforms.extractors.resiliparse import Resiliparse
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict
from beamtrove.transforms.filters.language import LanguageFilter, LanguageScores

__all__ = ["DEFAULT_SCREEN_THRESHOLD", "LanguageScreen"]

#: The screen threshold that lost no document the FineWeb stack keeps on two make_warc.py sets of 3000 pages,
#: where thresholds up to 0.3 lost none either (``benchmarks/fineweb_speed.py``).
DEFAULT_SCREEN_THRESHOLD = 0.1


class LanguageScreen(DocumentFilter):
    """Drops HTML pages whose whole text is clearly in none of the wanted languages, before extraction.

    Main-text extraction (trafilatura) costs far more than language ID, and
    most pages of a crawl are then dropped by the language filter. The screen
    reads each page's visible text the cheap way, Resiliparse's plain text of
    the whole page without its main-content heuristics, and asks the language
    filter's model for its first ``max_chars`` characters: 2.3 ms of CPU a
    page, against 32 for trafilatura, on the pages of
    ``benchmarks/fineweb_speed.py``. A page where none of ``languages`` scores
    ``threshold`` is dropped as ``language_screen``. What is set aside is what
    the decision was made on, not the page: its text is the sample the model
    scored, and its metadata (the page's URL and the rest of the record's)
    gains the best score of ``languages`` as ``language_screen_score`` and the
    model's likeliest language as ``language_screen_language``, with its score
    as ``language_screen_language_score``. Pages with fewer
    than ``min_chars`` characters of text, and pages the cheap extraction
    cannot read, are kept: too little to judge. Kept pages pass on unchanged,
    so whatever follows decides as if there were no screen.

    Args:
        model_path: The fastText language-ID model, as
            :class:`~beamtrove.transforms.filters.LanguageFilter` takes it.
        languages: ISO 639 codes of the languages kept.
        threshold: The score below which a page is dropped, in (0, 1].
        max_chars: Characters of each page's text scored.
        min_chars: Fewest characters of text a page is judged on.

    Raises:
        FileNotFoundError: There is no model at ``model_path``.
        UnknownLanguageError: A code of ``languages`` is not one of the model's labels.
        ValueError: No languages, or a threshold outside (0, 1].
    """

    name = "language_screen"
    # Pages are held as HTML until their batch is scored: small batches keep few of them in memory.
    batch_size = 32

    def __init__(
        self,
        model_path: str,
        languages: Iterable[str] = ("en",),
        threshold: float = DEFAULT_SCREEN_THRESHOLD,
        max_chars: int = 5000,
        min_chars: int = 100,
    ):
        languages = frozenset(languages)
        if not languages:
            raise ValueError("The language screen needs the languages to keep: it cannot screen for any language.")
        if not 0 < threshold <= 1:
            raise ValueError(f"The language screen's threshold must be above 0 and at most 1, not {threshold}.")
        # The language filter checks the model and the codes, and shares its loaded model with the screen.
        self._scorer = LanguageFilter(model_path, languages=languages)
        self._text = Resiliparse(main_content=False, preserve_formatting=False)
        self.languages = languages
        self.threshold = threshold
        self.max_chars = max_chars
        self.min_chars = min_chars

    def setup(self) -> None:
        self._scorer.setup()
        self._text.setup()

    def preload(self) -> None:
        self._scorer.preload()

    def filter(self, document: Document) -> Verdict:
        return self.filter_batch([document])[0]

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        texts = [self._cheap_text(document.text) for document in documents]
        judged = [index for index, text in enumerate(texts) if len(text) >= self.min_chars]
        scores = dict(zip(judged, self._scorer.language_scores([texts[index] for index in judged]), strict=True))
        return [self._verdict(document, texts[index], scores.get(index)) for index, document in enumerate(documents)]

    def _cheap_text(self, html: str) -> str:
        try:
            return self._text.extract(html)[: self.max_chars]
        except Exception:  # an unreadable page is left to the real extractor, as without the screen
            return ""

    def _verdict(self, document: Document, sample: str, scores: LanguageScores | None) -> Verdict:
        if scores is None or scores.wanted >= self.threshold:
            return document
        metadata = {
            **document.metadata,
            "language_screen_score": scores.wanted,
            "language_screen_language": scores.language,
            "language_screen_language_score": scores.score,
        }
        # The page's HTML is some ten times its text: the sample scored is what a user audits the decision by.
        return Drop("language_screen", dataclasses.replace(document, text=sample, metadata=metadata))
