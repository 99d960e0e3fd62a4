"""The Beam source of Parquet files; :mod:`beamtrove.formats.parquet` parses them."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from beamtrove.formats.parquet import ParquetParser
from beamtrove.transforms.readers.rows import RowReader

__all__ = ["ReadParquet"]


class ReadParquet(RowReader):
    """Reads Parquet files as documents.

    Stats: ``in`` counts rows, ``out`` documents, ``errors.corrupt_parquet``
    (once per unreadable file or row group; the other row groups are read),
    ``errors.missing_text``, ``errors.text_not_a_string``,
    ``errors.malformed_media``, and for rows no writer could store
    ``errors.not_json`` (a binary or decimal column) and
    ``errors.nested_too_deep``.
    """

    def __init__(self, paths: str | Iterable[str], *, batch_size: int = 1024, **options: Any):
        """Matches the input files.

        Args:
            paths: Parquet files, directories or glob patterns.
            batch_size: Rows decoded at a time.
            **options: ``text_key``, ``id_key`` and ``default_metadata``, as
                :class:`~beamtrove.transforms.readers.rows.RowReader` takes
                them (here, columns), and its reading options.
        """
        super().__init__(paths, functools.partial(ParquetParser, batch_size=batch_size), **options)
