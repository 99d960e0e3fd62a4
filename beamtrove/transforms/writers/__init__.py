"""Beam sinks that write documents to files with atomic finalization."""

from beamtrove.document import document_row
from beamtrove.transforms.writers.base import (
    FileFormat,
    FilenameTemplate,
    RecordWriter,
    RolloverNeeded,
    WriteFiles,
    WrittenFile,
)
from beamtrove.transforms.writers.jsonl import JsonlFormat, WriteDeadLetters, WriteJsonl
from beamtrove.transforms.writers.parquet import ParquetFormat, WriteParquet, parquet_row

__all__ = [
    "FileFormat",
    "FilenameTemplate",
    "JsonlFormat",
    "ParquetFormat",
    "RecordWriter",
    "RolloverNeeded",
    "WriteDeadLetters",
    "WriteFiles",
    "WriteJsonl",
    "WriteParquet",
    "WrittenFile",
    "document_row",
    "parquet_row",
]
