"""The fastText score of a language per document, as DataTrove's ``LangStats`` computes it."""

from __future__ import annotations

from beamtrove.document import Document
from beamtrove.transforms.filters.language import LanguageFilter
from beamtrove.transforms.summary.base import StatsBlock

__all__ = ["LangStats"]


class LangStats(StatsBlock):
    """``fasttext_<language>``: the probability fastText's lid.176 model gives ``language``.

    A document whose ``language`` metadata is ``language`` and that carries
    a ``language_score`` (a language filter labelled it) keeps that score,
    as in DataTrove; the others are predicted, on their text with line
    breaks as spaces.

    Args:
        model_path: The fastText model, as :class:`~beamtrove.transforms.filters.LanguageFilter` takes it.
        language: The language code scored (``en``, ``fr``, ...).

    Raises:
        FileNotFoundError: No model at ``model_path``.
        UnknownLanguageError: The model has no label for ``language``.
    """

    name = "lang"

    def __init__(self, model_path: str, language: str = "en"):
        # The language filter checks the model and the code, and shares its loaded model with this block.
        self._labeller = LanguageFilter(model_path, languages=(language,), label_only=True)
        self.language = language

    def setup(self) -> None:
        self._labeller.setup()

    def extract(self, document: Document) -> dict[str, int | float]:
        metadata = document.metadata
        if metadata.get("language") == self.language and "language_score" in metadata:
            return {f"fasttext_{self.language}": metadata["language_score"]}
        return {f"fasttext_{self.language}": self._labeller.score(document.text, self.language)}
