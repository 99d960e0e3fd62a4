"""Filtering with any fastText classifier, as DataTrove's ``FastTextClassifierFilter``.

A quality classifier (DCLM's, FineWeb-Edu-style, or one made with
``beamtrove train-classifier``) scores each document, paragraph or sentence;
the filter keeps the units whose labels clear their thresholds and drops a
document when no unit is left.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from beamtrove.configuration import FRACTION
from beamtrove.document import Document
from beamtrove.fs import filesystem, is_local
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once
from beamtrove.transforms.filters.language import load_fasttext_model

__all__ = ["FILTER_MODES", "FastTextClassifierFilter", "LabelThresholds", "label_thresholds"]

_LABEL_PREFIX = "__label__"
# A label the model did not return for a unit: scores below any threshold, as in DataTrove.
_ABSENT_SCORE = -9e9

#: What the classifier scores and the filter keeps or removes: the whole text, each paragraph or each sentence.
FILTER_MODES = ("document", "paragraph", "sentence")

#: ``(label without __label__, minimum score)`` pairs, or one such pair.
LabelThresholds = tuple[str, float] | Iterable[tuple[str, float]]


def label_thresholds(text: str, name: str = "label thresholds") -> list[tuple[str, float]]:
    """The ``(label, minimum)`` pairs of comma-separated ``label:minimum`` text, such as ``hq:0.5,lq:0.2``.

    Raises:
        ValueError: A pair with no label, or whose minimum is not a score
            from 0 to 1; the message names ``name`` (an option's flag) and the pair.
    """
    pairs = []
    for pair in filter(None, (part.strip() for part in text.split(","))):
        label, _, minimum = pair.rpartition(":")
        try:
            score = float(minimum)
        except ValueError:
            score = None
        if not label or score not in FRACTION:
            raise ValueError(
                f"{name} takes label:minimum pairs such as hq:0.5, each minimum {FRACTION.describe()} (got {pair!r})."
            )
        pairs.append((label, score))
    return pairs


def _pairs(thresholds: LabelThresholds | None) -> tuple[tuple[str, float], ...]:
    if not thresholds:
        return ()
    if isinstance(thresholds, tuple) and len(thresholds) == 2 and isinstance(thresholds[0], str):
        thresholds = [thresholds]
    pairs = []
    for given, score in thresholds:
        label = str(given).removeprefix(_LABEL_PREFIX)
        # fastText's scores are probabilities: a NaN minimum would clear no score, one above 1 none either.
        pairs.append((label, FRACTION.check(float(score), f"The minimum score of label {label!r}")))
    return tuple(pairs)


def _paragraphs(text: str) -> list[str]:
    """Each non-blank line with the blank lines after it (blank lines before the first form a unit of their own).

    Lines are split as ``str.splitlines`` splits them and joined again with ``\\n``, as DataTrove does.
    """
    lines = text.splitlines()
    units: list[str] = []
    current: list[str] = []
    for number, line in enumerate(lines):
        if line.strip() and current:
            units.append("".join(current))
            current = []
        current.append(line)
        if number < len(lines) - 1:
            current.append("\n")
    if current:
        units.append("".join(current))
    return units


def _sentence_splitter() -> Callable[[str], list[str]]:
    """Splits at the sentence ends of spaCy's rule-based sentencizer; each part runs to the next one's end."""
    import spacy  # noqa: PLC0415 - an optional dependency, loaded by the workers that use it

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")

    def sentences(text: str) -> list[str]:
        nlp.max_length = max(nlp.max_length, len(text) + 10)
        with nlp.memory_zone():
            ends = [sentence.end_char for sentence in nlp(text).sents]
        return [text[start:end] for start, end in zip([0, *ends[:-1]], [*ends[:-1], len(text)], strict=True)]

    return sentences


class FastTextClassifierFilter(DocumentFilter):
    """Scores texts with a fastText classifier and keeps those its labels allow.

    With ``keep_labels`` a unit (the document, a paragraph or a sentence, by
    ``filter_mode``) is kept when at least one of the labels scores at least
    its threshold; with ``remove_labels`` it is kept when none does; with
    neither, every unit is kept and the filter only labels. The kept units,
    joined, become the document's text; a document left blank is dropped as
    ``classifier``. Each label's score (averaged over the units) is written to
    the metadata under the label's full name (``__label__hq``) when
    ``save_labels_in_metadata``. Units are stripped and their line breaks
    replaced by ``newline_replacement`` before scoring (fastText reads one
    line); the text kept is the unit as it was. Predictions run in batches.

    Decisions equal DataTrove's ``FastTextClassifierFilter`` with its defaults
    (``newline_replacement=""``, document mode). Sentence mode splits with
    spaCy's sentencizer, as DataTrove does, and needs spaCy installed
    (``pip install 'beamtrove[spacy]'``).

    Args:
        model_path: The fastText classifier (``.bin`` or ``.ftz``), a local
            path or fsspec URL.
        keep_labels: ``(label, minimum score)`` pairs (or one pair), labels
            without ``__label__``; a unit is kept when any clears its threshold.
        remove_labels: Such pairs; a unit is removed when any clears its threshold.
        save_labels_in_metadata: Write every label's score to the metadata.
        newline_replacement: What replaces line breaks before scoring;
            DCLM's classifiers were trained on text with ``" "``.
        filter_mode: ``document``, ``paragraph`` or ``sentence``.

    Raises:
        FileNotFoundError: There is no model at ``model_path``.
        ValueError: Both ``keep_labels`` and ``remove_labels``, a minimum
            score that is not from 0 to 1, a label the model does not have, an
            unknown ``filter_mode``, or sentence mode without spaCy.
    """

    name = "classifier"
    batch_size = 256

    def __init__(
        self,
        model_path: str,
        keep_labels: LabelThresholds | None = None,
        remove_labels: LabelThresholds | None = None,
        save_labels_in_metadata: bool = True,
        newline_replacement: str = "",
        filter_mode: str = "document",
    ):
        fs, local = filesystem(model_path)
        if not fs.exists(local):
            raise FileNotFoundError(
                f"No fastText classifier at {model_path}: pass the path of a .bin or .ftz model, "
                "e.g. one written by `beamtrove train-classifier`."
            )
        self.keep_labels = _pairs(keep_labels)
        self.remove_labels = _pairs(remove_labels)
        if self.keep_labels and self.remove_labels:
            raise ValueError("Give keep_labels or remove_labels, not both: chain two filters to do both.")
        if filter_mode not in FILTER_MODES:
            raise ValueError(f"The filter mode is one of {', '.join(FILTER_MODES)}, not {filter_mode!r}.")
        if filter_mode == "sentence" and importlib.util.find_spec("spacy") is None:
            raise ValueError("Splitting sentences needs spaCy installed: pip install 'beamtrove[spacy]'.")
        self.model_path = model_path
        self.save_labels_in_metadata = save_labels_in_metadata
        self.newline_replacement = newline_replacement
        self.filter_mode = filter_mode
        known = sorted(label.removeprefix(_LABEL_PREFIX) for label in self._shared_model().get_labels())
        for label, _ in self.keep_labels + self.remove_labels:
            if label not in known:
                raise ValueError(f"{label!r} is not a label of {model_path}; its labels: {', '.join(known)}.")

    def setup(self) -> None:
        self._model = self._shared_model()
        if self.filter_mode == "sentence":
            self._split = load_once((FastTextClassifierFilter, "sentencizer"), _sentence_splitter)
        else:
            self._split = _paragraphs if self.filter_mode == "paragraph" else lambda text: [text]

    def preload(self) -> None:
        if is_local(self.model_path):
            self._shared_model()

    def _shared_model(self):
        return load_once(
            (FastTextClassifierFilter, self.model_path),
            lambda: load_fasttext_model(self.model_path, "The classifier model", "--classifier_model"),
        )

    def filter(self, document: Document) -> Verdict:
        return self.filter_batch([document])[0]

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        units = [self._split(document.text) for document in documents]
        texts = [unit.strip().replace("\n", self.newline_replacement) for parts in units for unit in parts]
        labels, scores = self._model.predict(texts, k=-1)
        verdicts = []
        start = 0
        for document, parts in zip(documents, units, strict=True):
            end = start + len(parts)
            # float64 as DataTrove's single-text predictions are: thresholds compare the same numbers.
            unit_scores = [
                dict(zip(unit_labels, np.asarray(unit_values, dtype=np.float64).tolist(), strict=True))
                for unit_labels, unit_values in zip(labels[start:end], scores[start:end], strict=True)
            ]
            verdicts.append(self._verdict(document, parts, unit_scores))
            start = end
        return verdicts

    def _keeps(self, scores: dict[str, float]) -> bool:
        def clears(thresholds: Sequence[tuple[str, float]]) -> bool:
            return any(scores.get(_LABEL_PREFIX + label, _ABSENT_SCORE) >= minimum for label, minimum in thresholds)

        if self.keep_labels:
            return clears(self.keep_labels)
        return not clears(self.remove_labels)

    def _verdict(self, document: Document, parts: list[str], unit_scores: list[dict[str, float]]) -> Verdict:
        text = "".join(part for part, scores in zip(parts, unit_scores, strict=True) if self._keeps(scores))
        metadata = document.metadata
        if self.save_labels_in_metadata:
            per_label: dict[str, list[float]] = {}
            for scores in unit_scores:
                for label, score in scores.items():
                    per_label.setdefault(label, []).append(score)
            metadata = {**metadata, **{label: float(np.mean(values)) for label, values in per_label.items()}}
        if not text.strip():
            return Drop(self.name, dataclasses.replace(document, metadata=metadata))
        return dataclasses.replace(document, text=text, metadata=metadata)
