"""Writing documents (and dead letters) as JSON Lines, optionally compressed."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import orjson
import zstandard

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, document_row
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers.base import FileFormat, RecordWriter, WriteFiles, document_fields, document_key

__all__ = ["JsonlFormat", "WriteDeadLetters", "WriteJsonl"]


# gzip goes through zlib, whose stream is a function of the bytes written alone, however the writes cut them.
# ISA-L's (igzip level 2, about 3x as fast) is not: once, in CI, runs of the same command in one long-lived process
# wrote files of the same documents whose gzip bytes differed (4 bytes longer). zlib's level 1 writes about 70 MB/s
# of JSON per core, files 3.5% (web text) to 5.4% larger than ISA-L's level 2 (benchmarks/gzip_writing.py).
_DEFAULT_LEVELS = {".gz": 1, ".zst": 3}


class _JsonlRecordWriter(RecordWriter):
    def __init__(self, stream: BinaryIO, suffix: str, to_row: Callable[[Any], Mapping], level: int | None):
        if suffix.endswith(".gz"):
            # No name and no time in the header keeps the bytes identical across reruns.
            level = _DEFAULT_LEVELS[".gz"] if level is None else level
            self._out = gzip.GzipFile(filename="", fileobj=stream, mode="wb", compresslevel=level, mtime=0)
        elif suffix.endswith(".zst"):
            level = _DEFAULT_LEVELS[".zst"] if level is None else level
            self._out = zstandard.ZstdCompressor(level=level).stream_writer(stream, closefd=False)
        else:
            self._out = stream
        self._stream = stream
        self._to_row = to_row
        self.records = 0

    def write(self, element: Any) -> None:
        self._out.write(orjson.dumps(self._to_row(element)))
        self._out.write(b"\n")
        self.records += 1

    def close(self) -> None:
        if self._out is not self._stream:
            self._out.close()


class JsonlFormat(FileFormat):
    """One JSON object per line; ``.gz`` and ``.zst`` file names are compressed."""

    def __init__(self, to_row: Callable[[Any], Mapping[str, Any]] = document_row, compression_level: int | None = None):
        self._to_row = to_row
        self._compression_level = compression_level

    def open(self, stream: BinaryIO, suffix: str, metrics: StepMetrics) -> RecordWriter:
        return _JsonlRecordWriter(stream, suffix, self._to_row, self._compression_level)


class WriteJsonl(WriteFiles):
    """Writes documents as JSON Lines that DataTrove's ``JsonlReader`` reads.

    Example::

        docs | "Write" >> WriteJsonl("out/", "${language}/part-${shard}.jsonl.gz")
    """

    def __init__(
        self,
        output_dir: str,
        filename_template: str = "part-${shard}.jsonl.gz",
        *,
        max_file_size: int | None = None,
        to_row: Callable[[Document], Mapping[str, Any]] = document_row,
        compression_level: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ):
        """Configures the writer.

        Args:
            output_dir: Output directory, a path or fsspec URL.
            filename_template: Relative file names with ``${shard}`` and any
                ``${metadata_key}``; ``.gz`` or ``.zst`` endings compress.
            max_file_size: Roll over to a new file past this many bytes.
            to_row: Lays a document out as a JSON object (DataTrove's layout
                by default).
            compression_level: gzip (zlib) level (0 to 9, default 1) or zstd
                level (1 to 22, default 3).
            storage_options: fsspec filesystem options.
        """
        super().__init__(
            output_dir,
            filename_template,
            JsonlFormat(to_row, compression_level),
            fields_of=document_fields,
            key_of=document_key,
            max_file_size=max_file_size,
            storage_options=storage_options,
        )


class WriteDeadLetters(WriteFiles):
    """Writes dead letters as JSON Lines, one object per failed record.

    The template can use any dead-letter field, e.g. ``${step}/part-${shard}.jsonl``.
    """

    def __init__(
        self,
        output_dir: str,
        filename_template: str = "part-${shard}.jsonl",
        *,
        storage_options: Mapping[str, Any] | None = None,
    ):
        super().__init__(
            output_dir,
            filename_template,
            JsonlFormat(DeadLetter.to_row),
            fields_of=DeadLetter.to_row,
            key_of=_dead_letter_key,
            storage_options=storage_options,
        )


def _dead_letter_key(dead_letter: DeadLetter) -> str:
    return f"{dead_letter.file}\0{dead_letter.offset or 0:020d}\0{dead_letter.line or 0:020d}\0{dead_letter.reason}"
