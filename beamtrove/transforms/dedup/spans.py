"""Token spans of a text and how they are cut out of it, keeping characters a kept token shares.

:class:`~beamtrove.transforms.dedup.substrings.SubstringDedup` finds repeated
runs of tokens; these helpers merge those runs into spans and remove the
spans' characters from the text using the tokenizer's character offsets.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["cut_bounds", "cut_token_spans", "cut_with_bounds", "merge_spans", "pack_bounds"]


def merge_spans(spans) -> list[tuple[int, int]]:
    """``[start, end)`` spans sorted, with overlapping or touching ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def cut_token_spans(text: str, offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> str:
    """``text`` without the characters of the token ``spans`` (merged, sorted ``[start, end)`` token indices).

    ``offsets`` are the encoding's ``(start, end)`` character offsets per
    token. A character shared by a removed token and a kept one (byte-level
    tokens split multi-byte characters) is kept.
    """
    return cut_with_bounds(text, cut_bounds(offsets), spans)


def cut_bounds(offsets: list[tuple[int, int]]) -> np.ndarray:
    """``(2, tokens)`` character offsets: where a cut from token ``t`` starts, where a cut through token ``t`` ends.

    A cut starts after the previous token and ends before the next one, so
    that a character shared with a kept token stays.
    """
    flat = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64, count=2 * len(offsets))
    starts, ends = flat[0::2], flat[1::2]
    bounds = np.empty((2, len(offsets)), dtype=np.int64)
    bounds[0, 0], bounds[1, -1] = starts[0], ends[-1]
    np.maximum(starts[1:], ends[:-1], out=bounds[0, 1:])
    np.minimum(ends[:-1], starts[1:], out=bounds[1, :-1])
    return bounds


def pack_bounds(bounds: np.ndarray) -> np.ndarray:
    """The cut bounds as differences in the smallest integer type: a byte per bound for most tokenizers."""
    steps = np.diff(bounds, axis=1, prepend=0)
    return steps.astype(np.result_type(np.min_scalar_type(steps.min()), np.min_scalar_type(steps.max())))


def cut_with_bounds(text: str, bounds: np.ndarray, spans: list[tuple[int, int]]) -> str:
    """``text`` without the token ``spans``, cut at the :func:`cut_bounds` ``bounds`` of its tokens."""
    pieces, position = [], 0
    for first, after in spans:
        start, end = int(bounds[0, first]), int(bounds[1, after - 1])
        if start < end:
            pieces.append(text[position:start])
            position = end
    pieces.append(text[position:])
    return "".join(pieces)
