"""Refusing inputs that overlap a run's output: the run, or the next one, would read its own results.

:func:`check_separate` refuses an input inside the output, or an output
inside an input folder; :func:`check_auxiliary_inputs` refuses the same of
what a run reads besides its input (models, lists, indexes). Both take the
output's location as written (a local path made absolute), without reaching
its storage. An elastic job records its :func:`input_folders` when it is
prepared, so that ``elastic merge`` makes the same checks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from fsspec.core import split_protocol

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import FileListing, InputFile, input_folder

__all__ = ["check_auxiliary_inputs", "check_separate", "input_folders"]


def _location(url: str) -> tuple[str, str]:
    """``(protocol, path)`` of a path or URL, without reaching its storage: local paths made absolute."""
    protocol, path = split_protocol(url)
    if protocol in (None, "file", "local"):
        return "file", os.path.realpath(path)
    return protocol, path.rstrip("/")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def input_folders(patterns: Iterable[str], storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The folders input patterns read files from, local ones absolute: patterns :func:`check_separate` takes later.

    A file named outright reads no folder, and is left out.
    """
    folders = set()
    for pattern in patterns:
        folder = input_folder(pattern, storage_options)
        if folder is not None:
            protocol, _ = _location(pattern)
            folders.add(os.path.abspath(folder) if protocol == "file" else f"{protocol}://{folder}")
    return sorted(folders)


def check_separate(
    patterns: Iterable[str | InputFile | FileListing],
    files: Iterable[InputFile],
    output: str,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Refuses inputs and an output that overlap: a run would read its own results, or the next run would.

    Raises:
        ConfigurationError: An input file is inside ``output``, or ``output``
            is inside a folder an input pattern reads.
    """
    storage_options = dict(storage_options or {})
    protocol, output_path = _location(output)
    for file in files:
        file_protocol, path = _location(file.url)
        if file_protocol == protocol and _inside(path, output_path):
            raise ConfigurationError(
                f"The input {file.url} is inside --output {output}: a run must not read what it writes. Write to "
                "another --output."
            )
    for pattern in patterns:
        if not isinstance(pattern, str):  # files named one by one (listed, or given with ranges) read no folder
            continue
        pattern_protocol, _ = _location(pattern)
        folder = input_folder(pattern, storage_options) if pattern_protocol == protocol else None
        if folder is not None and _inside(output_path, os.path.realpath(folder) if protocol == "file" else folder):
            raise ConfigurationError(
                f"--output {output} is inside the input folder {pattern}: the next run over that input would read "
                "this run's results. Write to a folder outside the input."
            )


def check_auxiliary_inputs(paths: Iterable[tuple[str, str]], output: str) -> None:
    """Refuses files and folders a run reads besides its input (models, lists, indexes) that overlap ``output``.

    One inside ``output`` is what ``--overwrite`` deletes, and an output
    inside one (an index folder) adds this run's results to it.

    Args:
        paths: ``(option, path)`` pairs, as :func:`~beamtrove.options.paths_read` lists them.
        output: The run's output folder.

    Raises:
        ConfigurationError: One overlaps ``output``; the message names the option and the path.
    """
    protocol, output_path = _location(output)
    for option, path in paths:
        path_protocol, location = _location(path)
        if path_protocol != protocol:
            continue
        if _inside(location, output_path):
            raise ConfigurationError(
                f"{option} {path} is inside --output {output}: a run must not write where it reads, and --overwrite "
                f"would delete it. Move it out of the output folder, or write to another --output."
            )
        if _inside(output_path, location):
            raise ConfigurationError(
                f"--output {output} is inside {option} {path}: a run must not write where it reads. Write to a "
                "folder outside it."
            )
