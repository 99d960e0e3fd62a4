"""The ``--input_ranges`` file: a list of input files and the byte ranges of them a run reads."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from beamtrove.fs import InputFile, open_url

__all__ = ["input_ranges_json", "read_input_ranges", "write_input_ranges"]


def input_ranges_json(files: Iterable[InputFile]) -> bytes:
    """The content of an ``--input_ranges`` file listing ``files`` (and their byte ranges)."""
    return json.dumps([dataclasses.asdict(file) for file in files], indent=1).encode()


def write_input_ranges(files: Iterable[InputFile], url: str) -> None:
    """Writes the input files (and their byte ranges) that ``--input_ranges`` reads back."""
    with open_url(url, "wb") as out:
        out.write(input_ranges_json(files))


def read_input_ranges(url: str, storage_options: Mapping[str, Any] | None = None) -> list[InputFile]:
    """The input files listed by :func:`write_input_ranges`.

    Raises:
        FileNotFoundError: ``url`` does not exist.
        ValueError: The file does not hold such a list.
    """
    with open_url(url, "rb", storage_options) as raw:
        try:
            entries = json.loads(raw.read())
            files = [InputFile(**entry) for entry in entries]
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{url} is not a list of input files with url, name and size: {exc}") from exc
    if not files:
        raise ValueError(f"{url} lists no input file.")
    return files
