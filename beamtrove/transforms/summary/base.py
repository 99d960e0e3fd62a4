"""What a summary statistics block is: a named set of per-document statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from beamtrove.document import Document

__all__ = ["StatsBlock", "length_ratios", "ratio"]


def ratio(part: float, whole: float) -> float:
    """``part / whole``, or 0.0 when there is nothing to divide by (an empty text), as DataTrove's blocks give."""
    return part / whole if whole else 0.0


def length_ratios(
    lengths: Sequence[int], short_name: str, shorts: Sequence[int], long_name: str, longs: Sequence[int]
) -> dict[str, float]:
    """The share of ``lengths`` at most ``k`` as ``<short_name><k>`` for each ``k`` of ``shorts``, at least ``k``
    as ``<long_name><k>`` for each of ``longs``."""
    count = len(lengths)
    return {
        **{f"{short_name}{k}": ratio(sum(length <= k for length in lengths), count) for k in shorts},
        **{f"{long_name}{k}": ratio(sum(length >= k for length in lengths), count) for k in longs},
    }


class StatsBlock:
    """Computes some of DataTrove's summary statistics of one document, under DataTrove's names.

    Blocks are pickled to workers; one that needs a model loads it in
    :meth:`setup`.
    """

    #: The block's name on the command line (``--summary_stats doc,word``).
    name: ClassVar[str]

    def setup(self) -> None:
        """Loads what the block needs on a worker. By default, nothing."""

    def extract(self, document: Document) -> dict[str, int | float]:
        """``{statistic name: value}`` for ``document``."""
        raise NotImplementedError
