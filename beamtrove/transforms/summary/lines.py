"""Line-level statistics of a document, as DataTrove's ``LineStats`` computes them."""

from __future__ import annotations

from collections.abc import Sequence

from beamtrove.document import Document
from beamtrove.text import find_duplicates
from beamtrove.transforms.filters.c4 import END_PUNCTUATION
from beamtrove.transforms.summary.base import StatsBlock, length_ratios, ratio

__all__ = ["LineStats"]

_BULLETS = "-*•"


def _is_bullet(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and stripped[0] in _BULLETS


class LineStats(StatsBlock):
    """``n_lines``, ``avg_line_length``, ``short_line_ratio_chars_<k>`` (lines of at most k characters),
    ``long_line_ratio_chars_<k>`` (at least k), ``lines_ending_with_terminal_mark_ratio`` (C4's end marks),
    ``bullet_point_lines_ratio``, ``line_duplicates`` and ``line_char_duplicates``.

    Lines are the text split at ``\\n`` (a document's ``lines`` metadata when
    it has one, as in DataTrove); ``n_lines`` counts empty lines even when
    ``ignore_empty_lines`` leaves them out of the ratios.

    Args:
        short_line_chars: The ``k`` of each ``short_line_ratio_chars_<k>``.
        long_line_chars: The ``k`` of each ``long_line_ratio_chars_<k>``.
        ignore_empty_lines: Leave blank lines out of every statistic but ``n_lines``.
    """

    name = "line"

    def __init__(
        self,
        short_line_chars: Sequence[int] = (10, 30),
        long_line_chars: Sequence[int] = (2000, 10000),
        ignore_empty_lines: bool = False,
    ):
        self.short_line_chars = tuple(short_line_chars)
        self.long_line_chars = tuple(long_line_chars)
        self.ignore_empty_lines = ignore_empty_lines

    def extract(self, document: Document) -> dict[str, int | float]:
        lines: list[str] = document.metadata.get("lines") or document.text.split("\n")
        n_lines = len(lines)
        if self.ignore_empty_lines:
            lines = [line for line in lines if line.strip()]
        count = len(lines)
        lengths = [len(line) for line in lines]
        repeats, repeated_chars = find_duplicates(lines)
        return {
            "n_lines": n_lines,
            "avg_line_length": ratio(sum(lengths), count),
            **length_ratios(
                lengths,
                "short_line_ratio_chars_",
                self.short_line_chars,
                "long_line_ratio_chars_",
                self.long_line_chars,
            ),
            "lines_ending_with_terminal_mark_ratio": ratio(
                sum(line.endswith(END_PUNCTUATION) for line in lines), count
            ),
            "bullet_point_lines_ratio": ratio(sum(map(_is_bullet, lines)), count),
            "line_duplicates": ratio(repeats, count),
            "line_char_duplicates": ratio(repeated_chars, sum(lengths)),
        }
