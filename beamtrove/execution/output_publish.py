"""Publishing a run's staged outputs into its output folder, so that a publish stopped at any instant is finished.

Publishing can be stopped at any instant and finished later. Its record in
the run's staging folder says where it is: once it says the run is complete
(the commit point, written before anything of the output is touched), the
old outputs are moved aside into the staging folder, the new ones moved in,
and only then is the staging folder, the old outputs with it, removed. Each
entry moved is noted in the record before its source is deleted, so on
object stores, where a move is a copy and a delete, an entry found in both
places is taken from the side the record names. Whoever finds the record
(the run itself, the next :func:`~beamtrove.execution.output.plan_output`, or
a command that reads the folder, :func:`~beamtrove.run_output.ready_to_read`)
goes on from where it stopped: the old output and the new one are both whole
at every instant, one in the folder, the other in its staging folder, but
for the entries moved so far.

:class:`~beamtrove.execution.output.OutputPlan` stages and publishes through
these steps; :func:`recover_output` finishes, or undoes, what a run left in
flight with them. Nothing here imports Beam: the commands that read a run
folder finish a publish without it.
"""

from __future__ import annotations

import logging
import os
import posixpath
import signal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from beamtrove.fs import filesystem, is_hidden, is_local, join, read_json_record, write_json
from beamtrove.layout import JOB_DIR, STAGING_DIR

__all__ = [
    "COMMITTED_PHASES",
    "discard_staging",
    "folder_names",
    "name_listing",
    "publish_begun",
    "publish_phase",
    "publish_staged",
    "reached",
    "record_staged",
    "recover_output",
]

_LOGGER = logging.getLogger(__name__)
_NAMES_SHOWN = 5

# Beside a run's staged outputs, not one of them (its name starts with "_"): made when the run is built, gone once
# its outputs are published.
_PUBLISH_RECORD = "_publish.json"
# In a run's staging folder: the old outputs publishing moved aside, removed with the staging folder once the new
# ones are in place.
_REPLACED_DIR = "_replaced"
# The phases of a publish record: the run is still writing (nothing of the output is touched; a run that stops
# here is undone); it is complete and its old outputs are being moved aside, then its new ones moved in (whoever
# finds the record finishes the publish).
_STAGED = "staged"
_PUBLISHING = "publishing"
_MOVING_IN = "moving in"
#: The phases of a record whose publish has begun: from then on it is finished, never undone.
COMMITTED_PHASES = (_PUBLISHING, _MOVING_IN)
# Test-only fault injection: the publish step at which a process stops itself, and the signal it stops with
# (SIGKILL by default, or SIGINT as Ctrl-C sends). Used by the tests of interrupted publishes, never set otherwise.
_STOP_AT = "BEAMTROVE_TEST_PUBLISH_STOP_AT"
_STOP_WITH = "BEAMTROVE_TEST_PUBLISH_STOP_WITH"


def folder_names(fs, path: str) -> list[str]:
    """The names of the entries of the folder ``path``, sorted."""
    return sorted(posixpath.basename(entry.rstrip("/")) for entry in fs.ls(path, detail=False))


def name_listing(names: Sequence[str]) -> str:
    """The first names of ``names`` for a message, and how many more there are."""
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def record_staged(run_dir: str, replaces: Iterable[str], storage_options: Mapping[str, Any]) -> None:
    """Writes the publish record of a run that is still writing into ``run_dir``, naming the old outputs it replaces."""
    write_json({"phase": _STAGED, "replaces": list(replaces)}, join(run_dir, _PUBLISH_RECORD), storage_options)


def publish_phase(run_dir: str, storage_options: Mapping[str, Any]) -> str | None:
    """The phase the publish record of a run's staging folder is in; None when it has none.

    A record of beamtrove 0.12.1 or older has no phase: its run was still writing, or its publish cannot be
    finished; staged is what it is taken for.
    """
    record = read_json_record(join(run_dir, _PUBLISH_RECORD), storage_options)
    return None if record is None else record.get("phase", _STAGED)


def reached(step: str) -> None:
    """Stops this process at ``step`` of a publish when a test asks for it (:data:`_STOP_AT`); nothing otherwise."""
    if os.environ.get(_STOP_AT) == step:
        os.kill(os.getpid(), getattr(signal, os.environ.get(_STOP_WITH, "SIGKILL")))


class _TakenOver(Exception):
    """The publish record on the store is no longer the one this process is working from."""


def publish_staged(output: str, run_dir: str, storage_options: Mapping[str, Any]) -> list[str]:
    """Publishes, or goes on publishing, the outputs staged in ``run_dir``; returns their names (none: done already).

    The steps, each recorded before the next begins: the record says the
    run is complete and lists its outputs (the commit point); each old
    output is moved aside into the staging folder; the record says they
    all are; each new one is moved in; the staging folder, the old outputs
    with it, is removed.

    Before each move, the record on the store must still be the one this
    process wrote last: a process frozen longer than the lock's timeout (a
    suspended machine) may find its publish finished by another process that
    took the lock over, and must then touch nothing (its old outputs' names
    are the new outputs' by then).
    """
    try:
        return _publish(output, run_dir, storage_options)
    except _TakenOver:
        _LOGGER.warning(
            "%s: another process took over this run's publish while it was stopped, and finishes it", output
        )
        return []


def _publish(output: str, run_dir: str, storage_options: Mapping[str, Any]) -> list[str]:
    fs, run_path = filesystem(run_dir, storage_options)
    record_url = join(run_dir, _PUBLISH_RECORD)
    record = read_json_record(record_url, storage_options)
    if record is None:
        return []
    if record.get("phase", _STAGED) == _STAGED:
        reached("sealing")
        staged = [name for name in folder_names(fs, run_path) if not is_hidden(name)]
        record = {
            "phase": _PUBLISHING,
            "replaces": record["replaces"],
            "publishes": staged,
            "moved_aside": [],
            "moved_in": [],
        }
        write_json(record, record_url, storage_options)
        reached("sealed")
    if record["phase"] == _PUBLISHING:
        replaced = join(run_dir, _REPLACED_DIR)
        for name in record["replaces"]:
            _move_entry(join(output, name), join(replaced, name), record, "moved_aside", record_url, storage_options)
        # From here on, a name of an old output is that of a new one: what is left of the old is in the staging.
        record["phase"] = _MOVING_IN
        write_json(record, record_url, storage_options)
    for name in record["publishes"]:
        _move_entry(join(run_dir, name), join(output, name), record, "moved_in", record_url, storage_options)
    reached("published")
    fs.rm(run_path, recursive=True)
    reached("staging removed")
    # A staged run's job directory is done with once a run published; one a killed run left is stale.
    job_fs, job_path = filesystem(join(output, JOB_DIR), storage_options)
    if job_fs.exists(job_path):
        job_fs.rm(job_path, recursive=True)
    return record["publishes"]


def _move_entry(
    source: str, destination: str, record: dict[str, Any], moved: str, record_url: str, storage_options
) -> None:
    """Moves a file or folder unless ``record[moved]`` notes it moved, then notes it, then removes the source.

    Unnoted, the source is whole and the destination, if any, a copy cut
    short; noted, the destination is whole and the source, if any, a delete
    cut short. On a local disk the move is a rename: a source gone means it
    was moved.
    """
    name = posixpath.basename(destination)
    fs, source_path = filesystem(source, storage_options)
    _, destination_path = filesystem(destination, storage_options)
    _still_ours(record, record_url, storage_options)
    if name not in record[moved]:
        if fs.exists(source_path):
            if fs.exists(destination_path):
                fs.rm(destination_path, recursive=True)
            fs.makedirs(posixpath.dirname(destination_path), exist_ok=True)
            if is_local(source):
                fs.mv(source_path, destination_path)
            else:
                fs.copy(source_path, destination_path, recursive=fs.isdir(source_path))
        reached(f"{moved} {name}")
        record[moved].append(name)
        write_json(record, record_url, storage_options)
        reached(f"{moved} {name} noted")
        _still_ours(record, record_url, storage_options)
    if fs.exists(source_path):
        fs.rm(source_path, recursive=True)


def _still_ours(record: dict[str, Any], record_url: str, storage_options) -> None:
    """Raises :class:`_TakenOver` unless the publish record on the store is ``record``, as this process left it."""
    if read_json_record(record_url, storage_options) != record:
        raise _TakenOver


def _staged_runs(output: str, storage_options: Mapping[str, Any]) -> list[str]:
    """The staging folders of the runs found in flight in ``output``, by name; none when it has no staging folder."""
    staging = join(output, STAGING_DIR)
    fs, staging_path = filesystem(staging, storage_options)
    if not fs.exists(staging_path):
        return []
    return [join(staging, run) for run in folder_names(fs, staging_path)]


def publish_begun(output: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether a run began publishing into ``output`` and has not finished: it holds part of that run's outputs."""
    storage_options = dict(storage_options or {})
    runs = _staged_runs(output, storage_options)
    return any(publish_phase(run_dir, storage_options) in COMMITTED_PHASES for run_dir in runs)


def discard_staging(output: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Removes the staging folder of ``output``: what runs into it left in flight."""
    fs, path = filesystem(join(output, STAGING_DIR), storage_options)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def recover_output(output: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Finishes the publish a run was stopped in, removes what unfinished runs staged; says which, returns it.

    Call it holding the lock of ``output``
    (:func:`~beamtrove.execution.output_lock.lock_output`): a staging folder is
    then never that of a live run.

    Returns:
        One line per run found in flight: whether its publish was finished
        (the folder holds its outputs) or it was undone (the folder holds
        what it held before it). Each is also logged as a warning.
    """
    storage_options = dict(storage_options or {})
    runs = _staged_runs(output, storage_options)
    if not runs:
        return []
    said = []
    for run_dir in runs:
        phase = publish_phase(run_dir, storage_options)
        if phase in COMMITTED_PHASES:
            published = publish_staged(output, run_dir, storage_options)
            said.append(
                f"{output}: finished publishing the outputs of a run stopped while publishing them "
                f"({name_listing(published) or 'nothing'}); the folder holds that run's outputs"
            )
        elif phase is not None:
            said.append(
                f"{output}: removed what a run that did not finish had staged; the folder holds what it held "
                "before that run"
            )
    discard_staging(output, storage_options)
    for line in said:
        _LOGGER.warning("%s", line)
    return said
