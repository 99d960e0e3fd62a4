"""Beam's byte form of beamtrove's records.

:class:`DocumentCoder` is registered with Beam's coder registry, so any
``PCollection`` typed as :class:`~beamtrove.document.Document` crosses
shuffles in a compact, deterministic byte form instead of pickles. Every
transform module imports this one through :mod:`beamtrove.transforms`, so a
pipeline built from them always finds the coder registered.
"""

from __future__ import annotations

import struct

import orjson
from apache_beam import coders

from beamtrove.document import CODED_JSON_OPTIONS, Document, Media, Origin

__all__ = ["DocumentCoder"]

# id, text, metadata, media and origin file lengths and the origin record, then the five byte strings.
_HEADER = struct.Struct("<IIIIIq")
# The origin file length of a document without an origin.
_NO_ORIGIN = 0xFFFFFFFF


def _media_to_json(media: list[Media]) -> bytes:
    if not media:
        return b""
    return orjson.dumps([item.to_row() for item in media], option=CODED_JSON_OPTIONS)


def _media_from_json(encoded: bytes) -> list[Media]:
    if not encoded:
        return []
    return [Media.from_row(item) for item in orjson.loads(encoded)]


class DocumentCoder(coders.Coder):
    """Deterministic binary coder for :class:`Document`.

    Text, id and origin are stored as UTF-8 (lone surrogates survive),
    metadata and media as JSON with sorted keys. Metadata must therefore be
    JSON-compatible: string keys; str, int, float, bool, None, lists and dicts
    as values.
    """

    def encode(self, value: Document) -> bytes:
        id_bytes = value.id.encode("utf-8", "surrogatepass")
        text_bytes = value.text.encode("utf-8", "surrogatepass")
        try:
            metadata_bytes = orjson.dumps(value.metadata, option=CODED_JSON_OPTIONS)
        except TypeError as exc:
            raise TypeError(
                f"Document {value.id!r} has metadata that is not JSON-compatible ({exc}); "
                "store strings, numbers, booleans, None, lists or dicts with string keys."
            ) from exc
        media_bytes = _media_to_json(value.media)
        origin = value.origin
        origin_bytes = b"" if origin is None else origin.file.encode("utf-8", "surrogatepass")
        header = _HEADER.pack(
            len(id_bytes),
            len(text_bytes),
            len(metadata_bytes),
            len(media_bytes),
            _NO_ORIGIN if origin is None else len(origin_bytes),
            0 if origin is None else origin.record,
        )
        return b"".join((header, id_bytes, text_bytes, metadata_bytes, media_bytes, origin_bytes))

    def decode(self, encoded: bytes) -> Document:
        id_len, text_len, metadata_len, media_len, origin_len, record = _HEADER.unpack_from(encoded)
        view = memoryview(encoded)
        start = _HEADER.size
        id_end = start + id_len
        text_end = id_end + text_len
        metadata_end = text_end + metadata_len
        media_end = metadata_end + media_len
        origin = None
        if origin_len != _NO_ORIGIN:
            origin = Origin(str(view[media_end : media_end + origin_len], "utf-8", "surrogatepass"), record)
        return Document(
            text=str(view[id_end:text_end], "utf-8", "surrogatepass"),
            id=str(view[start:id_end], "utf-8", "surrogatepass"),
            metadata=orjson.loads(view[text_end:metadata_end]),
            media=_media_from_json(bytes(view[metadata_end:media_end])),
            origin=origin,
        )

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return Document


coders.registry.register_coder(Document, DocumentCoder)
