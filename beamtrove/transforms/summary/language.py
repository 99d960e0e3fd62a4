"""The fastText score of a language per document, as DataTrove's ``LangStats`` computes it."""

from __future__ import annotations

from beamtrove.document import Document
from beamtrove.languages import LANGUAGE_SCORE, language_key
from beamtrove.transforms.filters.language import LanguageFilter
from beamtrove.transforms.summary.base import StatsBlock

__all__ = ["LangStats"]


class LangStats(StatsBlock):
    """``fasttext_<language>``: the probability a fastText model (lid.176, GlotLID) gives ``language``.

    A document whose language (:func:`~beamtrove.languages.language_key`:
    ``en``, ``deu_Latn``) is ``language`` and that carries a
    ``language_score`` (a language filter labelled it) keeps that score, as
    in DataTrove; the others are predicted, on their text with line breaks as
    spaces.

    Args:
        model_path: The fastText model, as :class:`~beamtrove.transforms.filters.LanguageFilter` takes it.
        language: The label scored (``en``, ``fr``, ... for lid.176; ``deu_Latn`` for GlotLID).

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
        # A GlotLID-labelled document's language is its pair (deu_Latn), as the model's labels are.
        if language_key(metadata) == self.language and LANGUAGE_SCORE in metadata:
            return {f"fasttext_{self.language}": metadata[LANGUAGE_SCORE]}
        return {f"fasttext_{self.language}": self._labeller.score(document.text, self.language)}
