"""Beam sources that read crawl and dataset files into documents."""

from beamtrove.transforms.readers.base import FileReader, RecordParser, RowError, RowFields, Skip
from beamtrove.transforms.readers.csv import CsvParser, ReadCsv
from beamtrove.transforms.readers.jsonl import JsonlParser, ReadJsonl
from beamtrove.transforms.readers.parquet import ParquetParser, ReadParquet
from beamtrove.transforms.readers.warc import HTML_MIME_TYPES, ReadWarc, WarcParser

__all__ = [
    "HTML_MIME_TYPES",
    "CsvParser",
    "FileReader",
    "JsonlParser",
    "ParquetParser",
    "ReadCsv",
    "ReadJsonl",
    "ReadParquet",
    "ReadWarc",
    "RecordParser",
    "RowError",
    "RowFields",
    "Skip",
    "WarcParser",
    "reader_for",
]

_READERS = {"warc": ReadWarc, "jsonl": ReadJsonl, "parquet": ReadParquet, "csv": ReadCsv}
_PARSERS = {"warc": WarcParser, "jsonl": JsonlParser, "parquet": ParquetParser, "csv": CsvParser}


def reader_for(input_format: str, paths: str | list[str]) -> type[FileReader]:
    """The reader class for ``input_format``, or for the paths' file names.

    Args:
        input_format: ``warc``, ``jsonl``, ``parquet``, ``csv`` or ``auto``.
        paths: The input paths, used by ``auto``.

    Raises:
        ValueError: The format is unknown, or ``auto`` cannot tell it.
    """
    if input_format != "auto":
        if input_format not in _READERS:
            raise ValueError(f"Unknown input format {input_format!r}: use one of auto, {', '.join(_READERS)}.")
        return _READERS[input_format]
    names = [paths] if isinstance(paths, str) else list(paths)
    found = {fmt for name in names for fmt, parser in _PARSERS.items() if name.rstrip("/*").endswith(parser.suffixes)}
    if len(found) != 1:
        raise ValueError(
            f"Cannot tell the input format of {names} from the file names; pass --input_format ({', '.join(_READERS)})."
        )
    return _READERS[found.pop()]
