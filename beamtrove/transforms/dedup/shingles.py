"""Word n-gram shingles for near-duplicate detection.

Two pages that differ in case, punctuation, spacing, accents or the digits of
a date are the same text to a reader, so they are compared after
:func:`~beamtrove.text.normalize_text` folds those differences away. A
shingle is the 64-bit hash of n consecutive words of the normalized text; the
hashes are computed for all n-grams at once with numpy (a polynomial hash
over the UTF-8 bytes, taken from prefix sums, then mixed), so the cost per
document is a handful of array operations rather than a Python call per
n-gram. The same text gives the same shingles on every worker, runner and
Python process. :func:`powers` and :func:`mix64` are the building blocks of
such hashes, shared with the token-window hashes of
:mod:`~beamtrove.transforms.dedup.substrings`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

from beamtrove.transforms.dedup.exact import key_digest

__all__ = ["RecentTexts", "mix64", "powers", "shingle_hashes", "word_shingle_hashes"]

Result = TypeVar("Result")

# Odd, so that its powers are invertible modulo 2**64.
_BASE = np.uint64(0x9E3779B97F4A7C15)
_INVERSE_BASE = np.uint64(pow(int(_BASE), -1, 1 << 64))
_SPACE = ord(" ")
# Powers kept per process: enough for sequences up to 1 MiB of UTF-8 or 1 Mi tokens.
_CACHED_POWERS = 1 << 20


class _Powers:
    """``base**i`` and ``base**-i`` modulo 2**64 for i < length, grown on demand.

    Both arrays are swapped in as one tuple, so DoFn threads sharing the cache never see them out of step.
    """

    def __init__(self):
        self._arrays = (np.ones(1, dtype=np.uint64), np.ones(1, dtype=np.uint64))

    def upto(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        if length > _CACHED_POWERS:
            # A rare huge document gets its own powers rather than growing the cache for good.
            return _geometric(_BASE, length), _geometric(_INVERSE_BASE, length)
        forward, inverse = self._arrays
        if length > len(forward):
            size = min(max(length, 2 * len(forward)), _CACHED_POWERS)
            forward, inverse = self._arrays = (_geometric(_BASE, size), _geometric(_INVERSE_BASE, size))
        return forward[:length], inverse[:length]


def _geometric(ratio: np.uint64, size: int) -> np.ndarray:
    powers = np.empty(size, dtype=np.uint64)
    powers[0] = 1
    # Doubling: each step multiplies the filled prefix by ratio**filled.
    filled, step = 1, ratio
    with np.errstate(over="ignore"):
        while filled < size:
            take = min(filled, size - filled)
            powers[filled : filled + take] = powers[:take] * step
            step = step * step
            filled += take
    return powers


_POWERS = _Powers()


def powers(length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(base**i, base**-i)`` modulo 2**64 for ``i < length``, as ``uint64`` arrays shared per process: not to write.

    A polynomial hash of ``values`` over ``[s, e)`` is ``(prefix[e] - prefix[s]) * base**-s`` with
    ``prefix[i]`` the sum of ``values[j] * base**j`` for ``j < i``: equal runs hash alike wherever they are.
    """
    return _POWERS.upto(length)


def mix64(values: np.ndarray) -> np.ndarray:
    """A bijective 64-bit finalizer (splitmix64's), so that similar inputs get unrelated hashes.

    Args:
        values: A ``uint64`` array, left as it is.

    Returns:
        A new ``uint64`` array of the mixed values.
    """
    values = values ^ (values >> np.uint64(30))
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def shingle_hashes(normalized: str, n_grams: int) -> np.ndarray:
    """The 64-bit hashes of every run of ``n_grams`` consecutive words of a normalized text, in order.

    Args:
        normalized: Output of :func:`~beamtrove.text.normalize_text` (words separated by single spaces).
        n_grams: Words per shingle.

    Returns:
        A ``uint64`` array with one hash per n-gram; empty when the text has fewer than ``n_grams`` words.
    """
    data = np.frombuffer(normalized.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if not len(data):
        return np.empty(0, dtype=np.uint64)
    spaces = np.flatnonzero(data == _SPACE)
    if len(spaces) + 1 < n_grams:
        return np.empty(0, dtype=np.uint64)
    starts = np.concatenate(([0], spaces + 1))
    ends = np.concatenate((spaces, [len(data)]))
    return _ngram_hashes(data, starts, ends, n_grams)


def word_shingle_hashes(words: Sequence[str], n_grams: int) -> np.ndarray:
    """The 64-bit hashes of every run of ``n_grams`` consecutive ``words``, in order.

    An n-gram hashes as its words joined by single spaces, so words without spaces hash as in
    :func:`shingle_hashes` of the text they are the words of (``shingle_hashes(text, n)`` equals
    ``word_shingle_hashes(text.split(" "), n)``), and a word with spaces inside (pyvi's Vietnamese ``sinh viên``)
    stays one word.

    Args:
        words: The words, none empty.
        n_grams: Words per shingle.

    Returns:
        A ``uint64`` array with one hash per n-gram; empty when there are fewer than ``n_grams`` words.
    """
    if len(words) < n_grams:
        return np.empty(0, dtype=np.uint64)
    encoded = [word.encode("utf-8", "surrogatepass") for word in words]
    data = np.frombuffer(b" ".join(encoded), dtype=np.uint8)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    # Each word starts one byte (the space) after the previous one ends.
    ends = np.cumsum(lengths + 1) - 1
    starts = ends - lengths
    return _ngram_hashes(data, starts, ends, n_grams)


def _ngram_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, n_grams: int) -> np.ndarray:
    """The hashes of the bytes of ``data`` from each word's start to the end of the word ``n_grams - 1`` later."""
    first, last = starts[: len(starts) - n_grams + 1], ends[n_grams - 1 :]
    forward, inverse = powers(len(data))
    # prefix[i] = sum of (byte + 1) * base**j for j < i: the hash of bytes [s, e) is
    # (prefix[e] - prefix[s]) * base**-s, whatever the position of the n-gram.
    prefix = np.zeros(len(data) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        np.cumsum((data.astype(np.uint64) + np.uint64(1)) * forward, out=prefix[1:])
        hashes = (prefix[last] - prefix[first]) * inverse[first]
        hashes ^= (last - first).astype(np.uint64)
        return mix64(hashes)


class RecentTexts(Generic[Result]):
    """What a function computed from recent texts, so that a copy of one of them met again costs a look-up.

    Crawls repeat whole texts (mirrors, syndicated articles, template pages): a worker that meets a text it
    shingled a moment ago takes the result back rather than normalizing and hashing the text again. Only the
    time changes: the result is the function's for that text, whatever the order, the worker or the size.
    Texts are known by a 128-bit digest of their UTF-8 bytes, not kept; the results kept are bounded in
    bytes, the least recently used dropped first.

    Args:
        compute: ``compute(text, language)``, a pure function of its arguments.
        size_of: The bytes a result holds.
        max_bytes: The most the results kept may hold together.
    """

    def __init__(self, compute: Callable[[str, str | None], Result], size_of: Callable[[Result], int], max_bytes: int):
        self._compute = compute
        self._size_of = size_of
        self._max_bytes = max_bytes
        self._kept: dict[tuple[bytes, str | None], tuple[Result, int]] = {}
        self._bytes = 0

    def __call__(self, text: str, language: str | None = None) -> Result:
        key = (key_digest(text), language)
        found = self._kept.pop(key, None)
        if found is not None:
            # Put back last: a dict keeps its keys in the order they went in, the least recently used first.
            self._kept[key] = found
            return found[0]
        result = self._compute(text, language)
        size = self._size_of(result)
        if size > self._max_bytes:
            return result
        self._bytes += size
        while self._bytes > self._max_bytes:
            self._bytes -= self._kept.pop(next(iter(self._kept)))[1]
        self._kept[key] = (result, size)
        return result
