"""MinHash signatures of texts: the permutations, the LSH band keys and the one-byte sketches.

A signature is ``num_buckets`` times ``hashes_per_bucket`` minima of affine
permutations (modulo a Mersenne prime) of a text's word n-gram shingle hashes
(:func:`~beamtrove.transforms.dedup.shingles.shingle_hashes` of its
:func:`~beamtrove.text.normalize_text`: its space-separated words; with a
``word_splitter``, the n-grams of the words that splitter finds in it, as
DataTrove's MinHash given a ``language`` splits its simplified text). The permutations come from numpy's
``RandomState`` with the configured seed, so every worker, rerun and dedup
index computes the same signatures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct

import numpy as np

from beamtrove.text import check_word_splitter, normalize_text, word_splitter
from beamtrove.transforms.dedup.shingles import shingle_hashes, word_shingle_hashes

__all__ = ["DIGEST_BYTES", "MinHashConfig", "MinHasher", "sketch_agreement"]

# A Mersenne prime: the permutations are affine maps modulo it, and x mod 2**61 - 1
# is computed with a shift, a mask and an add instead of a division.
_PRIME = np.uint64((1 << 61) - 1)
_SHIFT = np.uint64(61)
# Shingles permuted at once; bounds the temporary array to this many rows of hashes.
_CHUNK_ROWS = 4096
# Two one-byte sketches of unequal hashes match this often by chance.
_CHANCE_MATCH = 1 / 256
#: A band and a whole signature are keyed by a digest this long: unequal ones share it with probability 2**-128.
DIGEST_BYTES = 16


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    """MinHash LSH parameters; every worker and rerun must use the same ones.

    Attributes:
        n_grams: Words per shingle.
        num_buckets: Bands of the signature (LSH buckets).
        hashes_per_bucket: Hashes per band.
        seed: Seed of the hash permutations.
        threshold: Verify every LSH link: keep it only when the signatures
            agree on at least this fraction of their hashes. ``None`` links
            every pair that shares a band, as DataTrove does.
        word_splitter: What splits the normalized text into the words of
            the shingles: None for its space-separated words; ``language``
            (each document's language's words) or a language key
            (``"tha_Thai"``), see :data:`beamtrove.text.WORD_SPLITTERS`.
        word_tokenizers: The word tokenizer table a language splitter
            reads; the fetched one when None.
    """

    n_grams: int = 5
    num_buckets: int = 14
    hashes_per_bucket: int = 8
    seed: int = 1
    threshold: float | None = None
    word_splitter: str | None = None
    word_tokenizers: str | None = None

    def __post_init__(self):
        for name in ("n_grams", "num_buckets", "hashes_per_bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"MinHash {name} must be at least 1 (got {getattr(self, name)}).")
        if self.threshold is not None and not 0 < self.threshold <= 1:
            raise ValueError(f"MinHash threshold must be in (0, 1] (got {self.threshold}).")
        if self.num_buckets > 0xFFFF:
            raise ValueError(f"MinHash num_buckets must be at most 65535 (got {self.num_buckets}).")
        if self.word_splitter is not None:
            check_word_splitter(self.word_splitter, word_tokenizers=self.word_tokenizers)

    def match_probability(self, similarity: float) -> float:
        """The probability that two documents with this Jaccard similarity share a band."""
        return 1 - (1 - similarity**self.hashes_per_bucket) ** self.num_buckets


class MinHasher:
    """Computes MinHash signatures and LSH band keys of texts."""

    # 2**64 / golden ratio, odd (Fibonacci hashing); the sketch keeps the top byte of hash * this.
    _SKETCH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
    _SKETCH_SHIFT = np.uint64(56)

    def __init__(self, config: MinHashConfig):
        self.config = config
        hashes = config.num_buckets * config.hashes_per_bucket
        # RandomState's streams never change between numpy versions, so neither do the signatures.
        generator = np.random.RandomState(config.seed)
        self._multipliers = generator.randint(1, _PRIME, size=hashes, dtype=np.uint64)
        self._offsets = generator.randint(0, _PRIME, size=hashes, dtype=np.uint64)

    def signature(self, text: str, language: str | None = None) -> np.ndarray | None:
        """The ``(num_buckets, hashes_per_bucket)`` ``uint64`` signature, or None below ``n_grams`` words.

        Args:
            text: A document's text.
            language: Its language key, for the ``language`` word splitter.
        """
        shingles = self.shingles(text, language)
        if not len(shingles):
            return None
        minimum = np.full(len(self._multipliers), _PRIME, dtype=np.uint64)
        for start in range(0, len(shingles), _CHUNK_ROWS):
            permuted = np.multiply.outer(shingles[start : start + _CHUNK_ROWS], self._multipliers)
            permuted += self._offsets
            reduced = permuted & _PRIME
            permuted >>= _SHIFT
            reduced += permuted
            np.subtract(reduced, _PRIME, out=reduced, where=reduced >= _PRIME)
            np.minimum(minimum, reduced.min(axis=0), out=minimum)
        return minimum.reshape(self.config.num_buckets, self.config.hashes_per_bucket)

    def shingles(self, text: str, language: str | None = None) -> np.ndarray:
        """The hashes of the word n-grams of ``text`` normalized, in order (see :class:`MinHashConfig`)."""
        config = self.config
        normalized = normalize_text(text)
        if config.word_splitter is None:
            return shingle_hashes(normalized, config.n_grams)
        split = word_splitter(config.word_splitter, language, word_tokenizers=config.word_tokenizers)
        return word_shingle_hashes(split(normalized), config.n_grams)

    @staticmethod
    def band_keys(signature: np.ndarray, within: bytes = b"") -> list[bytes]:
        """One key per bucket: the bucket number then a 128-bit digest of its band's hashes.

        ``within`` names a group (a language) whose keys no other group's share: the digests are keyed with it
        (blake2b's key; the empty one is no key, the keys of every group-less run and index).
        """
        little_endian = signature.astype("<u8", copy=False)
        return [
            struct.pack("<H", bucket) + hashlib.blake2b(band.tobytes(), digest_size=DIGEST_BYTES, key=within).digest()
            for bucket, band in enumerate(little_endian)
        ]

    @staticmethod
    def digest(signature: np.ndarray, within: bytes = b"") -> bytes:
        """A 128-bit digest of the whole signature, keyed with ``within`` as :meth:`band_keys` are."""
        data = signature.astype("<u8", copy=False).tobytes()
        return hashlib.blake2b(data, digest_size=DIGEST_BYTES, key=within).digest()

    @staticmethod
    def sketch(signature: np.ndarray) -> bytes:
        """One byte of every hash, drawn from all its bits: enough to estimate the agreement of two signatures.

        Two bytes of unequal hashes still match by chance once in 256 times,
        which :func:`sketch_agreement` corrects for (b-bit minwise hashing,
        Li and König, 2010).
        """
        # Not the lowest byte: with a multiplier ending in k zero bits, the k low bits of a*x + b are b's for
        # every x and the reduction modulo the prime adds only 0 to 7, so for k >= 4 unequal hashes shared
        # their lowest byte 2**(k - 11) of the time (1 in 8 from k = 8), not 1/256. The top byte of a
        # product with an odd constant mixes every bit.
        return ((signature * MinHasher._SKETCH_MULTIPLIER) >> MinHasher._SKETCH_SHIFT).astype(np.uint8).tobytes()


def sketch_agreement(first: bytes, second: bytes) -> float:
    """The estimated fraction of equal hashes of two signatures, from their :meth:`MinHasher.sketch`."""
    equal = np.count_nonzero(np.frombuffer(first, np.uint8) == np.frombuffer(second, np.uint8)) / len(first)
    return max(0.0, (equal - _CHANCE_MATCH) / (1 - _CHANCE_MATCH))
