"""Beam sources that read crawl and dataset files into documents."""

from beamtrove.fs import filesystem, is_glob, match_inputs
from beamtrove.transforms.readers.base import FileReader, RecordParser, Skip
from beamtrove.transforms.readers.csv import CsvParser, ReadCsv
from beamtrove.transforms.readers.hf import ReadHuggingFace, is_saved_dataset
from beamtrove.transforms.readers.ipc import IpcParser, ReadIpc
from beamtrove.transforms.readers.jsonl import JsonlParser, ReadJsonl
from beamtrove.transforms.readers.parquet import ParquetParser, ReadParquet
from beamtrove.transforms.readers.rows import RowError, RowFields, RowReader
from beamtrove.transforms.readers.warc import HTML_MIME_TYPES, ReadWarc, WarcParser

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
_PARSERS = {"warc": WarcParser, "jsonl": JsonlParser, "parquet": ParquetParser, "csv": CsvParser, "ipc": IpcParser}


def reader_for(input_format: str, paths: str | list[str]) -> type[FileReader]:
    """The reader class for ``input_format``, or for the paths' file names.

    Args:
        input_format: ``warc``, ``jsonl``, ``parquet``, ``csv``, ``ipc``,
            ``hf`` or ``auto``.
        paths: The input paths, used by ``auto``: a folder holding a saved
            Hugging Face dataset is ``hf``; another folder's format is the
            one of the data files under it. Output folders of runs that kept
            no document, an empty input, are JSONL, as the documents runs
            keep are.

    Raises:
        ValueError: The format is unknown, or ``auto`` cannot tell it.
    """
    if input_format != "auto":
        if input_format not in _READERS:
            raise ValueError(f"Unknown input format {input_format!r}: use one of auto, {', '.join(_READERS)}.")
        return _READERS[input_format]
    paths = [paths] if isinstance(paths, str) else paths
    if any(is_saved_dataset(path) for path in paths):
        return ReadHuggingFace
    names = [name for path in paths for name in _file_names(path)]
    if paths and not names:
        return ReadJsonl
    found = {fmt for name in names for fmt, parser in _PARSERS.items() if name.rstrip("/*").endswith(parser.suffixes)}
    if len(found) != 1:
        which = f"files of several formats ({', '.join(sorted(found))})" if found else "no file name it knows"
        raise ValueError(
            f"Cannot tell the input format of {paths}: they have {which}; pass --input_format ({', '.join(_READERS)})."
        )
    return _READERS[found.pop()]


def _file_names(path: str) -> list[str]:
    """The names of the data files under ``path`` when it is a folder, else ``path`` itself."""
    fs, fs_path = filesystem(path)
    if is_glob(fs, fs_path) or not fs.isdir(fs_path):
        return [path]
    suffixes = tuple(suffix for parser in _PARSERS.values() for suffix in parser.suffixes)
    # The reader matches the folder again, and says when it is a run's output that kept nothing.
    return [file.name for file in match_inputs(path, suffixes, warn_empty_runs=False)]
