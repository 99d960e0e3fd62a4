"""Beam sources that read crawl and dataset files into documents, through the parsers of :mod:`beamtrove.formats`."""

from beamtrove.formats import input_format
from beamtrove.formats.csv import CsvParser
from beamtrove.formats.hf import is_saved_dataset
from beamtrove.formats.ipc import IpcParser
from beamtrove.formats.jsonl import JsonlParser
from beamtrove.formats.parquet import ParquetParser
from beamtrove.formats.records import RecordParser, Skip
from beamtrove.formats.rows import RowError, RowFields
from beamtrove.formats.warc import HTML_MIME_TYPES, WarcParser
from beamtrove.transforms.readers.base import FileReader
from beamtrove.transforms.readers.csv import ReadCsv
from beamtrove.transforms.readers.hf import ReadHuggingFace
from beamtrove.transforms.readers.ipc import ReadIpc
from beamtrove.transforms.readers.jsonl import ReadJsonl
from beamtrove.transforms.readers.parquet import ReadParquet
from beamtrove.transforms.readers.rows import RowReader
from beamtrove.transforms.readers.warc import ReadWarc

__all__ = [
    "HTML_MIME_TYPES",
    "CsvParser",
    "FileReader",
    "IpcParser",
    "JsonlParser",
    "ParquetParser",
    "ReadCsv",
    "ReadHuggingFace",
    "ReadIpc",
    "ReadJsonl",
    "ReadParquet",
    "ReadWarc",
    "RecordParser",
    "RowError",
    "RowFields",
    "RowReader",
    "Skip",
    "WarcParser",
    "is_saved_dataset",
    "reader_for",
]

_READERS = {
    "warc": ReadWarc,
    "jsonl": ReadJsonl,
    "parquet": ReadParquet,
    "csv": ReadCsv,
    "ipc": ReadIpc,
    "hf": ReadHuggingFace,
}


def reader_for(requested_format: str, paths: str | list[str]) -> type[FileReader]:
    """The reader class for ``requested_format``, or for ``auto`` the one the paths' names tell.

    See :func:`beamtrove.formats.input_format`, which tells the format.

    Raises:
        ValueError: The format is unknown, or ``auto`` cannot tell it.
        FileNotFoundError: A folder holds no file of a format read here.
    """
    return _READERS[input_format(requested_format, paths)]
