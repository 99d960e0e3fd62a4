"""Records that a step could not process, kept for inspection.

Bad input never crashes a beamtrove run and is never silently lost: a record
that cannot be read or processed becomes a :class:`DeadLetter` naming the step,
the reason and where the record came from, and pipelines write them to a
dead-letter output beside their results.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beamtrove.document import Document

__all__ = ["DeadLetter"]

_EXCERPT_CHARS = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record a step could not handle.

    Attributes:
        step: The pipeline step that gave up (its stats name).
        reason: A short, stable reason such as ``malformed_json``; the same
            string names the step's ``errors.<reason>`` counter.
        message: What went wrong, for a human.
        file: The input file the record came from, when known.
        offset: Byte offset of the record in ``file`` (compressed offset for
            gzipped WARC files), when meaningful.
        line: 1-based line (JSONL, CSV) or 0-based row (Parquet) number.
        record_id: Id of the document or record, when it had one.
        url: URL of the page, when known.
        excerpt: The start of the offending record, to help fix the input.
    """

    step: str
    reason: str
    message: str
    file: str | None = None
    offset: int | None = None
    line: int | None = None
    record_id: str | None = None
    url: str | None = None
    excerpt: str | None = None

    @staticmethod
    def excerpt_of(raw: bytes | str) -> str:
        """The first characters of a raw record, decoded leniently."""
        if isinstance(raw, bytes):
            raw = raw[: _EXCERPT_CHARS * 4].decode("utf-8", "replace")
        return raw[:_EXCERPT_CHARS]

    @classmethod
    def of_document(cls, step: str, reason: str, message: str, document: Document) -> DeadLetter:
        """A dead letter for a document a step could not process, naming its id and URL."""
        return cls(
            step=step,
            reason=reason,
            message=message,
            record_id=document.id,
            url=document.metadata.get("url"),
            excerpt=cls.excerpt_of(document.text),
        )

    @staticmethod
    def describe(exc: BaseException) -> str:
        """``exc``'s type and message, and where it was raised (the innermost frame)."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
        return f"{type(exc).__name__}: {exc}{where}"

    def to_row(self) -> dict[str, Any]:
        """The dead letter as a JSON-compatible dict without empty fields."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
