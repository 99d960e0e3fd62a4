"""Reading JSON Lines files (plain, gzip, zstd, ...) into documents."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import orjson

from beamtrove.dead_letter import DeadLetter
from beamtrove.fs import InputFile
from beamtrove.transforms.readers.base import FileReader, Outcome, RecordParser, RowError, RowFields

__all__ = ["JsonlParser", "ReadJsonl"]


class JsonlParser(RecordParser):
    """Turns each non-blank line of a JSONL file into a document.

    A line that is not a JSON object, or has no string text, becomes a dead
    letter carrying its 1-based line number.
    """

    suffixes = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.bz2", ".jsonl.xz", ".json.gz")
    compression = "infer"
    reads_byte_ranges = True

    def __init__(self, fields: RowFields = RowFields()):
        self._fields = fields

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        # Some decompressors (zstd) cannot read lines themselves.
        for index, line in enumerate(io.BufferedReader(stream, 1 << 20), start=file.first_index):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                yield self._dead_letter(step, "malformed_json", str(exc), file, index, line)
                continue
            if not isinstance(row, dict):
                yield self._dead_letter(
                    step, "not_an_object", f"the line holds a {type(row).__name__}", file, index, line
                )
                continue
            try:
                yield self._fields.to_document(row, file, index)
            except RowError as error:
                yield error.dead_letter(step, file, index + 1, DeadLetter.excerpt_of(line))

    @staticmethod
    def _dead_letter(step: str, reason: str, message: str, file: InputFile, index: int, line: bytes) -> DeadLetter:
        return RowError(reason, message).dead_letter(step, file, index + 1, DeadLetter.excerpt_of(line))


class ReadJsonl(FileReader):
    """Reads JSON Lines files as documents.

    Rows laid out as beamtrove's and DataTrove's writers lay them out
    (``text``, ``id``, ``media``, ``metadata``) read back unchanged; for other
    layouts, name the text and id fields, and every other field becomes
    metadata.

    Stats: ``in`` counts non-blank lines, ``out`` documents,
    ``errors.malformed_json``, ``errors.not_an_object``,
    ``errors.missing_text``, ``errors.text_not_a_string``,
    ``errors.malformed_media``, ``errors.nested_too_deep`` (metadata no
    writer could store).
    """

    def __init__(
        self,
        paths: str | Iterable[str],
        *,
        text_key: str = "text",
        id_key: str = "id",
        default_metadata: Mapping[str, Any] | None = None,
        **options: Any,
    ):
        """Matches the input files.

        Args:
            paths: JSONL files, directories or glob patterns; compression is
                inferred from the file name (``.gz``, ``.zst``, ...).
            text_key: Field holding the text.
            id_key: Field holding the id; rows without one get
                ``<file name>/<0-based line index>``.
            default_metadata: Metadata every document starts from.
            **options: ``skip``, ``limit``, ``storage_options`` and
                ``progress_interval``, as :class:`FileReader` takes them.
        """
        super().__init__(
            paths,
            JsonlParser(RowFields(text_key, id_key, default_metadata)),
            **options,
        )
