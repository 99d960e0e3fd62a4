"""Reading JSON Lines files (plain, gzip, zstd, ...) into documents."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

import orjson

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import SUFFIXES
from beamtrove.formats.compression import DamagedStream
from beamtrove.formats.records import Outcome, RecordParser
from beamtrove.formats.rows import RowError, RowFields
from beamtrove.fs import InputFile

__all__ = ["JsonlParser"]


class JsonlParser(RecordParser):
    """Turns each non-blank line of a JSONL file into a document.

    A line that is not a JSON object, or has no string text, becomes a dead
    letter carrying its 1-based line number. A file that breaks off or is
    corrupt (see :class:`~beamtrove.formats.compression.DamagedStream`)
    gives its lines up to the damage, then one dead letter for the damage,
    carrying the number of the first line lost; the piece of a line it cut
    is part of that loss, not a line of its own.
    """

    suffixes = SUFFIXES["jsonl"]
    compression = "infer"
    reads_byte_ranges = True

    def __init__(self, fields: RowFields = RowFields()):
        self._fields = fields

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        index, start = file.first_index, file.start
        try:
            # On damage, the buffered reader drops the piece of a line it was reading: lines come whole.
            for line in io.BufferedReader(stream, 1 << 20):
                outcome = self._outcome(line, file, index, step)
                if outcome is not None:
                    yield outcome
                index += 1
                start += len(line)
        except DamagedStream as damage:
            message = f"{damage.message}; line {index + 1}, at byte {start} of the lines, and any after it are lost"
            yield DeadLetter(step, damage.reason, message, file=file.url, offset=damage.offset, line=index + 1)

    def _outcome(self, line: bytes, file: InputFile, index: int, step: str) -> Outcome | None:
        """The document of the 0-based line ``index``, a dead letter, or None for a blank line."""
        if not line.strip():
            return None
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return self._dead_letter(step, "malformed_json", str(exc), file, index, line)
        if not isinstance(row, dict):
            return self._dead_letter(step, "not_an_object", f"the line holds a {type(row).__name__}", file, index, line)
        try:
            return self._fields.to_document(row, file, index)
        except RowError as error:
            return error.dead_letter(step, file, index + 1, DeadLetter.excerpt_of(line))

    @staticmethod
    def _dead_letter(step: str, reason: str, message: str, file: InputFile, index: int, line: bytes) -> DeadLetter:
        return RowError(reason, message).dead_letter(step, file, index + 1, DeadLetter.excerpt_of(line))
