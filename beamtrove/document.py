"""The record every beamtrove step consumes and produces.

A :class:`Document` is one piece of text with a stable id and free-form
metadata (URL, dump, language, scores, ...), and the :class:`Origin` it was
read from: its identity inside a step, since users' ids can repeat across
(and within) inputs. :func:`check_storable` tells whether
:class:`beamtrove.coders.DocumentCoder` and every writer can store a document;
readers check each document they make from a row with it. This module imports
no Beam, so commands that run no pipeline start without it.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import Any, NamedTuple

import orjson

__all__ = ["MAX_NESTING", "Document", "Media", "Origin", "UnstorableDocument", "check_storable", "document_row"]


@dataclasses.dataclass(slots=True)
class Media:
    """A non-text item attached to a document (an image, a video, ...).

    The fields carry the names DataTrove's files use, so media written by
    either tool reads back in the other.

    Attributes:
        id: Identifier of the item.
        type: Kind of media (DataTrove numbers them: 0 image, 1 video, 2 audio,
            3 document).
        url: Where the media lives.
        alt: Alternative text, when the page gave one.
        path: Where a local copy is stored.
        offset: Byte offset of the item inside ``path``.
        length: Length in bytes of the item.
        media_bytes: The item's content, when kept inline.
        metadata: Free-form JSON-compatible attributes.
    """

    id: str
    type: int | str
    url: str
    alt: str | None = None
    path: str | None = None
    offset: int | None = None
    length: int | None = None
    media_bytes: bytes | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_row(self, binary: bool = False) -> dict[str, Any]:
        """The item as a dict; ``media_bytes`` become base64 text unless ``binary``."""
        row = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        if self.media_bytes is not None and not binary:
            row["media_bytes"] = base64.b64encode(self.media_bytes).decode("ascii")
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Media:
        """Rebuilds an item from :meth:`to_row` output (or DataTrove's layout)."""
        media_bytes = row.get("media_bytes")
        if isinstance(media_bytes, str):
            row = {**row, "media_bytes": base64.b64decode(media_bytes)}
        return cls(**row)


class Origin(NamedTuple):
    """Where a document was read: no two records of one run's input share one.

    Attributes:
        file: The URL of the input file (``InputFile.url``).
        record: The record's place in that file: the 0-based line or row
            index of table formats, the byte offset of a WARC record. A read
            of a byte range gives the same values as a read of the whole file.
    """

    file: str
    record: int


@dataclasses.dataclass(slots=True)
class Document:
    """A text document flowing through a beamtrove pipeline.

    Attributes:
        text: The document's text (raw HTML before extraction).
        id: A stable identifier: the same input always yields the same id, so
            dedup and resumed runs can rely on it.
        media: Media items that belong to the document.
        metadata: JSON-compatible attributes such as ``url`` or ``language``.
        origin: Where a reader read it; ``None`` for a document made in code.
            Steps that compare documents tell them apart by it, never by
            ``id``. Writers do not store it, and equality ignores it: two
            documents are equal when what they hold is.
    """

    text: str
    id: str
    media: list[Media] = dataclasses.field(default_factory=list)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    origin: Origin | None = dataclasses.field(default=None, compare=False)


def document_row(document: Document, binary_media: bool = False) -> dict[str, Any]:
    """A document laid out as DataTrove's writers lay it out.

    ``text``, ``id``, then ``media`` and ``metadata`` only when non-empty.
    """
    row: dict[str, Any] = {"text": document.text, "id": document.id}
    if document.media:
        row["media"] = [item.to_row(binary_media) for item in document.media]
    if document.metadata:
        row["metadata"] = document.metadata
    return row


# Sorted keys make equal documents encode to equal bytes, whatever the order in which their metadata was filled
# in; what check_storable tries is what the coder does.
CODED_JSON_OPTIONS = orjson.OPT_SORT_KEYS


#: How many levels of dicts and lists a document's metadata (or media) may nest. orjson encodes at most 254
#: levels and Parquet files read back at most about 120, and the writers nest metadata one to three levels
#: below their rows: 100 leaves room for both.
MAX_NESTING = 100

# UTF-8 has no encoding for a surrogate code point on its own, so no writer can store one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class UnstorableDocument(ValueError):
    """A document that the coder or a writer could not store.

    Attributes:
        reason: A short, stable reason naming an ``errors.<reason>`` counter.
        message: What is wrong, for a human.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def check_storable(document: Document) -> None:
    """Checks that :class:`DocumentCoder` and every writer can store ``document``.

    Readers check each document they make from a row, so that no later step,
    coder or writer meets one that would end the run.

    Raises:
        UnstorableDocument: The text or id holds a lone surrogate
            (``lone_surrogate``), metadata or media nest deeper than
            :data:`MAX_NESTING` (``nested_too_deep``), hold values JSON cannot
            store (``not_json``), or media bytes are not bytes
            (``malformed_media``).
    """
    _check_utf8("text", document.text)
    _check_utf8("id", document.id)
    _check_json("metadata", document.metadata)
    _check_json("media", _media_rows(document.media))


def _check_utf8(field: str, text: str) -> None:
    lone = None if text.isascii() else _LONE_SURROGATE.search(text)
    if lone is not None:
        raise UnstorableDocument(
            "lone_surrogate",
            f"{field} holds the lone surrogate U+{ord(lone.group()):04X} at character {lone.start()}, "
            "which UTF-8 cannot encode",
        )


def _media_rows(media: list[Media]) -> list[dict[str, Any]]:
    try:
        return [item.to_row() for item in media]
    except TypeError as exc:  # media_bytes that base64 cannot encode
        raise UnstorableDocument("malformed_media", f"media cannot be encoded: {exc}") from None


def _check_json(field: str, value: Any) -> None:
    depth = _nesting(value)
    if depth > MAX_NESTING:
        raise UnstorableDocument(
            "nested_too_deep",
            f"{field} nests {depth} levels of dicts and lists; beamtrove stores at most {MAX_NESTING}",
        )
    try:
        orjson.dumps(value, option=CODED_JSON_OPTIONS)
    except TypeError as exc:
        raise UnstorableDocument(
            "not_json", f"{field}{_unencodable_entry(value)} cannot be stored as JSON: {exc}"
        ) from None


def _nesting(value: Any) -> int:
    """How many levels of dicts and lists ``value`` nests (0 for a scalar).

    Iterative, so that no depth can exhaust Python's stack.
    """
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in children)
    return deepest


def _unencodable_entry(value: dict | list) -> str:
    """The first top-level entry of ``value`` that JSON cannot store, as ``['key']``; empty if it is a key."""
    entries = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in entries:
        try:
            orjson.dumps(item, option=CODED_JSON_OPTIONS)
        except TypeError:
            return f"[{key!r}]"
    return ""
