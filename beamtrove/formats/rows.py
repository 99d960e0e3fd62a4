"""Table rows (JSONL, CSV, Parquet, Arrow IPC) as documents: how their fields map, and what a bad row is."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, Media, Origin, UnstorableDocument, check_storable
from beamtrove.fs import InputFile

__all__ = ["RowError", "RowFields"]


class RowError(Exception):
    """A table row that cannot become a document.

    Attributes:
        reason: Names the step's ``errors.<reason>`` counter.
        message: What is wrong with the row.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message

    def dead_letter(self, step: str, file: InputFile, line: int, excerpt: str | None = None) -> DeadLetter:
        return DeadLetter(step, self.reason, self.message, file=file.url, line=line, excerpt=excerpt)


@dataclasses.dataclass(frozen=True)
class RowFields:
    """How the fields of a table row (JSONL, Parquet, CSV) map onto a Document.

    The text comes from ``text_key`` and the id from ``id_key`` (when absent:
    ``<file name>/<0-based row index>``). A ``metadata`` field holding a
    mapping (the layout beamtrove's and DataTrove's writers produce) and a
    ``media`` list are unpacked. Every other field lands in metadata too,
    taking precedence over the nested mapping, which takes precedence over
    ``default_metadata``. ``file_path`` is added unless the row has one or
    ``add_file_path`` is off.
    A document that the coder or a writer could not store (see
    :func:`~beamtrove.document.check_storable`) is refused with that reason,
    so one row can never end the run later.
    """

    text_key: str = "text"
    id_key: str = "id"
    default_metadata: Mapping[str, Any] | None = None
    add_file_path: bool = True

    def to_document(self, row: dict[str, Any], file: InputFile, index: int) -> Document:
        """Builds a Document from ``row`` (which it consumes), row ``index`` of ``file``.

        Raises:
            RowError: The row has no usable text, malformed media, or holds
                what the coder or a writer could not store.
        """
        text = row.pop(self.text_key, None)
        if text is None:
            raise RowError("missing_text", f"the row has no {self.text_key!r} field")
        if not isinstance(text, str):
            raise RowError("text_not_a_string", f"{self.text_key!r} holds a {type(text).__name__}")
        doc_id = row.pop(self.id_key, None)
        media = row.pop("media", None) if isinstance(row.get("media"), list) else None
        nested = row.pop("metadata") if isinstance(row.get("metadata"), dict) else {}
        metadata = {**(self.default_metadata or {}), **nested, **row}
        if self.add_file_path:
            metadata.setdefault("file_path", file.url)
        try:
            media_items = [Media.from_row(item) for item in media] if media else []
        except (TypeError, ValueError) as exc:  # unknown fields, or media_bytes that are not base64
            raise RowError("malformed_media", f"media entries do not fit the Media fields: {exc}") from exc
        document = Document(
            text=text,
            id=f"{file.name}/{index}" if doc_id is None else str(doc_id),
            metadata=metadata,
            media=media_items,
            origin=Origin(file.url, index),
        )
        try:
            check_storable(document)
        except UnstorableDocument as problem:
            raise RowError(problem.reason, problem.message) from None
        return document
