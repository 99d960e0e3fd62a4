"""FineWeb's own quality rules (Penedo et al. 2024, "The FineWeb Datasets")."""

from __future__ import annotations

import dataclasses

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.text import TERMINAL_PUNCTUATION, check_word_splitter, find_duplicates, word_splitter
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict

__all__ = ["FineWebQualityFilter"]


@dataclasses.dataclass
class FineWebQualityFilter(DocumentFilter):
    """Drops list-like, fragmentary and line-repetitive documents.

    Attributes:
        line_punct_thr: Minimum fraction of non-blank lines ending in terminal
            punctuation (``line_punct_ratio``).
        line_punct_exclude_zero: Keep documents where no line ends so.
        stop_chars: Characters that count as terminal punctuation; Unicode's
            sentence terminals by default.
        short_line_thr: Maximum fraction of lines at most ``short_line_length``
            characters long (``short_line_ratio``).
        short_line_length: Length in characters of a short line.
        char_duplicates_ratio: Maximum fraction of characters in lines that
            repeat an earlier line (``char_dup_ratio``).
        new_line_ratio: Maximum newlines per word (``list_ratio``).
        word_splitter: What splits the words ``list_ratio`` counts (see
            :data:`beamtrove.text.WORD_SPLITTERS`).
        word_tokenizers: The word tokenizer table ``language`` reads; the
            fetched one when None.

    Raises:
        ValueError: An unknown word splitter, or one whose package is not installed.
    """

    name = "fineweb_quality"

    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    stop_chars: tuple[str, ...] = TERMINAL_PUNCTUATION
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    word_splitter: str = "beamtrove"
    word_tokenizers: str | None = None

    def __post_init__(self):
        check_word_splitter(self.word_splitter, word_tokenizers=self.word_tokenizers)

    def filter(self, document: Document) -> Verdict:
        text = document.text
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return Drop("empty")
        ratio = sum(line.endswith(self.stop_chars) for line in lines) / len(lines)
        if ratio < self.line_punct_thr and not (ratio == 0 and self.line_punct_exclude_zero):
            return Drop("line_punct_ratio")
        if sum(len(line) <= self.short_line_length for line in lines) / len(lines) > self.short_line_thr:
            return Drop("short_line_ratio")
        if find_duplicates(lines)[1] / (len(text) - text.count("\n")) > self.char_duplicates_ratio:
            return Drop("char_dup_ratio")
        split = word_splitter(self.word_splitter, language_key(document.metadata), word_tokenizers=self.word_tokenizers)
        words = split(text)
        if not words or text.count("\n") / len(words) > self.new_line_ratio:
            return Drop("list_ratio")
        return document
