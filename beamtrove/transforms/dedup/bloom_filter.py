"""The Bloom filter of :class:`~beamtrove.transforms.dedup.bloom.BloomDedup`: its size, its shingles and its bits.

:class:`BloomDedupConfig` sizes the filter from the false-positive rate and
the expected distinct shingles; :class:`SharedBits` is the filter itself,
per-bit counters saturating at two documents, built by merging per-bundle
filters; :func:`in_two_documents` tells the shingles whose every bit is set
in its "two or more" array, the only ones worth shuffling.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from beamtrove.text import check_word_splitter, normalize_text, spaced_words, word_splitter
from beamtrove.transforms.dedup.shingles import shingle_hashes, word_shingle_hashes

__all__ = ["POPCOUNT", "BloomDedupConfig", "SharedBits", "bloom_shingles", "in_two_documents"]

# 8 GiB per bit array: a larger filter means a wrong fpr or expected_shingles rather than a real need.
_MAX_BITS = 1 << 36
# Enough slices of the key space to keep 2 workers busy, each holding a few tens of MB of shingles.
_MIN_PARTITIONS = 16
_SHINGLES_PER_PARTITION = 1 << 21
#: Set bits of every byte value (np.bitwise_count needs numpy 2).
POPCOUNT = np.array([bin(value).count("1") for value in range(256)], dtype=np.uint8)


@dataclasses.dataclass(frozen=True)
class BloomDedupConfig:
    """What counts as a duplicate, and how large the filter that narrows the search is.

    Attributes:
        n_grams: Words per shingle (DataTrove: 13).
        threshold: Remove a document when more than this fraction of its
            shingle occurrences are repeats (DataTrove: 0.8).
        fpr: The filter's target false-positive rate, in (0, 1); ``None``
            or 0 to shuffle every shingle instead. The kept set does not
            depend on it.
        expected_shingles: Distinct shingles expected in the whole input (about
            its word count): sizes the filter for ``fpr`` and sets ``k``.
        filter_bytes: A filter size in bytes, instead of the size derived from
            ``fpr``; ``k`` is still the best for ``expected_shingles``.
        word_splitter: What splits the normalized text into words, see
            :data:`beamtrove.text.WORD_SPLITTERS` (``"spacy"``: DataTrove's words;
            ``"language"``: each document's language's).
        word_tokenizers: The word tokenizer table ``language`` reads; the
            fetched one when None.
        partitions: Slices of the shingle key space, each searched for repeats
            by one worker at a time; ``None``: one per 2**21 expected shingles,
            at least 16. The result does not depend on it.
    """

    n_grams: int = 13
    threshold: float = 0.8
    fpr: float | None = 0.01
    expected_shingles: int = 10_000_000
    filter_bytes: int | None = None
    word_splitter: str = "beamtrove"
    partitions: int | None = None
    word_tokenizers: str | None = None

    def __post_init__(self):
        if isinstance(self.n_grams, bool) or not isinstance(self.n_grams, int) or self.n_grams < 1:
            raise ValueError(f"Bloom dedup n_grams must be a whole number of words, at least 1 (got {self.n_grams!r}).")
        if not 0 <= self.threshold <= 1:
            raise ValueError(
                f"Bloom dedup threshold is a fraction of shingle occurrences, in [0, 1] (got {self.threshold})."
            )
        if self.fpr is not None and not 0 <= self.fpr < 1:
            raise ValueError(
                f"Bloom dedup fpr must be in (0, 1), or None or 0 to shuffle every shingle (got {self.fpr})."
            )
        if self.expected_shingles < 1:
            raise ValueError(f"Bloom dedup expected_shingles must be at least 1 (got {self.expected_shingles}).")
        if self.filter_bytes is not None and self.filter_bytes < 1:
            raise ValueError(f"Bloom dedup filter_bytes must be at least 1, or None (got {self.filter_bytes}).")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"Bloom dedup partitions must be at least 1, or None (got {self.partitions}).")
        if self.bits is not None and self.bits > _MAX_BITS:
            raise ValueError(
                f"A Bloom filter of {self.bits} bits is larger than the {_MAX_BITS} allowed: "
                "raise fpr, or lower expected_shingles or filter_bytes."
            )
        check_word_splitter(self.word_splitter, word_tokenizers=self.word_tokenizers)

    @property
    def exact(self) -> bool:
        """Whether every shingle is shuffled (no filter)."""
        return not self.fpr

    @property
    def bits(self) -> int | None:
        """The filter's size in bits ``m``, or None without a filter."""
        if self.exact:
            return None
        if self.filter_bytes is not None:
            return 8 * self.filter_bytes
        return max(8, math.ceil(-self.expected_shingles * math.log(self.fpr) / math.log(2) ** 2))

    @property
    def shingle_partitions(self) -> int:
        """How many slices of the shingle key space are searched for repeats."""
        if self.partitions is not None:
            return self.partitions
        return max(_MIN_PARTITIONS, math.ceil(self.expected_shingles / _SHINGLES_PER_PARTITION))

    @property
    def hashes(self) -> int | None:
        """The number of hash functions ``k``, or None without a filter."""
        if self.exact:
            return None
        return max(1, round(self.bits / self.expected_shingles * math.log(2)))

    @property
    def expected_fpr(self) -> float | None:
        """The false-positive rate of the filter once ``expected_shingles`` are in, or None without a filter."""
        if self.exact:
            return None
        return (1 - math.exp(-self.hashes * self.expected_shingles / self.bits)) ** self.hashes


def bloom_shingles(
    text: str,
    n_grams: int = 13,
    word_splitter_name: str = "beamtrove",
    language: str | None = None,
    word_tokenizers: str | None = None,
) -> np.ndarray:
    """The 64-bit hashes of every word n-gram of ``text`` in order, repeats included, as :class:`BloomDedup` sees them.

    Args:
        text: A document's text.
        n_grams: Words per shingle.
        word_splitter_name: One of :data:`beamtrove.text.WORD_SPLITTERS`, or a language key.
        language: The document's language key, for ``language``.
        word_tokenizers: The word tokenizer table ``language`` reads; the fetched one when None.

    Returns:
        A ``uint64`` array, empty when the text has fewer than ``n_grams`` words.
    """
    normalized = normalize_text(text)
    if word_splitter_name == "beamtrove":
        # Its words never hold a space: the n-grams of the words are those of the words spaced.
        return shingle_hashes(spaced_words(normalized), n_grams)
    words = word_splitter(word_splitter_name, language, word_tokenizers=word_tokenizers)(normalized)
    if len(words) == normalized.count(" ") + 1 and " ".join(words) == normalized:
        # The words are the text's space-separated runs, as most normalized texts' are: hashed from its bytes.
        return shingle_hashes(normalized, n_grams)
    return word_shingle_hashes(words, n_grams)


def _bit_indexes(hashes: np.ndarray, bits: int, k: int) -> np.ndarray:
    """The ``(len(hashes), k)`` bit positions of each shingle hash."""
    step = (hashes >> np.uint64(32)) | (hashes << np.uint64(32))
    with np.errstate(over="ignore"):
        positions = hashes[:, None] + np.arange(k, dtype=np.uint64)[None, :] * step[:, None]
    return positions % np.uint64(bits)


class SharedBits:
    """Per-bit counters of the documents whose shingles hit the bit, saturating at 2, as two packed bit arrays."""

    def __init__(self, bits: int, k: int):
        self.bits = bits
        self.k = k
        self.once = np.zeros((bits + 7) // 8, dtype=np.uint8)
        self.twice = np.zeros_like(self.once)

    def add(self, hashes: np.ndarray) -> None:
        """Counts one document, given its distinct shingle hashes."""
        positions = _bit_indexes(hashes, self.bits, self.k).ravel()
        positions.sort()
        cells = positions >> np.uint64(3)
        masks = np.left_shift(1, positions & np.uint64(7)).astype(np.uint8)
        # One mask per byte the document hits, so that plain assignment sets them: np.bitwise_or.at, which takes
        # repeated bytes one at a time, is slower. A bit the document hits twice still counts it once.
        starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
        cells, masks = cells[starts], np.bitwise_or.reduceat(masks, starts)
        before = self.once[cells]
        self.twice[cells] |= before & masks
        self.once[cells] = before | masks

    def merge(self, once: np.ndarray, twice: np.ndarray) -> None:
        """Counts the documents of another filter of the same size, given as its :attr:`once` and :attr:`twice`."""
        self.twice |= twice | (self.once & once)
        self.once |= once


def in_two_documents(twice: np.ndarray, hashes: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Which shingles have all their bits set in the "two documents or more" array: a boolean mask."""
    positions = _bit_indexes(hashes, bits, k)
    return ((twice[positions >> np.uint64(3)] >> (positions & np.uint64(7)).astype(np.uint8)) & 1).all(axis=1)
