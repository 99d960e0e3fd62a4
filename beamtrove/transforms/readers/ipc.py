"""The Beam source of Arrow IPC files; :mod:`beamtrove.formats.ipc` parses them."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from beamtrove.formats.ipc import IpcParser
from beamtrove.fs import InputFile
from beamtrove.transforms.readers.rows import RowReader

__all__ = ["ReadIpc"]


class ReadIpc(RowReader):
    """Reads Arrow IPC files as documents, as DataTrove's ``IpcReader`` does.

    The file format and the stream format are both read, whichever a file is
    in (DataTrove's ``stream`` option is not needed). Tables laid out as
    beamtrove's and DataTrove's writers lay out documents (``text``, ``id``,
    ``media``, ``metadata``) read back unchanged; for other layouts, name the
    text and id columns, and every other column becomes metadata.

    Stats: ``in`` counts rows, ``out`` documents, ``errors.corrupt_ipc``
    (once per damaged file; the rows before the damage are read),
    ``errors.missing_text``, ``errors.text_not_a_string``,
    ``errors.malformed_media``, and for rows no writer could store
    ``errors.not_json`` (a binary or decimal column) and
    ``errors.nested_too_deep``.
    """

    def __init__(self, paths: str | InputFile | Iterable[str | InputFile], *, batch_size: int = 1024, **options: Any):
        """Matches the input files.

        Args:
            paths: Arrow IPC files, directories (searched for ``.arrow``,
                ``.arrows``, ``.ipc`` and ``.feather`` files) or glob patterns.
            batch_size: Rows turned into documents at a time.
            **options: ``text_key``, ``id_key`` and ``default_metadata``, as
                :class:`~beamtrove.transforms.readers.rows.RowReader` takes
                them (here, columns), and its reading options.
        """
        super().__init__(paths, functools.partial(IpcParser, batch_size=batch_size), **options)
