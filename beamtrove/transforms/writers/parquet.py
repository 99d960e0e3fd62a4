"""Writing documents as Parquet in DataTrove's column layout."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from beamtrove.document import Document, document_row
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers.base import (
    FileFormat,
    RecordWriter,
    RolloverNeeded,
    WriteFiles,
    document_fields,
    document_key,
)

__all__ = ["ParquetFormat", "WriteParquet", "parquet_row"]

_LOGGER = logging.getLogger(__name__)
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def _without_empty_structs(value: Any) -> Any:
    # Parquet cannot store a struct without fields.
    if isinstance(value, dict):
        return {k: _without_empty_structs(v) for k, v in value.items() if v != {}}
    if isinstance(value, list):
        return [_without_empty_structs(v) for v in value]
    return value


def parquet_row(document: Document) -> dict[str, Any]:
    """A document as a Parquet row: ``text``, ``id``, ``media``, ``metadata`` struct."""
    return _without_empty_structs(document_row(document, binary_media=True))


def _table(rows: list[dict[str, Any]], schema: pa.Schema | None) -> pa.Table:
    if schema is not None:
        return pa.Table.from_pylist(rows, schema=schema)
    # from_pylist would take the columns of the first row only.
    columns = dict.fromkeys(key for row in rows for key in row)
    return pa.Table.from_pydict({column: [row.get(column) for row in rows] for column in columns})


def _unified(file_schema: pa.Schema, batch_schema: pa.Schema) -> pa.Schema | None:
    try:
        return pa.unify_schemas([file_schema, batch_schema], promote_options="permissive")
    except _CONVERSION_ERRORS:
        return None


class _ParquetRecordWriter(RecordWriter):
    """Buffers rows into row groups; the file's schema is its first row group's.

    A later row group whose schema adds fields or changes types asks for a new
    file (:class:`RolloverNeeded`); one with a subset of the fields is written
    with nulls for the fields it lacks.
    """

    def __init__(self, stream: BinaryIO, spec: ParquetFormat, metrics: StepMetrics):
        self._stream = stream
        self._spec = spec
        self._metrics = metrics
        self._pending: list[Any] = []
        self._writer: pq.ParquetWriter | None = None
        self.records = 0

    def write(self, element: Any) -> None:
        self._pending.append(element)
        if len(self._pending) >= self._spec.row_group_size:
            self._flush()

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _flush(self) -> None:
        elements, self._pending = self._pending, []
        if elements:
            self._write_row_group(elements)

    def _write_row_group(self, elements: list[Any]) -> None:
        rows = [self._spec.to_row(element) for element in elements]
        try:
            table = _table(rows, self._spec.schema)
        except _CONVERSION_ERRORS as exc:
            if len(elements) == 1:
                self._give_up(rows[0], exc)
                return
            # Rows that disagree on a field's type: their schemas sort them into files.
            for position, element in enumerate(elements):
                try:
                    self._write_row_group([element])
                except RolloverNeeded as rollover:
                    raise RolloverNeeded(rollover.pending + elements[position + 1 :]) from None
            return
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._stream, table.schema, compression=self._spec.compression)
        elif not table.schema.equals(self._writer.schema):
            if _unified(self._writer.schema, table.schema) != self._writer.schema:
                raise RolloverNeeded(elements)
            # The rows hold a subset of the file's fields: fill the rest with nulls.
            table = pa.Table.from_pylist(rows, schema=self._writer.schema)
        self._writer.write_table(table)
        self.records += len(rows)

    def _give_up(self, row: dict[str, Any], exc: Exception) -> None:
        self._metrics.errored("unwritable_row")
        _LOGGER.warning("%s: cannot store document %r in Parquet: %s", self._metrics.step, row.get("id"), exc)


class ParquetFormat(FileFormat):
    """Parquet files of ``row_group_size`` rows per row group."""

    def __init__(
        self,
        to_row: Callable[[Any], Mapping[str, Any]] = parquet_row,
        schema: pa.Schema | None = None,
        row_group_size: int = 1000,
        compression: str = "snappy",
    ):
        self.to_row = to_row
        self.schema = schema
        self.row_group_size = row_group_size
        self.compression = compression

    def open(self, stream: BinaryIO, suffix: str, metrics: StepMetrics) -> RecordWriter:
        return _ParquetRecordWriter(stream, self, metrics)


class WriteParquet(WriteFiles):
    """Writes documents as Parquet files that DataTrove's ``ParquetReader`` reads.

    Columns are ``text``, ``id``, ``media`` (when any document in a row group
    has media) and ``metadata`` as a struct. Without an explicit ``schema``,
    each file takes the schema of its first row group, and a row group with
    new metadata fields or types starts a new file, so no field is ever
    dropped. Empty nested mappings are not stored (Parquet has no empty
    struct). A document that Parquet cannot represent at all is counted as
    ``errors.unwritable_row`` and logged.
    """

    def __init__(
        self,
        output_dir: str,
        filename_template: str = "part-${shard}.parquet",
        *,
        max_file_size: int | None = None,
        schema: pa.Schema | None = None,
        row_group_size: int = 1000,
        compression: str = "snappy",
        storage_options: Mapping[str, Any] | None = None,
    ):
        """Configures the writer.

        Args:
            output_dir: Output directory, a path or fsspec URL.
            filename_template: Relative file names with ``${shard}`` and any
                ``${metadata_key}``.
            max_file_size: Roll over to a new file past this many bytes.
            schema: A fixed Arrow schema for every file; fields outside it
                are not written.
            row_group_size: Documents per row group.
            compression: Parquet codec (``snappy``, ``zstd``, ``gzip``, ``none``).
            storage_options: fsspec filesystem options.
        """
        if row_group_size <= 0:
            raise ValueError(f"row_group_size must be positive (got {row_group_size}).")
        super().__init__(
            output_dir,
            filename_template,
            ParquetFormat(schema=schema, row_group_size=row_group_size, compression=compression),
            fields_of=document_fields,
            key_of=document_key,
            max_file_size=max_file_size,
            storage_options=storage_options,
        )
