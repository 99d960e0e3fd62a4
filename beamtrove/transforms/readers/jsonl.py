"""The Beam source of JSON Lines files; :mod:`beamtrove.formats.jsonl` parses them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from beamtrove.formats.jsonl import JsonlParser
from beamtrove.fs import InputFile
from beamtrove.transforms.readers.rows import RowReader

__all__ = ["ReadJsonl"]


class ReadJsonl(RowReader):
    """Reads JSON Lines files as documents.

    Rows laid out as beamtrove's and DataTrove's writers lay them out
    (``text``, ``id``, ``media``, ``metadata``) read back unchanged; for other
    layouts, name the text and id fields, and every other field becomes
    metadata.

    Stats: ``in`` counts non-blank lines, ``out`` documents,
    ``errors.malformed_json``, ``errors.not_an_object``,
    ``errors.missing_text``, ``errors.text_not_a_string``,
    ``errors.malformed_media``, ``errors.nested_too_deep`` (metadata no
    writer could store), and once per damaged file ``errors.truncated`` or
    ``errors.corrupt_compression`` (the lines before the damage are read).
    """

    def __init__(self, paths: str | InputFile | Iterable[str | InputFile], **options: Any):
        """Matches the input files.

        Args:
            paths: JSONL files, directories or glob patterns (``.gz``,
                ``.zst``, ... decompressed by name), or matched files.
            **options: ``text_key``, ``id_key`` and ``default_metadata``, as
                :class:`~beamtrove.transforms.readers.rows.RowReader` takes
                them, and its reading options.
        """
        super().__init__(paths, JsonlParser, **options)
