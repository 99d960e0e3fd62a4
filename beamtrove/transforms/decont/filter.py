"""Dropping documents that contain an n-gram of a benchmark."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.text import normalize_text, word_splitter
from beamtrove.transforms.decont.index import DecontIndex, IndexManifest, read_manifest
from beamtrove.transforms.decont.ngrams import hash_ngram, word_ngrams
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once

__all__ = ["NGramsDecontFilter"]


@dataclasses.dataclass(frozen=True)
class _Lookup:
    """The indexes that split words alike and use n-grams of one length, merged."""

    n_grams: int
    word_splitter: str
    index: DecontIndex


def _load_lookups(manifests: tuple[IndexManifest, ...], storage_options: Mapping[str, Any]) -> list[_Lookup]:
    groups: dict[tuple[int, str], list[IndexManifest]] = {}
    for manifest in manifests:
        groups.setdefault((manifest.config.n_grams, manifest.config.word_splitter), []).append(manifest)
    return [
        _Lookup(n_grams, splitter, DecontIndex(members, storage_options))
        for (n_grams, splitter), members in groups.items()
    ]


class NGramsDecontFilter(DocumentFilter):
    """Drops documents that contain an n-gram of a benchmark's index, as DataTrove's ``NGramsDecontFilter``.

    The document's text is normalized and split into words as the index's
    items were (the settings are read from each index's manifest), and every
    run of ``n`` words is looked up. The first one found, in text order,
    drops the document as ``contaminated_<task>``, with
    ``contaminated_ngram`` (the normalized n-gram) and ``contaminated_task``
    in its metadata. Indexes are loaded once per worker process. An index
    built with ``word_splitter="language"`` splits each document by its own
    language (:func:`beamtrove.text.word_splitter`).

    Args:
        index_paths: Index folders (paths or fsspec URLs) written by
            :class:`~beamtrove.transforms.decont.BuildDecontIndex`
            (``beamtrove run decont_index``) or by DataTrove's ``NGramsDecontIndexer``.
        storage_options: fsspec filesystem options.
        word_tokenizers: The word tokenizer table an index's language
            splitter reads; the fetched one when None.

    Raises:
        ValueError: No index given, or an index whose manifest cannot be used here.
        FileNotFoundError: A folder holds no index.
        ConfigurationError: A damaged index (see :func:`~beamtrove.transforms.decont.read_manifest`); a file found
            damaged when a worker loads it fails the run with the same error, naming it.
    """

    name = "decont"

    def __init__(
        self,
        index_paths: str | Sequence[str],
        storage_options: Mapping[str, Any] | None = None,
        word_tokenizers: str | None = None,
    ):
        paths = (index_paths,) if isinstance(index_paths, str) else tuple(index_paths)
        if not paths:
            raise ValueError("NGramsDecontFilter needs at least one index folder.")
        self._storage_options = dict(storage_options or {})
        self.word_tokenizers = word_tokenizers
        self._manifests = tuple(read_manifest(path, self._storage_options) for path in paths)
        self._lookups: list[_Lookup] | None = None

    def __getstate__(self):
        # The loaded hashes stay in the worker that loaded them; workers load their own in setup().
        return {**self.__dict__, "_lookups": None}

    def setup(self) -> None:
        key = ("decont", tuple(manifest.path for manifest in self._manifests))
        self._lookups = load_once(key, lambda: _load_lookups(self._manifests, self._storage_options))

    def filter(self, document: Document) -> Verdict:
        if self._lookups is None:
            self.setup()
        normalized = normalize_text(document.text)
        language = language_key(document.metadata)
        for lookup in self._lookups:
            split = word_splitter(lookup.word_splitter, language, word_tokenizers=self.word_tokenizers)
            ngrams = word_ngrams(split(normalized), lookup.n_grams)
            hashes = np.fromiter(map(hash_ngram, ngrams), dtype=np.uint64, count=len(ngrams))
            match = lookup.index.first_match(hashes)
            if match is not None:
                position, task = match
                metadata = {**document.metadata, "contaminated_ngram": ngrams[position], "contaminated_task": task}
                return Drop(f"contaminated_{task}", dataclasses.replace(document, metadata=metadata))
        return document
