"""Reading Arrow IPC files (the file format and the stream format) into documents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import SUFFIXES
from beamtrove.formats.parquet import ParquetParser
from beamtrove.formats.records import Outcome
from beamtrove.fs import InputFile
from beamtrove.network import ReadGaveUp

__all__ = ["IpcParser"]

# The IPC file format (Feather v2) starts with these bytes; the stream format does not.
_FILE_FORMAT_MAGIC = b"ARROW1"


class IpcParser(ParquetParser):
    """Turns each row of an Arrow IPC file into a document.

    Both IPC layouts are read, told apart by the file's first bytes: the file
    format (``.arrow``, ``.feather`` v2, ``.ipc``) and the stream format
    (``.arrows``, and the ``.arrow`` files of Hugging Face datasets). Rows are
    Arrow rows, as Parquet's are, so they become documents the same way (see
    :class:`ParquetParser`), ``batch_size`` rows at a time.

    Reading stops at the first damaged record batch: IPC does not record how
    many rows a batch holds outside the batch itself, so the rows after it
    could not keep their numbers. Rows are numbered from
    ``InputFile.first_index``, so that a reader splitting one table over
    several files can number rows across them.
    """

    suffixes = SUFFIXES["ipc"]

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        index = file.first_index
        try:
            for batch in self._batches(stream):
                # Damaged offsets would make converting the rows read outside the batch, and crash the worker.
                batch.validate(full=True)
                for start in range(0, batch.num_rows, self._batch_size):
                    for row in batch.slice(start, self._batch_size).to_pylist():
                        yield self._document(row, file, index, step)
                        index += 1
        except ReadGaveUp:  # the network's failure, not damage: the reader makes it the file's one dead letter
            raise
        except Exception as exc:  # pyarrow raises several types for damaged files
            yield DeadLetter(
                step,
                "corrupt_ipc",
                f"unreadable from row {index} on: {type(exc).__name__}: {exc}",
                file=file.url,
                line=index,
            )

    @staticmethod
    def _batches(stream: BinaryIO) -> Iterator[pa.RecordBatch]:
        file_format = stream.read(len(_FILE_FORMAT_MAGIC)) == _FILE_FORMAT_MAGIC
        stream.seek(0)
        if not file_format:
            with pa.ipc.open_stream(stream) as reader:
                yield from reader
            return
        with pa.ipc.open_file(stream) as reader:
            for number in range(reader.num_record_batches):
                yield reader.get_batch(number)
