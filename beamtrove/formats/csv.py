"""Reading CSV files (plain or compressed) into documents."""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator
from typing import BinaryIO

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import SUFFIXES
from beamtrove.formats.compression import DamagedStream
from beamtrove.formats.records import Outcome, RecordParser
from beamtrove.formats.rows import RowError, RowFields
from beamtrove.fs import InputFile

__all__ = ["CsvParser"]


class CsvParser(RecordParser):
    """Turns each row of a CSV file with a header line into a document.

    A row with more or fewer fields than the header becomes a dead letter with
    the number of the line it ends on; undecodable bytes end the file with a
    dead letter for their line, as does damage to a compressed file (see
    :class:`~beamtrove.formats.compression.DamagedStream`), after
    the rows before it. The encoding must keep ``\\n`` a single byte (UTF-8
    and the single-byte encodings do).
    """

    suffixes = SUFFIXES["csv"]
    compression = "infer"

    def __init__(self, fields: RowFields = RowFields(), delimiter: str = ",", encoding: str = "utf-8"):
        self._fields = fields
        self._delimiter = delimiter
        self._encoding = encoding

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        csv.field_size_limit(sys.maxsize)
        # Decoding line by line makes a decoding error surface at its own line,
        # after every row before it was emitted.
        lines = (line.decode(self._encoding) for line in io.BufferedReader(stream, 1 << 20))
        rows = csv.DictReader(lines, delimiter=self._delimiter)
        index = 0
        # The line the last whole row ended on: a line the damage cuts may hold a row's first lines.
        row_end = 0
        try:
            for row in rows:
                if None in row or None in row.values():
                    yield DeadLetter(
                        step,
                        "malformed_row",
                        f"the row has a different number of fields than the header ({len(rows.fieldnames)})",
                        file=file.url,
                        line=rows.line_num,
                    )
                else:
                    try:
                        yield self._fields.to_document(row, file, index)
                    except RowError as error:
                        yield error.dead_letter(step, file, rows.line_num)
                index += 1
                row_end = rows.line_num
        except (UnicodeDecodeError, csv.Error) as exc:
            yield DeadLetter(step, "malformed_csv", str(exc), file=file.url, line=rows.line_num + 1)
        except DamagedStream as damage:
            lost_from = (row_end or rows.line_num) + 1
            message = f"{damage.message}; the rows from line {lost_from} on are lost"
            yield DeadLetter(step, damage.reason, message, file=file.url, offset=damage.offset, line=lost_from)
