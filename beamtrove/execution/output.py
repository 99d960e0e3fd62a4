"""The output folder contract: an output folder holds exactly what its run produced.

Before a run, :func:`plan_output` checks the output folder:

* a folder that holds anything is refused, naming what is there, unless the
  run replaces it (``--overwrite``) or continues it (``--resumable`` on the
  output of a resumable run with the same configuration, see
  :mod:`beamtrove.execution.resume`);
* an input inside the output, or an output inside an input folder, is
  refused: the run, or the next one, would read its own results;
* what earlier runs left in flight (``.beamtrove-staging/``) is removed.

An ordinary run then writes everything under
``<output>/.beamtrove-staging/<run>/``, and the graph's last step,
:class:`Publish`, moves it into the output folder once every writer has
finished, replacing the old outputs with ``--overwrite``. A run that fails or
is interrupted publishes nothing: the output folder keeps what it held. A
resumable run publishes input by input instead
(:mod:`beamtrove.transforms.per_input`).

Publishing happens inside the pipeline, so a Dataflow job whose launcher
does not wait for it publishes its outputs too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import apache_beam as beam
from fsspec.core import split_protocol

from beamtrove.fs import InputFile, filesystem, input_folder, is_hidden, join, move, write_json
from beamtrove.layout import RESUME_CONFIG_FILE, STAGING_DIR
from beamtrove.options import ConfigurationError

__all__ = ["OutputPlan", "Publish", "check_separate", "discard_staging", "output_entries", "plan_output"]

_LOGGER = logging.getLogger(__name__)
_NAMES_SHOWN = 5
# Beside a run's staged outputs, not one of them (its name starts with "_"): made when the run is built, gone once
# its outputs are published.
_PUBLISH_RECORD = "_publish.json"


@dataclasses.dataclass(frozen=True)
class OutputPlan:
    """Where a run writes and how its outputs reach the output folder.

    Attributes:
        output: The output folder.
        write_to: Where the run's writers write: a staging folder inside
            ``output`` that :class:`Publish` moves into place, or ``output``
            itself for a resumable run.
        replaces: The old outputs publishing removes: with ``--overwrite``,
            everything ``output`` held when the run was built.
        creates: Whether the run creates ``output`` (it did not exist).
        storage_options: fsspec filesystem options.
    """

    output: str
    write_to: str
    replaces: tuple[str, ...] = ()
    creates: bool = False
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def staged(self) -> bool:
        return self.write_to != self.output

    def stage(self) -> None:
        """Makes the staging folder, recording the old outputs that publishing removes; nothing when not staged."""
        if self.staged:
            write_json({"remove": list(self.replaces)}, join(self.write_to, _PUBLISH_RECORD), self.storage_options)

    def abandon(self) -> None:
        """Removes what a run that did not succeed left in flight, and ``output`` if the run made it for nothing.

        Runs into one output do not overlap, so the whole staging folder is this run's.
        """
        discard_staging(self.output, self.storage_options)
        fs, path = filesystem(self.output, self.storage_options)
        if self.creates and fs.exists(path) and not fs.ls(path, detail=False):
            fs.rmdir(path)


def output_entries(output: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The names in the folder ``output`` other than the staging folder, sorted; empty when it does not exist.

    Raises:
        ConfigurationError: ``output`` is a file.
    """
    fs, path = filesystem(output, storage_options)
    if not fs.exists(path):
        return []
    if not fs.isdir(path):
        raise ConfigurationError(f"--output {output} is a file: pass a folder (it is created if missing).")
    return [name for name in _names(fs, path) if name != STAGING_DIR]


def _names(fs, path: str) -> list[str]:
    """The names of the entries of the folder ``path``, sorted."""
    return sorted(posixpath.basename(entry.rstrip("/")) for entry in fs.ls(path, detail=False))


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def plan_output(
    output: str,
    *,
    overwrite: bool = False,
    resumable: bool = False,
    restart: bool = False,
    inspect: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> OutputPlan:
    """Checks ``output`` for a new run, removes what earlier runs left in flight, and says where to write.

    A resumable run into the output of a resumable run, or one told to
    ``restart`` it, leaves the output to
    :func:`~beamtrove.execution.resume.pending_inputs`, which verifies or
    clears it. With ``inspect`` off, the output is not looked at: the plan of
    a graph built offline or of a dry run.

    Raises:
        ConfigurationError: ``output`` is a file, or holds something the run
            may not replace; the message names it and the options that would.
    """
    storage_options = dict(storage_options or {})
    if resumable and overwrite:
        raise ConfigurationError(
            "--overwrite replaces an output when a run succeeds, but a --resumable run builds its output input by "
            "input: pass --restart to start a resumable output over, or leave out --resumable."
        )
    entries = output_entries(output, storage_options) if inspect else []
    creates = inspect and not _exists(output, storage_options)
    if entries and not overwrite:
        if not resumable:
            raise ConfigurationError(
                f"--output {output} already holds {_listing(entries)}: choose another --output, pass --overwrite "
                "to replace it once this run succeeds, or --resumable to continue a resumable run in it."
            )
        if RESUME_CONFIG_FILE not in entries and not restart:
            raise ConfigurationError(
                f"--output {output} holds {_listing(entries)} from a run that was not --resumable, which a resumable "
                "run cannot verify or continue: choose another --output, or pass --restart to delete it and start "
                "over."
            )
    if inspect:
        discard_staging(output, storage_options)
    if resumable:
        return OutputPlan(output, output, creates=creates, storage_options=storage_options)
    staging = join(output, STAGING_DIR, uuid.uuid4().hex)
    replaces = tuple(entries) if overwrite else ()
    return OutputPlan(output, staging, replaces=replaces, creates=creates, storage_options=storage_options)


def _exists(url: str, storage_options: Mapping[str, Any]) -> bool:
    fs, path = filesystem(url, storage_options)
    return fs.exists(path)


def discard_staging(output: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Removes the staging folder of ``output``: what runs into it left in flight."""
    fs, path = filesystem(join(output, STAGING_DIR), storage_options)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def _location(url: str) -> tuple[str, str]:
    """``(protocol, path)`` of a path or URL, without reaching its storage: local paths made absolute."""
    protocol, path = split_protocol(url)
    if protocol in (None, "file", "local"):
        return "file", os.path.realpath(path)
    return protocol, path.rstrip("/")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def check_separate(
    patterns: Iterable[str | InputFile],
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
        if isinstance(pattern, InputFile):
            continue
        pattern_protocol, _ = _location(pattern)
        folder = input_folder(pattern, storage_options) if pattern_protocol == protocol else None
        if folder is not None and _inside(output_path, os.path.realpath(folder) if protocol == "file" else folder):
            raise ConfigurationError(
                f"--output {output} is inside the input folder {pattern}: the next run over that input would read "
                "this run's results. Write to a folder outside the input."
            )


class _PublishFn(beam.DoFn):
    """Moves a run's staged outputs into the output folder, replacing the old ones when asked.

    Safe to retry: :meth:`OutputPlan.stage` recorded the old outputs to
    remove; once removed, the record says so, and outputs moved already are
    no longer staged. Once done, the staging folder is gone and a retry does
    nothing.
    """

    def __init__(self, plan: OutputPlan):
        self._plan = plan

    def process(self, files_written: int):
        plan = self._plan
        fs, staging = filesystem(plan.write_to, plan.storage_options)
        _, output = filesystem(plan.output, plan.storage_options)
        record = join(staging, _PUBLISH_RECORD)
        if not fs.exists(record):
            return
        with fs.open(record, "rb") as source:
            old = json.loads(source.read())["remove"]
        for name in old:
            if fs.exists(join(output, name)):
                fs.rm(join(output, name), recursive=True)
        if old:
            write_json({"remove": []}, join(plan.write_to, _PUBLISH_RECORD), plan.storage_options)
        staged = [name for name in _names(fs, staging) if not is_hidden(name)]
        for name in staged:
            if fs.exists(join(output, name)):
                fs.rm(join(output, name), recursive=True)
            move(join(plan.write_to, name), join(plan.output, name), plan.storage_options)
        discard_staging(plan.output, plan.storage_options)
        _LOGGER.info("published %s (%d files) to %s", ", ".join(staged) or "nothing", files_written, plan.output)
        yield files_written


class Publish(beam.PTransform):
    """Moves a run's staged outputs into its output folder once every file has been written.

    Applied to the files every writer of the run wrote (their results,
    flattened), it waits for all of them, then publishes once.
    """

    def __init__(self, plan: OutputPlan):
        super().__init__()
        self._plan = plan

    def expand(self, written_files):
        return (
            written_files
            | "CountWritten" >> beam.combiners.Count.Globally()
            | "MoveIntoPlace" >> beam.ParDo(_PublishFn(self._plan))
        )
