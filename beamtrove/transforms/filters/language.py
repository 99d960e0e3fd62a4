"""Language identification with a fastText model: lid.176 (``en``) or GlotLID (``deu_Latn``)."""

from __future__ import annotations

import dataclasses
import io
import os
import posixpath
import struct
import tempfile
from collections.abc import Iterable
from typing import NamedTuple

import fasttext
from fsspec.implementations.local import LocalFileSystem

from beamtrove.assets import default_lid_model
from beamtrove.configuration import FRACTION
from beamtrove.document import Document
from beamtrove.fs import filesystem, is_local, open_url
from beamtrove.languages import LANGUAGE, LANGUAGE_SCORE, LANGUAGE_SCRIPT, split_language, top_language_score_key
from beamtrove.resources import require_on_worker
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once

__all__ = ["LanguageFilter", "LanguageScores", "UnknownLanguageError", "fasttext_model_problem", "load_fasttext_model"]

_LABEL_PREFIX = "__label__"
# fastText reports a label's probability plus 1e-5 (it ranks labels by log(p + 1e-5)), but compares the probability
# itself with the threshold it is given: asked for a little less, it reports every label whose score reaches it.
_REPORTED_EXCESS = 2e-5


class LanguageScores(NamedTuple):
    """What the model says of a text: the best score of the wanted languages, and its likeliest language."""

    wanted: float
    language: str
    score: float


# fastText's binary model (src/fasttext.cc, saveModel): magic and version, then its arguments (12 int32 and a
# double), its dictionary (3 int32 counts, 2 int64: tokens and pruned entries, -1 if none), its entries (a
# NUL-terminated word, an int64 count, an int8 type), the pruned-index pairs (2 int32 each), then the input matrix
# and the output matrix, each after a bool saying whether it is quantized. Little-endian, as every machine fastText
# runs on.
_MAGIC = 793712314
_VERSIONS = (11, 12)
_HEADER = struct.Struct("<2i")
_ARGUMENTS = struct.Struct("<12id")
_DICTIONARY = struct.Struct("<3i2q")
_ENTRY_TAIL = 9
_PRUNED_PAIR = 8
_FLAG = struct.Struct("<?")
_DENSE = struct.Struct("<2q")
_QUANTIZED = struct.Struct("<?2qi")
_QUANTIZER = struct.Struct("<4i")
_CENTROIDS_PER_DIMENSION = 256
_FLOAT = 4
_READ_SIZE = 1 << 16


class _Cut(Exception):
    """The file ends inside the named part of the model."""


def fasttext_model_problem(path: str) -> str | None:
    """What keeps the fastText model file ``path`` from being whole, or None when its every part is there.

    Walks the parts the header describes, reading only their sizes: fastText's loader takes a file cut short, or
    another file, for a model (and crashes, or predicts from garbage).
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        part = "header"
        try:
            magic, version = _read(file, _HEADER)
            if magic != _MAGIC or version not in _VERSIONS:
                return f"it does not start as one (magic {magic}, version {version})"
            part = "arguments"
            dimension = _read(file, _ARGUMENTS)[0]
            part = "dictionary"
            entries, _, _, _, pruned = _read(file, _DICTIONARY)
            if min(entries, dimension) < 0:
                return f"its header holds negative sizes ({entries} words, dimension {dimension})"
            _skip_entries(file, entries)
            _skip(file, size, max(pruned, 0) * _PRUNED_PAIR)  # -1: never pruned
            part = "input matrix"
            (quantized,) = _read(file, _FLAG)
            _skip_matrix(file, size, quantized, dimension)
            part = "output matrix"
            (quantized_output,) = _read(file, _FLAG)
            _skip_matrix(file, size, quantized and quantized_output, dimension)
        except _Cut:
            return f"the file ends at byte {size}, inside its {part} (a copy cut short?)"
        except ValueError as bad:
            return f"its {part} {bad}"
    return None


def _read(file, layout: struct.Struct) -> tuple:
    data = file.read(layout.size)
    if len(data) < layout.size:
        raise _Cut
    return layout.unpack(data)


def _skip(file, size: int, count: int) -> None:
    """Moves ``count`` bytes on, which the file must hold."""
    end = file.tell() + count
    if end > size:
        raise _Cut
    file.seek(end)


def _skip_entries(file, entries: int) -> None:
    """Moves past the dictionary's entries: each a NUL-terminated word, then its count and type."""
    buffer, at = b"", 0
    for _ in range(entries):
        while (end := buffer.find(b"\0", at)) < 0 or end + 1 + _ENTRY_TAIL > len(buffer):
            more = file.read(_READ_SIZE)
            if not more:
                raise _Cut
            buffer, at = buffer[at:] + more, 0
        at = end + 1 + _ENTRY_TAIL
    file.seek(at - len(buffer), io.SEEK_CUR)


def _skip_matrix(file, size: int, quantized: bool, dimension: int) -> None:
    """Moves past a dense matrix (rows, columns, floats) or a quantized one (codes and their quantizers)."""
    if not quantized:
        rows, columns = _read(file, _DENSE)
        _check_shape(rows, columns, dimension)
        _skip(file, size, rows * columns * _FLOAT)
        return
    with_norms, rows, columns, codes = _read(file, _QUANTIZED)
    _check_shape(rows, columns, dimension)
    if codes < 0:
        raise ValueError(f"holds a negative code size ({codes})")
    _skip(file, size, codes)
    _skip_quantizer(file, size)
    if with_norms:
        _skip(file, size, rows)
        _skip_quantizer(file, size)


def _skip_quantizer(file, size: int) -> None:
    dimension = _read(file, _QUANTIZER)[0]
    if dimension < 0:
        raise ValueError(f"holds a quantizer of negative dimension ({dimension})")
    _skip(file, size, dimension * _CENTROIDS_PER_DIMENSION * _FLOAT)


def _check_shape(rows: int, columns: int, dimension: int) -> None:
    if rows < 0 or columns != dimension:
        raise ValueError(f"is {rows} x {columns}, where the model's dimension is {dimension}")


def load_fasttext_model(path: str, what: str, option: str):
    """Loads the fastText model at ``path``, local or remote (a remote one is copied to a local file first).

    Args:
        path: The model file.
        what: What it is, e.g. ``"The language-ID model"``.
        option: The option that gives it, e.g. ``"--lid_model"``.

    Raises:
        MissingOnWorker: This process does not have it (see :func:`~beamtrove.resources.require_on_worker`).
        ValueError: It is not a whole fastText model (fastText's loader would crash on it, or load garbage).
    """
    fs, local = filesystem(require_on_worker(path, what, option))
    if not isinstance(fs, LocalFileSystem):
        # fastText reads only local files: copy a remote model next to the process once.
        with tempfile.NamedTemporaryFile(suffix=".ftz", delete=False) as copy, open_url(path) as remote:
            copy.write(remote.read())
        local = copy.name
    problem = fasttext_model_problem(local)
    if problem is not None:
        fetch = " (`beamtrove assets fetch` fetches it again)" if local == default_lid_model() else ""
        raise ValueError(f"{what} {path} ({option}) is not a whole fastText model: {problem}; replace it{fetch}.")
    return fasttext.load_model(local)


class UnknownLanguageError(ValueError):
    """A language code that the language-ID model has no label for."""


def _wanted_keys(languages: Iterable[str], model, model_path: str) -> tuple[str, ...]:
    """The model's labels (without ``__label__``) that ``languages`` name, in their order.

    A code is one of the model's labels (``en`` for lid.176, ``deu_Latn`` for GlotLID); with a model whose labels
    carry a script, a language alone (``deu``) names each of its labels (``deu_Latn``, ``deu_Cyrl``, ...).

    Raises:
        UnknownLanguageError: Names the first unknown code and lists the model's codes.
    """
    known = [label.removeprefix(_LABEL_PREFIX) for label in model.get_labels()]
    scripts: dict[str, list[str]] = {}
    for key in known:
        language, script = split_language(key)
        if script is not None:
            scripts.setdefault(language, []).append(key)
    labels = set(known)
    wanted: dict[str, None] = {}
    unknown = []
    for code in languages:
        matches = [code] if code in labels else scripts.get(code)
        if matches:
            wanted.update(dict.fromkeys(matches))
        else:
            unknown.append(code)
    if unknown:
        # A document would never be kept in a language the model cannot predict.
        raise UnknownLanguageError(_unknown_language_message(min(unknown), sorted(known), scripts, model_path))
    return tuple(wanted)


def _unknown_language_message(code: str, known: list[str], scripts: dict[str, list[str]], model_path: str) -> str:
    if not scripts:
        model_name = posixpath.splitext(posixpath.basename(model_path))[0]
        return f"{code or repr(code)}: not a language code of the {model_name} model; it knows: {', '.join(known)}"
    example = min(scripts, key=lambda language: (-len(scripts[language]), language))
    return (
        f"{code or repr(code)}: not a language code of the model {model_path}; it knows: {', '.join(known)}; "
        f"and a language alone stands for each of its scripts ({example}: {', '.join(scripts[example])})"
    )


class LanguageFilter(DocumentFilter):
    """Labels each document's language and keeps those in the wanted languages.

    Works with any fastText language-ID model: lid.176, whose labels are
    languages (``en``), or GlotLID, whose labels are a language and its script
    (``deu_Latn``). Writes ``language`` (the most likely language: ``en``,
    ``deu``), with a GlotLID-style label ``language_script`` (``Latn``), and
    ``language_score`` (its probability) to the metadata of every document,
    kept or dropped, as DataTrove's ``LanguageFilter`` does with its ``ft176``
    and ``glotlid`` backends. With ``keep_top_pairs_threshold`` it also writes
    ``top_language_<label>_score`` for every label scoring above it (only the
    labels of ``languages``, when they are given), as DataTrove's
    ``keep_top_pairs_threshold`` does. A document is kept when one of
    ``languages`` scores above ``language_threshold`` (or, with no
    ``languages``, when its most likely language does); otherwise it is
    dropped as ``language``. Predictions run in batches.

    Args:
        model_path: The fastText model (``lid.176.ftz`` or ``.bin``, GlotLID's
            ``model.bin``), a local path or fsspec URL; ``beamtrove assets
            fetch`` provides lid.176.
        languages: The labels to keep, as the model names them: ISO 639 codes
            for lid.176 (``"en"``, ...), ``language_Script`` pairs for GlotLID
            (``"deu_Latn"``, ...), where a language alone (``"deu"``) keeps
            each of its scripts. ``None`` keeps any language predicted
            confidently enough.
        language_threshold: Minimum probability, from 0 to 1.
        label_only: Label documents without dropping any.
        keep_top_pairs_threshold: Write the score of each label scoring above
            this, from 0 to 1; ``None`` writes none (DataTrove's ``-1``).

    Raises:
        FileNotFoundError: There is no model at ``model_path``.
        ValueError: ``language_threshold`` or ``keep_top_pairs_threshold`` is
            not from 0 to 1.
        UnknownLanguageError: A code of ``languages`` is not one of the
            model's labels (``en``, ``fr``, ... for lid.176), nor, for a
            GlotLID-style model, the language of one.
    """

    name = "language_filter"
    batch_size = 256

    def __init__(
        self,
        model_path: str,
        languages: Iterable[str] | None = ("en",),
        language_threshold: float = 0.65,
        label_only: bool = False,
        keep_top_pairs_threshold: float | None = None,
    ):
        fs, local = filesystem(model_path)
        if not fs.exists(local):
            raise FileNotFoundError(
                f"No language-ID model at {model_path}. Run `beamtrove assets fetch` to download lid.176.ftz "
                "into the cache, or pass --lid_model with the path of a fastText lid.176 model."
            )
        self.model_path = model_path
        codes = None if languages is None else tuple(languages)
        self.languages = None if codes is None else frozenset(codes)
        # A NaN threshold would clear no score: every document dropped.
        self.language_threshold = FRACTION.check(language_threshold, "language_threshold")
        self.label_only = label_only
        self.keep_top_pairs_threshold = (
            None
            if keep_top_pairs_threshold is None
            else FRACTION.check(keep_top_pairs_threshold, "keep_top_pairs_threshold")
        )
        # The labels the codes name, in their order: DataTrove writes the top pairs of its languages so.
        self._wanted_keys = None if codes is None else _wanted_keys(codes, self._shared_model(), model_path)
        self._wanted_labels = None if codes is None else frozenset(_LABEL_PREFIX + key for key in self._wanted_keys)

    def setup(self) -> None:
        self._model = self._shared_model()

    def preload(self) -> None:
        if is_local(self.model_path):
            self.setup()

    def _shared_model(self):
        return load_once(
            (LanguageFilter, self.model_path),
            lambda: load_fasttext_model(self.model_path, "The language-ID model", "--lid_model"),
        )

    def labels_scripts(self) -> bool:
        """Whether the model's labels name a script as well as a language (GlotLID's ``deu_Latn``), not a language
        alone (lid.176's ``en``). Loads the model."""
        labels = self._shared_model().get_labels()
        return any(split_language(label.removeprefix(_LABEL_PREFIX))[1] is not None for label in labels)

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
        wanted = self._wanted_labels
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
        wanted = self._wanted_labels
        return [
            any(label in wanted and score >= threshold for label, score in zip(labels, scores, strict=True))
            for labels, scores in zip(*self._predict(texts, k=-1, threshold=threshold), strict=True)
        ]

    def filter(self, document: Document) -> Verdict:
        return self.filter_batch([document])[0]

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        texts = [document.text for document in documents]
        floor = self._lowest_score_read()
        if floor is None:
            labels, scores = self._predict(texts, k=1)
        else:
            # Only the labels scoring about the floor or more, not the model's every label (GlotLID has 2,000):
            # turning each into Python objects costs more than the prediction.
            labels, scores = (list(found) for found in self._predict(texts, k=-1, threshold=floor))
            unlabelled = [index for index, found in enumerate(labels) if not len(found)]
            if unlabelled:
                # Even the likeliest label scores under the floor: it is still the document's language.
                best = self._predict([texts[index] for index in unlabelled], k=1)
                for index, best_labels, best_scores in zip(unlabelled, *best, strict=True):
                    labels[index], scores[index] = best_labels, best_scores
        return [self._verdict(*result) for result in zip(documents, labels, scores, strict=True)]

    def _lowest_score_read(self) -> float | None:
        """The lowest score a label needs for the verdict or the metadata to read it; None when only the
        likeliest label is read."""
        floors = []
        if self.keep_top_pairs_threshold is not None:
            floors.append(self.keep_top_pairs_threshold)
        # Past 0.5 (as fastText reports scores) only the most likely language can clear the threshold: it decides.
        if self.languages is not None and self.language_threshold < 0.5 + _REPORTED_EXCESS:
            floors.append(self.language_threshold)
        return min(floors, default=None)

    def _predict(self, texts: list[str], k: int, threshold: float = 0.0):
        """fastText's ``k`` likeliest labels of each text and their scores, best first; with ``threshold``, each
        label scoring at least that, and maybe some just under it (callers compare the scores)."""
        if threshold > 0:
            threshold = max(threshold - _REPORTED_EXCESS, 0.0)
        # fastText predicts one line per text.
        return self._model.predict([text.replace("\n", " ") for text in texts], k=k, threshold=threshold)

    def _verdict(self, document: Document, labels, scores) -> Verdict:
        keys = [label[len(_LABEL_PREFIX) :] for label in labels]
        best = max(range(len(keys)), key=scores.__getitem__)
        language, script = split_language(keys[best])
        # The keys in DataTrove's order: the script, the language, its score, then the top pairs.
        metadata = {**document.metadata, **({LANGUAGE_SCRIPT: script} if script else {})}
        metadata[LANGUAGE] = language
        metadata[LANGUAGE_SCORE] = float(scores[best])
        found = dict(zip(keys, scores, strict=True))
        # Those of the wanted labels, or of all, that scored (none below the floor of the prediction).
        pairs = found if self._wanted_keys is None else {key: found.get(key, 0.0) for key in self._wanted_keys}
        if self.keep_top_pairs_threshold is not None:
            for key, score in pairs.items():
                if score > self.keep_top_pairs_threshold:
                    metadata[top_language_score_key(key)] = float(score)
        if self.languages is None:
            keep = scores[best] > self.language_threshold
        else:
            keep = any(score > self.language_threshold for score in pairs.values())
        labelled = dataclasses.replace(document, metadata=metadata)
        if keep or self.label_only:
            return labelled
        return Drop("language", labelled)
