"""The file formats beamtrove reads: how the bytes of one file become records, with no Beam imported.

Each format is a :class:`~beamtrove.formats.records.RecordParser` in its own
module (:mod:`~beamtrove.formats.warc`, :mod:`~beamtrove.formats.jsonl`,
:mod:`~beamtrove.formats.parquet`, :mod:`~beamtrove.formats.csv`,
:mod:`~beamtrove.formats.ipc`); :mod:`~beamtrove.formats.records` reads files
through them and keeps the books. The Beam readers
(:mod:`beamtrove.transforms.readers`) run these parsers inside pipelines;
commands that only look at files (``inspect``, ``report``) use them directly.
A format's module is imported only when the format is read, so telling a
format by its file names costs none of warcio's or pyarrow's import.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from beamtrove.formats.hf import is_saved_dataset
from beamtrove.fs import filesystem, is_glob, match_inputs

if TYPE_CHECKING:
    from beamtrove.formats.records import RecordParser

__all__ = ["FILE_FORMATS", "HUGGING_FACE", "SUFFIXES", "input_format", "parser_class"]

#: Input format -> the endings of its files' names, which directory inputs are filtered by.
SUFFIXES = {
    "warc": (".warc", ".warc.gz", ".arc", ".arc.gz", ".wet", ".wet.gz"),
    "jsonl": (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.bz2", ".jsonl.xz", ".json.gz"),
    "parquet": (".parquet",),
    "csv": (".csv", ".csv.gz", ".csv.zst", ".csv.bz2", ".csv.xz"),
    "ipc": (".arrow", ".arrows", ".ipc", ".feather"),
}
#: The formats of files, each read by one parser.
FILE_FORMATS = tuple(SUFFIXES)
#: The format of a folder holding a Hugging Face dataset (Arrow files listed by the dataset's JSON files).
HUGGING_FACE = "hf"
_PARSERS = {
    "warc": "WarcParser",
    "jsonl": "JsonlParser",
    "parquet": "ParquetParser",
    "csv": "CsvParser",
    "ipc": "IpcParser",
}


def parser_class(file_format: str) -> type[RecordParser]:
    """The parser of ``file_format``, one of :data:`FILE_FORMATS`; its module is imported now."""
    return getattr(importlib.import_module(f"{__name__}.{file_format}"), _PARSERS[file_format])


def input_format(requested: str, paths: str | Sequence[str]) -> str:
    """The format to read ``paths`` in: ``requested``, or for ``auto`` the one their names tell.

    Args:
        requested: One of :data:`FILE_FORMATS`, ``hf`` or ``auto``.
        paths: The input paths, used by ``auto``: a folder holding a saved
            Hugging Face dataset is ``hf``; another folder's format is the
            one of the data files under it. Output folders of runs that kept
            no document, an empty input, are JSONL, as the documents runs
            keep are.

    Raises:
        ValueError: The format is unknown, or ``auto`` cannot tell it.
        FileNotFoundError: A path does not exist, or a folder holds no file of a format read here.
    """
    known = (*FILE_FORMATS, HUGGING_FACE)
    if requested != "auto":
        if requested not in known:
            raise ValueError(f"Unknown input format {requested!r}: use one of auto, {', '.join(known)}.")
        return requested
    paths = [paths] if isinstance(paths, str) else list(paths)
    if any(is_saved_dataset(path) for path in paths):
        return HUGGING_FACE
    names = [name for path in paths for name in _file_names(path)]
    if paths and not names:
        return "jsonl"
    found = {fmt for name in names for fmt, suffixes in SUFFIXES.items() if name.rstrip("/*").endswith(suffixes)}
    if not found:
        # A path that does not exist is what to fix first (names alone tell the format of files yet to be made).
        match_inputs(paths, warn_empty_runs=False)
    if len(found) != 1:
        which = f"files of several formats ({', '.join(sorted(found))})" if found else "no file name it knows"
        raise ValueError(
            f"Cannot tell the input format of {paths}: they have {which}; pass --input_format ({', '.join(known)})."
        )
    return found.pop()


def _file_names(path: str) -> list[str]:
    """The names of the data files under ``path`` when it is a folder, else ``path`` itself."""
    fs, fs_path = filesystem(path)
    if is_glob(fs, fs_path) or not fs.isdir(fs_path):
        return [path]
    suffixes = tuple(suffix for endings in SUFFIXES.values() for suffix in endings)
    # The reader matches the folder again, and says when it is a run's output that kept nothing.
    return [file.name for file in match_inputs(path, suffixes, warn_empty_runs=False)]
