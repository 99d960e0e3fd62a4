"""Reading Parquet files into documents, one row group batch at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow.parquet as pq

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import SUFFIXES
from beamtrove.formats.records import Outcome, RecordParser
from beamtrove.formats.rows import RowError, RowFields
from beamtrove.fs import InputFile
from beamtrove.network import ReadGaveUp

__all__ = ["ParquetParser"]


def _without_nulls(value: Any) -> Any:
    """Drops the null fields Parquet adds to structs for keys a row lacked."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


class ParquetParser(RecordParser):
    """Turns each row of a Parquet file into a document.

    Parquet stores metadata as a struct whose fields are the union of all
    rows' keys, so a key a row lacked reads back as null; those nulls are
    dropped to give back the metadata that was written.

    A damaged row group is a dead letter, and the other row groups are read.
    A file cut short has lost its footer, the only index of its row groups,
    so none of its rows can be found: it is one dead letter naming the file.
    """

    suffixes = SUFFIXES["parquet"]

    def __init__(self, fields: RowFields = RowFields(), batch_size: int = 1024):
        self._fields = fields
        self._batch_size = batch_size

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        try:
            parquet = pq.ParquetFile(stream)
        except ReadGaveUp:  # the network's failure, not damage: the reader makes it the file's one dead letter
            raise
        except Exception as exc:  # pyarrow raises several types for damaged files
            yield DeadLetter(step, "corrupt_parquet", f"{type(exc).__name__}: {exc}", file=file.url)
            return
        first_row = 0
        for group in range(parquet.num_row_groups):
            group_rows = parquet.metadata.row_group(group).num_rows
            index = first_row
            try:
                for batch in parquet.iter_batches(batch_size=self._batch_size, row_groups=[group]):
                    for row in batch.to_pylist():
                        yield self._document(row, file, index, step)
                        index += 1
            except ReadGaveUp:  # the network's failure, not damage: the reader makes it the file's one dead letter
                raise
            except Exception as exc:  # a damaged row group; the next one may be intact
                yield DeadLetter(
                    step,
                    "corrupt_parquet",
                    f"row group {group} (rows {index} to {first_row + group_rows - 1}) is unreadable: "
                    f"{type(exc).__name__}: {exc}",
                    file=file.url,
                    line=index,
                )
            first_row += group_rows

    def _document(self, row: dict[str, Any], file: InputFile, index: int, step: str) -> Outcome:
        for column in ("metadata", "media"):
            if column in row and row[column] is None:
                del row[column]
        if isinstance(row.get("metadata"), dict):
            row["metadata"] = _without_nulls(row["metadata"])
        try:
            return self._fields.to_document(row, file, index)
        except RowError as error:
            return error.dead_letter(step, file, index)
