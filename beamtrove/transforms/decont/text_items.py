"""Reading benchmark items from plain text files: one item per non-blank line."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from beamtrove.document import Document, Origin
from beamtrove.fs import InputFile
from beamtrove.transforms.readers import FileReader, RecordParser

__all__ = ["TEXT_SUFFIXES", "ReadTextItems"]

#: The file endings read as plain text.
TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.zst", ".txt.bz2", ".txt.xz")


class _TextLinesParser(RecordParser):
    """Turns each non-blank line of a UTF-8 text file into an item whose text is the line."""

    suffixes = TEXT_SUFFIXES
    compression = "infer"

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Document]:
        lines = io.TextIOWrapper(io.BufferedReader(stream, 1 << 20), encoding="utf-8", errors="replace")
        for index, line in enumerate(lines):
            if line.strip():
                yield Document(
                    text=line.rstrip("\r\n"),
                    id=f"{file.name}/{index}",
                    metadata={"file_path": file.url},
                    origin=Origin(file.url, index),
                )


class ReadTextItems(FileReader):
    """Reads plain text files as benchmark items without a query, one per non-blank line.

    Ids are ``<file name>/<0-based line index>``; undecodable bytes become U+FFFD.
    """

    def __init__(self, paths: str | Iterable[str | InputFile], **options: Any):
        """Matches the input files.

        Args:
            paths: Text files, directories or glob patterns; compression is
                inferred from the file name.
            **options: ``skip``, ``limit``, ``storage_options`` and
                ``progress_interval``, as :class:`FileReader` takes them.
        """
        super().__init__(paths, _TextLinesParser(), **options)
