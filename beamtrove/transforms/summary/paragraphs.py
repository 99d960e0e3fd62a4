"""Paragraph-level statistics of a document, as DataTrove's ``ParagraphStats`` computes them."""

from __future__ import annotations

from collections.abc import Sequence

from beamtrove.document import Document
from beamtrove.text import find_duplicates
from beamtrove.transforms.summary.base import StatsBlock, length_ratios, ratio

__all__ = ["ParagraphStats"]


class ParagraphStats(StatsBlock):
    """``n_paragraphs``, ``avg_paragraph_length``, ``short_paragraph_ratio_<k>`` (paragraphs of at most k
    characters), ``long_paragraph_ratio_<k>`` (at least k), ``paragraph_duplicates`` and
    ``paragraph_char_duplicates``.

    Paragraphs are the non-blank parts of the text between ``\\n\\n``.

    Args:
        short_paragraph_chars: The ``k`` of each ``short_paragraph_ratio_<k>``.
        long_paragraph_chars: The ``k`` of each ``long_paragraph_ratio_<k>``.
    """

    name = "paragraph"

    def __init__(self, short_paragraph_chars: Sequence[int] = (100,), long_paragraph_chars: Sequence[int] = (1000,)):
        self.short_paragraph_chars = tuple(short_paragraph_chars)
        self.long_paragraph_chars = tuple(long_paragraph_chars)

    def extract(self, document: Document) -> dict[str, int | float]:
        paragraphs = [paragraph for paragraph in document.text.split("\n\n") if paragraph.strip()]
        count = len(paragraphs)
        lengths = [len(paragraph) for paragraph in paragraphs]
        repeats, repeated_chars = find_duplicates(paragraphs)
        return {
            "n_paragraphs": count,
            "avg_paragraph_length": ratio(sum(lengths), count),
            **length_ratios(
                lengths,
                "short_paragraph_ratio_",
                self.short_paragraph_chars,
                "long_paragraph_ratio_",
                self.long_paragraph_chars,
            ),
            "paragraph_duplicates": ratio(repeats, count),
            "paragraph_char_duplicates": ratio(repeated_chars, sum(lengths)),
        }
