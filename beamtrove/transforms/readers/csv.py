"""The Beam source of CSV files; :mod:`beamtrove.formats.csv` parses them."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from beamtrove.formats.csv import CsvParser
from beamtrove.transforms.readers.rows import RowReader

__all__ = ["ReadCsv"]


class ReadCsv(RowReader):
    """Reads CSV files with a header line as documents.

    Stats: ``in`` counts rows, ``out`` documents, ``errors.malformed_row``,
    ``errors.malformed_csv`` (undecodable bytes or broken quoting; ends the
    file), ``errors.truncated`` and ``errors.corrupt_compression`` (a
    damaged compressed file; the rows before the damage are read),
    ``errors.missing_text``.
    """

    def __init__(self, paths: str | Iterable[str], *, delimiter: str = ",", encoding: str = "utf-8", **options: Any):
        """Matches the input files.

        Args:
            paths: CSV files, directories or glob patterns.
            delimiter: Field separator.
            encoding: Text encoding of the files.
            **options: ``text_key``, ``id_key`` and ``default_metadata``, as
                :class:`~beamtrove.transforms.readers.rows.RowReader` takes
                them (here, columns), and its reading options.
        """
        super().__init__(paths, functools.partial(CsvParser, delimiter=delimiter, encoding=encoding), **options)
