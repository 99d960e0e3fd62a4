"""Removal of lines made only of symbols (separators such as "-----", "|", "* * *")."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from beamtrove.document import Document
from beamtrove.text import TERMINAL_PUNCTUATION
from beamtrove.transforms.filters.base import DocumentFormatter
from beamtrove.transforms.summary.doc import PUNCTUATION

__all__ = ["SYMBOLS", "SymbolLinesFormatter"]

# DataTrove's hand-made list of sentence terminals is Unicode's Sentence_Terminal property less these characters
# (mostly recent additions to it), plus three Khmer signs.
_TERMINALS_NOT_IN_DATATROVE = frozenset(
    "\u1b4e\u1b4f\u1b7f\u2024\u2cf9\u2cfa\u2cfb\u2e60\u2e61\ufe12\ufe15\ufe16\U000113d4\U000113d5\U00016d6e\U00016d6f"
)
_KHMER_TERMINALS = frozenset("\u17d6\u17d9\u17da")

#: The characters a symbol line is made of, DataTrove's: its punctuation (ASCII, CJK, control characters) and
#: its sentence terminals.
SYMBOLS = PUNCTUATION | (frozenset(TERMINAL_PUNCTUATION) - _TERMINALS_NOT_IN_DATATROVE) | _KHMER_TERMINALS


class SymbolLinesFormatter(DocumentFormatter):
    """Removes the lines made only of symbols (and spaces), as DataTrove's ``SymbolLinesFormatter``.

    A run of such lines is replaced by ``replace_char`` once (by nothing by
    default; ``"\\n"`` leaves a blank line in its place). Blank lines are kept.
    As in DataTrove, the text is split at every line boundary ``str.splitlines``
    knows (``\\r\\n``, ``\\r``, ``\\x0c``, ``\\u2028``...) and joined with
    ``\\n``, so line ends are normalized and a final line end is dropped even
    where no line is removed.

    Args:
        symbols: The characters that make a symbol line; DataTrove's
            :data:`SYMBOLS` by default.
        replace_char: What replaces each run of symbol lines.
    """

    name = "symbol_lines"

    def __init__(self, symbols: Iterable[str] | None = None, replace_char: str = ""):
        self.symbols = SYMBOLS if symbols is None else frozenset(symbols)
        self.replace_char = replace_char

    def _is_symbol_line(self, line: str) -> bool:
        return line.strip() != "" and all(char == " " or char in self.symbols for char in line)

    def format(self, document: Document) -> Document:
        lines = []
        in_symbol_run = False
        for line in document.text.splitlines():
            if not self._is_symbol_line(line):
                lines.append(line)
                in_symbol_run = False
            elif not in_symbol_run:
                if self.replace_char:
                    lines.append(self.replace_char)
                in_symbol_run = True
        text = "\n".join(lines)
        return document if text == document.text else dataclasses.replace(document, text=text)
