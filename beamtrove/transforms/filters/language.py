"""Language identification with fastText's lid.176 model."""

from __future__ import annotations

import dataclasses
import posixpath
import tempfile
from collections.abc import Iterable
from typing import NamedTuple

import fasttext
from fsspec.implementations.local import LocalFileSystem

from beamtrove.document import Document
from beamtrove.fs import filesystem, is_local, open_url
from beamtrove.options import FRACTION
from beamtrove.resources import require_on_worker
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once

__all__ = ["LanguageFilter", "LanguageScores", "UnknownLanguageError", "load_fasttext_model"]

_LABEL_PREFIX = "__label__"


class LanguageScores(NamedTuple):
    """What the model says of a text: the best score of the wanted languages, and its likeliest language."""

    wanted: float
    language: str
    score: float


def load_fasttext_model(path: str):
    """Loads a fastText model from a local or remote path (a remote one is copied to a local file first)."""
    fs, local = filesystem(path)
    if isinstance(fs, LocalFileSystem):
        return fasttext.load_model(local)
    # fastText reads only local files: copy a remote model next to the process once.
    with tempfile.NamedTemporaryFile(suffix=".ftz", delete=False) as copy, open_url(path) as remote:
        copy.write(remote.read())
    return fasttext.load_model(copy.name)


class UnknownLanguageError(ValueError):
    """A language code that the language-ID model has no label for."""


def _check_languages(languages: frozenset[str], model, model_path: str) -> None:
    """Refuses codes the model cannot predict: a document would never be kept in their language.

    Raises:
        UnknownLanguageError: Names the first unknown code and lists the model's codes.
    """
    known = sorted(label.removeprefix(_LABEL_PREFIX) for label in model.get_labels())
    unknown = sorted(languages.difference(known))
    if unknown:
        model_name = posixpath.splitext(posixpath.basename(model_path))[0]
        raise UnknownLanguageError(
            f"{unknown[0] or repr(unknown[0])}: not a language code of the {model_name} model; "
            f"it knows: {', '.join(known)}"
        )


class LanguageFilter(DocumentFilter):
    """Labels each document's language and keeps those in the wanted languages.

    Writes ``language`` (the most likely language) and ``language_score`` (its
    probability) to the metadata of every document, kept or dropped. A document
    is kept when one of ``languages`` scores above ``language_threshold`` (or,
    with no ``languages``, when its most likely language does); otherwise it is
    dropped as ``language``. Predictions run in batches.

    Args:
        model_path: The fastText model (``lid.176.ftz`` or ``.bin``), a local
            path or fsspec URL; ``beamtrove assets fetch`` provides one.
        languages: ISO 639 codes to keep (``"en"``, ...); ``None`` keeps any
            language predicted confidently enough.
        language_threshold: Minimum probability, from 0 to 1.
        label_only: Label documents without dropping any.

    Raises:
        FileNotFoundError: There is no model at ``model_path``.
        ValueError: ``language_threshold`` is not from 0 to 1.
        UnknownLanguageError: A code of ``languages`` is not one of the
            model's labels (``en``, ``fr``, ... for lid.176).
    """

    name = "language_filter"
    batch_size = 256

    def __init__(
        self,
        model_path: str,
        languages: Iterable[str] | None = ("en",),
        language_threshold: float = 0.65,
        label_only: bool = False,
    ):
        fs, local = filesystem(model_path)
        if not fs.exists(local):
            raise FileNotFoundError(
                f"No language-ID model at {model_path}. Run `beamtrove assets fetch` to download lid.176.ftz "
                "into the cache, or pass --lid_model with the path of a fastText lid.176 model."
            )
        self.model_path = model_path
        self.languages = None if languages is None else frozenset(languages)
        # A NaN threshold would clear no score: every document dropped.
        self.language_threshold = FRACTION.check(language_threshold, "language_threshold")
        self.label_only = label_only
        if self.languages is not None:
            _check_languages(self.languages, self._shared_model(), model_path)

    def setup(self) -> None:
        self._model = self._shared_model()

    def preload(self) -> None:
        if is_local(self.model_path):
            self.setup()

    def _shared_model(self):
        return load_once(
            (LanguageFilter, self.model_path),
            lambda: load_fasttext_model(require_on_worker(self.model_path, "The language-ID model", "--lid_model")),
        )

    def score(self, text: str, language: str) -> float:
        """The probability the model gives ``language`` for ``text``, read with line breaks as spaces."""
        labels, scores = self._model.predict(text.replace("\n", " "), k=-1)
        label = _LABEL_PREFIX + language
        return next((float(s) for candidate, s in zip(labels, scores, strict=True) if candidate == label), 0.0)

    def wanted_scores(self, texts: list[str]) -> list[float]:
        """For each text, the highest probability the model gives one of ``languages`` (which must be set)."""
        return [scores.wanted for scores in self.language_scores(texts)]

    def language_scores(self, texts: list[str]) -> list[LanguageScores]:
        """For each text, the best score of one of ``languages`` (which must be set) and the model's likeliest."""
        wanted = {_LABEL_PREFIX + language for language in self.languages}
        found = []
        for labels, scores in zip(*self._predict(texts, k=-1), strict=True):
            best = max(range(len(labels)), key=scores.__getitem__)
            found.append(
                LanguageScores(
                    max((float(s) for label, s in zip(labels, scores, strict=True) if label in wanted), default=0.0),
                    labels[best][len(_LABEL_PREFIX) :],
                    float(scores[best]),
                )
            )
        return found

    def reach(self, texts: list[str], threshold: float) -> list[bool]:
        """For each text, whether one of ``languages`` (which must be set) scores ``threshold`` or more: what
        :meth:`language_scores` tells at less cost, the model reporting only the labels that do."""
        wanted = {_LABEL_PREFIX + language for language in self.languages}
        return [not wanted.isdisjoint(labels) for labels in self._predict(texts, k=-1, threshold=threshold)[0]]

    def filter(self, document: Document) -> Verdict:
        return self.filter_batch([document])[0]

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        # Past 0.5 only the most likely language can clear the threshold, so asking for all 176 is wasted.
        everything = self.languages is not None and self.language_threshold < 0.5
        labels, scores = self._predict([document.text for document in documents], k=-1 if everything else 1)
        return [self._verdict(*result) for result in zip(documents, labels, scores, strict=True)]

    def _predict(self, texts: list[str], k: int, threshold: float = 0.0):
        # fastText predicts one line per text.
        return self._model.predict([text.replace("\n", " ") for text in texts], k=k, threshold=threshold)

    def _verdict(self, document: Document, labels, scores) -> Verdict:
        languages = [label[len(_LABEL_PREFIX) :] for label in labels]
        best = max(range(len(languages)), key=scores.__getitem__)
        labelled = dataclasses.replace(
            document,
            metadata={**document.metadata, "language": languages[best], "language_score": float(scores[best])},
        )
        if self.languages is None:
            keep = scores[best] > self.language_threshold
        else:
            keep = any(
                score > self.language_threshold
                for language, score in zip(languages, scores, strict=True)
                if language in self.languages
            )
        if keep or self.label_only:
            return labelled
        return Drop("language", labelled)
