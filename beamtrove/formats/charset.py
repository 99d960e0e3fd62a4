"""Decoding crawled payloads to text.

Servers often declare the wrong charset, and pages often declare none. The
order of attempts favours evidence over declarations: a byte-order mark, then
strict UTF-8 (random legacy-encoded text is almost never valid UTF-8, so a
successful decode is strong evidence), then the HTTP header's charset, then a
``<meta>`` charset, then statistical detection. Every attempt is strict: a
payload no candidate decodes is reported as undecodable rather than turned
into replacement characters.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

__all__ = ["decode_payload"]

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_META_CHARSET = re.compile(rb"<meta[^>]{0,300}?charset\s*=\s*[\"']?\s*([a-z0-9_:.+-]+)", re.IGNORECASE)
_META_SCAN_BYTES = 4096
# Pages labelled with a legacy charset are, in practice, written in its
# superset (browsers decode them the same way).
_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
}


# Labels pages use that Python's codec registry does not know.
_LABELS = {"x-sjis": "cp932", "windows-874": "cp874", "x-euc-jp": "euc_jp", "x-mac-roman": "mac_roman"}


def _codec_name(label: str | bytes | None) -> str | None:
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    label = label.strip().strip("\"'").lower()
    try:
        name = codecs.lookup(_LABELS.get(label, label)).name
    except LookupError:
        return None
    return _SUPERSETS.get(name, name)


def _try(payload: bytes, codec: str | None) -> str | None:
    if codec is None:
        return None
    try:
        return payload.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def decode_payload(payload: bytes, declared_charset: str | None = None) -> tuple[str, str] | None:
    """Decodes a crawled payload.

    Args:
        payload: The raw body.
        declared_charset: The ``charset`` parameter of the HTTP Content-Type.

    Returns:
        ``(text, codec name)``, or None when no candidate decodes the payload.
    """
    for bom, codec in _BOMS:
        if payload.startswith(bom):
            text = _try(payload, codec)
            if text is not None:
                return text, codec
    candidates = ["utf-8", _codec_name(declared_charset)]
    meta = _META_CHARSET.search(payload, 0, _META_SCAN_BYTES)
    if meta:
        candidates.append(_codec_name(meta.group(1)))
    for codec in dict.fromkeys(candidates):
        text = _try(payload, codec)
        if text is not None:
            return text, codec
    guess = charset_normalizer.from_bytes(payload).best()
    codec = _codec_name(guess.encoding) if guess else None
    text = _try(payload, codec)
    return (text, codec) if text is not None else None
