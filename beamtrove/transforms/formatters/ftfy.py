"""Repair of broken Unicode (mojibake, stray escapes and controls) with ftfy, with DataTrove's settings."""

from __future__ import annotations

import dataclasses
from typing import Literal

import ftfy

from beamtrove.document import Document
from beamtrove.transforms.filters.base import DocumentFormatter

__all__ = ["FTFYFormatter"]

_NORMALIZATIONS = ("NFC", "NFD", "NFKC", "NFKD")


class FTFYFormatter(DocumentFormatter):
    """Fixes text decoded with the wrong encoding, and other encoding damage, with ``ftfy.fix_text``.

    The defaults are DataTrove's: every fix that undoes an encoding accident
    is on (``"Ã©tÃ©"`` becomes ``"été"``), while the fixes that impose one way
    of writing are off (ftfy turns them on by default): ligatures, full-width
    characters, curly quotes and line breaks stay as written, and the text is
    not Unicode-normalized, so that a model still sees every form text takes.
    The arguments are ftfy's ``TextFixerConfig`` fields.

    Args:
        unescape_html: Decode HTML entities: ``"auto"`` unless the text looks
            like HTML (holds a ``<``).
        remove_terminal_escapes: Remove ANSI terminal escape sequences.
        fix_encoding: Undo mojibake (UTF-8 decoded as Latin-1 or Windows-1252...).
        restore_byte_a0: Take a space after mojibake as the byte A0 it was.
        replace_lossy_sequences: Replace mojibake that lost bytes by U+FFFD.
        decode_inconsistent_utf8: Fix UTF-8 mojibake inside otherwise correct text.
        fix_c1_controls: Replace C1 control characters by their Windows-1252 characters.
        fix_latin_ligatures: Split ligatures such as "ﬁ" into letters.
        fix_character_width: Replace full-width characters by their half-width forms.
        uncurl_quotes: Replace curly quotes by straight ones.
        fix_line_breaks: Turn every line break into ``\\n``.
        fix_surrogates: Join UTF-16 surrogate pairs and drop lone ones.
        remove_control_chars: Remove control characters that have no use in text.
        normalization: Unicode normalization form, or None for none.

    Raises:
        ValueError: An unknown ``normalization`` or ``unescape_html`` value.
    """

    name = "ftfy"

    def __init__(
        self,
        unescape_html: bool | Literal["auto"] = "auto",
        remove_terminal_escapes: bool = True,
        fix_encoding: bool = True,
        restore_byte_a0: bool = True,
        replace_lossy_sequences: bool = True,
        decode_inconsistent_utf8: bool = True,
        fix_c1_controls: bool = True,
        fix_latin_ligatures: bool = False,
        fix_character_width: bool = False,
        uncurl_quotes: bool = False,
        fix_line_breaks: bool = False,
        fix_surrogates: bool = True,
        remove_control_chars: bool = True,
        normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None,
    ):
        if normalization is not None and normalization not in _NORMALIZATIONS:
            raise ValueError(f"normalization is one of {', '.join(_NORMALIZATIONS)} or None, not {normalization!r}.")
        if unescape_html not in (True, False, "auto"):
            raise ValueError(f"unescape_html is True, False or 'auto', not {unescape_html!r}.")
        self.config = ftfy.TextFixerConfig(
            unescape_html=unescape_html,
            remove_terminal_escapes=remove_terminal_escapes,
            fix_encoding=fix_encoding,
            restore_byte_a0=restore_byte_a0,
            replace_lossy_sequences=replace_lossy_sequences,
            decode_inconsistent_utf8=decode_inconsistent_utf8,
            fix_c1_controls=fix_c1_controls,
            fix_latin_ligatures=fix_latin_ligatures,
            fix_character_width=fix_character_width,
            uncurl_quotes=uncurl_quotes,
            fix_line_breaks=fix_line_breaks,
            fix_surrogates=fix_surrogates,
            remove_control_chars=remove_control_chars,
            normalization=normalization,
        )

    def format(self, document: Document) -> Document:
        text = ftfy.fix_text(document.text, config=self.config)
        return document if text == document.text else dataclasses.replace(document, text=text)
