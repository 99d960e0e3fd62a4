"""The base of the readers of table rows (JSONL, CSV, Parquet, Arrow IPC), whose fields map alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from beamtrove.formats.records import RecordParser
from beamtrove.formats.rows import RowFields
from beamtrove.fs import InputFile
from beamtrove.transforms.readers.base import FileReader

__all__ = ["RowReader"]


class RowReader(FileReader):
    """Base of the readers of table rows, which all name a row's fields alike (see :class:`RowFields`)."""

    def __init__(
        self,
        paths: str | InputFile | Iterable[str | InputFile],
        parser_for: Callable[[RowFields], RecordParser],
        *,
        text_key: str = "text",
        id_key: str = "id",
        default_metadata: Mapping[str, Any] | None = None,
        **options: Any,
    ):
        """Matches the input files.

        Args:
            paths: Files, directories or glob patterns; compression is
                inferred from the file name.
            parser_for: Builds the parser from the row fields.
            text_key: Field (column) holding the text.
            id_key: Field holding the id; rows without one get
                ``<file name>/<0-based row index>``.
            default_metadata: Metadata every document starts from.
            **options: ``skip``, ``limit``, ``storage_options`` and
                ``progress_interval``, as :class:`FileReader` takes them.
        """
        super().__init__(paths, parser_for(RowFields(text_key, id_key, default_metadata)), **options)
