"""The output folder contract: an output folder holds exactly what its run produced.

Before a run, :func:`plan_output` takes the output folder's lock, then checks it:

* one run owns an output folder at a time: :func:`lock_output` refuses a
  second one, naming the owner (host, pid, start), and takes over the lock
  of a run that is gone (its process died on this host, or it has not
  renewed its heartbeat for :data:`LOCK_TIMEOUT_SECONDS`);
* a publish an earlier run was stopped in is finished, or, if the run had
  not finished, what it staged is removed, and a warning says which;
* a folder that holds anything is refused, naming what is there, unless the
  run replaces it (``--overwrite``) or continues it (``--resumable`` on the
  output of a resumable run with the same configuration, see
  :mod:`beamtrove.execution.resume`);
* an input inside the output, or an output inside an input folder, is
  refused: the run, or the next one, would read its own results.

An ordinary run then writes everything under
``<output>/.beamtrove-staging/<run>/``, and publishing moves it into the
output folder once every writer has finished, replacing the old outputs with
``--overwrite``. A run that fails or is interrupted before it publishes
leaves the output folder as it was. A resumable run publishes input by input
instead (:mod:`beamtrove.transforms.per_input`).

Publishing can be stopped at any instant and finished later. Its record in
the run's staging folder says where it is: once it says the run is complete
(the commit point, written before anything of the output is touched), the
old outputs are moved aside into the staging folder, the new ones moved in,
and only then is the staging folder, the old outputs with it, removed. Each
entry moved is noted in the record before its source is deleted, so on
object stores, where a move is a copy and a delete, an entry found in both
places is taken from the side the record names. Whoever finds the record
(the run itself, or the next :func:`plan_output`) goes on from where it
stopped: the old output and the new one are both whole at every instant,
one in the folder, the other in its staging folder, but for the entries
moved so far.

A local run (:func:`beamtrove.execution.run.run_pipeline`) publishes after
its pipeline, with its ``stats.json`` and ``report.html``; a graph built for
Dataflow publishes in its last step (:class:`Publish`), so a job whose
launcher does not wait for it publishes its outputs too. The lock covers the
launcher: it is held while the launching process runs (a local run until it
ends), not by the Dataflow workers of a job its launcher no longer waits for.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import posixpath
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import apache_beam as beam
from fsspec.core import split_protocol
from fsspec.implementations.local import LocalFileSystem

from beamtrove.fs import InputFile, filesystem, input_folder, is_hidden, join, write_json
from beamtrove.layout import LOCK_DIR, RESUME_CONFIG_FILE, STAGED_JOB_DIR, STAGING_DIR
from beamtrove.options import ConfigurationError
from beamtrove.processes import is_alive

__all__ = [
    "LOCK_TIMEOUT_SECONDS",
    "OutputLock",
    "OutputPlan",
    "Publish",
    "check_auxiliary_inputs",
    "check_separate",
    "discard_staging",
    "lock_output",
    "output_entries",
    "plan_output",
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
#: How long a lock whose heartbeat stopped stays its owner's; the heartbeat renews it every fifth of that.
LOCK_TIMEOUT_SECONDS = 120.0
_LOCK_OWNER = "owner.json"
_LOCK_TAKEOVER = "takeover.json"
# Test-only fault injection: the publish step at which a process stops itself, and the signal it stops with
# (SIGKILL by default, or SIGINT as Ctrl-C sends). Used by the tests of interrupted publishes, never set otherwise.
_STOP_AT = "BEAMTROVE_TEST_PUBLISH_STOP_AT"
_STOP_WITH = "BEAMTROVE_TEST_PUBLISH_STOP_WITH"


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
        lock: The run's hold on ``output``; None for a plan that does not
            look at the output (a graph built offline), and in the copy of
            the plan a pipeline's workers get.
    """

    output: str
    write_to: str
    replaces: tuple[str, ...] = ()
    creates: bool = False
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    lock: OutputLock | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def staged(self) -> bool:
        return self.write_to != self.output

    def stage(self) -> None:
        """Makes the staging folder, recording the old outputs that publishing replaces; nothing when not staged."""
        if self.staged:
            record = {"phase": _STAGED, "replaces": list(self.replaces)}
            write_json(record, join(self.write_to, _PUBLISH_RECORD), self.storage_options)

    def publish(self) -> list[str]:
        """Moves the staged outputs into the output folder, replacing the old ones; returns the names published.

        Safe to call again, by this run or any other, after an interrupt at
        any instant: it goes on from where the record says it stopped; once
        done, the staging folder is gone and a call does nothing.
        """
        published = _publish(self.output, self.write_to, self.storage_options)
        # The run owns the output: the staging folder holds nothing of another run.
        discard_staging(self.output, self.storage_options)
        return published

    def committed(self) -> bool:
        """Whether the run's publish has begun: from then on it is finished, never undone."""
        return self.staged and _phase(self.write_to, self.storage_options) in (_PUBLISHING, _MOVING_IN)

    def release(self) -> None:
        """Lets another run have the output folder."""
        if self.lock is not None:
            self.lock.release()

    def abandon(self) -> None:
        """Removes what a failed run left in flight, releases the lock, and removes ``output`` if made for nothing.

        The run owns the output, so the whole staging folder is its own; a
        publish it began is left for the next run to finish. A plan that
        never looked at the output (no lock: a graph built offline) leaves it
        untouched.
        """
        if self.lock is None:
            return
        if not self.committed():
            discard_staging(self.output, self.storage_options)
        self.release()
        if self.creates:
            _remove_if_empty(self.output, self.storage_options)


def output_entries(output: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The names in the folder ``output`` other than the staging folder and the lock, sorted; empty when none.

    Raises:
        ConfigurationError: ``output`` is a file.
    """
    fs, path = filesystem(output, storage_options)
    if not fs.exists(path):
        return []
    if not fs.isdir(path):
        raise ConfigurationError(f"--output {output} is a file: pass a folder (it is created if missing).")
    return [name for name in _names(fs, path) if name not in (STAGING_DIR, LOCK_DIR, STAGED_JOB_DIR)]


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
    """Takes the lock of ``output`` for a new run, checks it, recovers what earlier runs left, says where to write.

    A resumable run into the output of a resumable run, or one told to
    ``restart`` it, leaves the output to
    :func:`~beamtrove.execution.resume.pending_inputs`, which verifies or
    clears it. With ``inspect`` off, the output is not looked at, nor
    locked: the plan of a graph built offline or of a dry run. The plan
    holds the lock until :meth:`OutputPlan.release` or
    :meth:`OutputPlan.abandon`.

    Raises:
        ConfigurationError: ``output`` is a file, another run owns it, or it
            holds something the run may not replace; the message names it
            and the options that would.
    """
    storage_options = dict(storage_options or {})
    if resumable and overwrite:
        raise ConfigurationError(
            "--overwrite replaces an output when a run succeeds, but a --resumable run builds its output input by "
            "input: pass --restart to start a resumable output over, or leave out --resumable."
        )
    if not inspect:
        return _new_plan(output, resumable, (), False, storage_options, None)
    output_entries(output, storage_options)  # refuses a file before anything is written
    creates = not _exists(output, storage_options)
    lock = lock_output(output, storage_options)
    try:
        recover_output(output, storage_options)
        entries = output_entries(output, storage_options)
        if entries and not overwrite:
            if not resumable:
                raise ConfigurationError(
                    f"--output {output} already holds {_listing(entries)}: choose another --output, pass "
                    "--overwrite to replace it once this run succeeds, or --resumable to continue a resumable run "
                    "in it."
                )
            if RESUME_CONFIG_FILE not in entries and not restart:
                raise ConfigurationError(
                    f"--output {output} holds {_listing(entries)} from a run that was not --resumable, which a "
                    "resumable run cannot verify or continue: choose another --output, or pass --restart to delete "
                    "it and start over."
                )
    except BaseException:
        lock.release()
        if creates:
            _remove_if_empty(output, storage_options)
        raise
    replaces = tuple(entries) if overwrite else ()
    return _new_plan(output, resumable, replaces, creates, storage_options, lock)


def _new_plan(
    output: str,
    resumable: bool,
    replaces: tuple[str, ...],
    creates: bool,
    storage_options: Mapping[str, Any],
    lock: OutputLock | None,
) -> OutputPlan:
    write_to = output if resumable else join(output, STAGING_DIR, uuid.uuid4().hex)
    return OutputPlan(output, write_to, replaces, creates, storage_options, lock)


def _exists(url: str, storage_options: Mapping[str, Any]) -> bool:
    fs, path = filesystem(url, storage_options)
    return fs.exists(path)


def _remove_if_empty(folder: str, storage_options: Mapping[str, Any]) -> None:
    fs, path = filesystem(folder, storage_options)
    if fs.exists(path) and not fs.ls(path, detail=False):
        fs.rmdir(path)


def discard_staging(output: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Removes the staging folder of ``output``: what runs into it left in flight."""
    fs, path = filesystem(join(output, STAGING_DIR), storage_options)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def recover_output(output: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Finishes the publish a run was stopped in, removes what unfinished runs staged; says which, returns it.

    Call it holding the lock of ``output`` (:func:`lock_output`): a staging
    folder is then never that of a live run.

    Returns:
        One line per run found in flight: whether its publish was finished
        (the folder holds its outputs) or it was undone (the folder holds
        what it held before it). Each is also logged as a warning.
    """
    storage_options = dict(storage_options or {})
    staging = join(output, STAGING_DIR)
    fs, staging_path = filesystem(staging, storage_options)
    if not fs.exists(staging_path):
        return []
    said = []
    for run in _names(fs, staging_path):
        run_dir = join(staging, run)
        phase = _phase(run_dir, storage_options)
        if phase in (_PUBLISHING, _MOVING_IN):
            published = _publish(output, run_dir, storage_options)
            said.append(
                f"{output}: finished publishing the outputs of a run stopped while publishing them "
                f"({_listing(published) or 'nothing'}); the folder holds that run's outputs"
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


def _read_json(url: str, storage_options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON object in ``url``; None when it is missing or not one."""
    fs, path = filesystem(url, storage_options)
    try:
        content = json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def _phase(run_dir: str, storage_options: Mapping[str, Any]) -> str | None:
    """The phase the publish record of a run's staging folder is in; None when it has none.

    A record of beamtrove 0.12.1 or older has no phase: its run was still writing, or its publish cannot be
    finished; staged is what it is taken for.
    """
    record = _read_json(join(run_dir, _PUBLISH_RECORD), storage_options)
    return None if record is None else record.get("phase", _STAGED)


def _reached(step: str) -> None:
    """Stops this process at ``step`` of a publish when a test asks for it (:data:`_STOP_AT`); nothing otherwise."""
    if os.environ.get(_STOP_AT) == step:
        os.kill(os.getpid(), getattr(signal, os.environ.get(_STOP_WITH, "SIGKILL")))


def _publish(output: str, run_dir: str, storage_options: Mapping[str, Any]) -> list[str]:
    """Publishes, or goes on publishing, the outputs staged in ``run_dir``; returns their names (none: done already).

    The steps, each recorded before the next begins: the record says the
    run is complete and lists its outputs (the commit point); each old
    output is moved aside into the staging folder; the record says they
    all are; each new one is moved in; the staging folder, the old outputs
    with it, is removed.
    """
    fs, run_path = filesystem(run_dir, storage_options)
    record_url = join(run_dir, _PUBLISH_RECORD)
    record = _read_json(record_url, storage_options)
    if record is None:
        return []
    if record.get("phase", _STAGED) == _STAGED:
        _reached("sealing")
        staged = [name for name in _names(fs, run_path) if not is_hidden(name)]
        record = {
            "phase": _PUBLISHING,
            "replaces": record["replaces"],
            "publishes": staged,
            "moved_aside": [],
            "moved_in": [],
        }
        write_json(record, record_url, storage_options)
        _reached("sealed")
    if record["phase"] == _PUBLISHING:
        replaced = join(run_dir, _REPLACED_DIR)
        for name in record["replaces"]:
            _move_entry(join(output, name), join(replaced, name), record, "moved_aside", record_url, storage_options)
        # From here on, a name of an old output is that of a new one: what is left of the old is in the staging.
        record["phase"] = _MOVING_IN
        write_json(record, record_url, storage_options)
    for name in record["publishes"]:
        _move_entry(join(run_dir, name), join(output, name), record, "moved_in", record_url, storage_options)
    _reached("published")
    fs.rm(run_path, recursive=True)
    # A staged run's job directory is done with once a run published; one a killed run left is stale.
    job_fs, job_path = filesystem(join(output, STAGED_JOB_DIR), storage_options)
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
    if name not in record[moved]:
        if fs.exists(source_path):
            if fs.exists(destination_path):
                fs.rm(destination_path, recursive=True)
            fs.makedirs(posixpath.dirname(destination_path), exist_ok=True)
            if isinstance(fs, LocalFileSystem):
                fs.mv(source_path, destination_path)
            else:
                fs.copy(source_path, destination_path, recursive=fs.isdir(source_path))
        _reached(f"{moved} {name}")
        record[moved].append(name)
        write_json(record, record_url, storage_options)
        _reached(f"{moved} {name} noted")
    if fs.exists(source_path):
        fs.rm(source_path, recursive=True)


@dataclasses.dataclass
class OutputLock:
    """A run's hold on an output folder: ``<output>/.beamtrove-lock/owner.json``, created only if absent.

    The claim names its owner (host, pid, start) and a token; a heartbeat
    thread rewrites it every fifth of the timeout with the time, so only the
    lock of a run that is gone goes stale. :func:`lock_output` takes one.
    """

    folder: str
    claim: dict[str, Any]
    timeout: float
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def _owner(self) -> str:
        return join(self.folder, _LOCK_OWNER)

    def owned(self) -> bool:
        """Whether the lock is still this claim (not released, nor taken over as stale)."""
        held = _read_json(self._owner, self.storage_options)
        return held is not None and held.get("token") == self.claim["token"]

    def _beat(self) -> None:
        while not self._stop.wait(self.timeout / 5):
            if not self.owned():
                return
            write_json({**self.claim, "heartbeat": time.time()}, self._owner, self.storage_options)

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="beamtrove-output-lock", daemon=True)
        self._thread.start()
        atexit.register(self.release)

    def release(self) -> None:
        """Stops the heartbeat and removes the lock if it is still this claim; again, nothing."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        atexit.unregister(self.release)
        if self.owned():
            fs, path = filesystem(self.folder, self.storage_options)
            fs.rm(path, recursive=True)


def lock_output(
    output: str, storage_options: Mapping[str, Any] | None = None, timeout: float = LOCK_TIMEOUT_SECONDS
) -> OutputLock:
    """Takes the lock of the folder ``output`` (made if missing), or takes it over from a run that is gone.

    A lock is stale when its heartbeat is older than ``timeout`` seconds, or
    its owner ran on this host and its process is gone (or is this one: a
    process runs one run at a time); taking it over is logged.

    Raises:
        ConfigurationError: Another run holds the lock; the message names it.
    """
    storage_options = dict(storage_options or {})
    folder = join(output, LOCK_DIR)
    fs, path = filesystem(folder, storage_options)
    fs.makedirs(path, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    claim = {"host": socket.gethostname(), "pid": os.getpid(), "started": started, "token": uuid.uuid4().hex}
    owner = join(path, _LOCK_OWNER)
    for attempt in range(2):
        try:
            with fs.open(owner, "xb") as out:
                out.write(json.dumps({**claim, "heartbeat": time.time()}).encode())
            break
        except FileExistsError:
            held = _read_json(join(folder, _LOCK_OWNER), storage_options)
            if attempt or not _take_over(folder, held, timeout, storage_options):
                raise ConfigurationError(_in_use(output, held, timeout)) from None
    lock = OutputLock(folder, claim, timeout, storage_options)
    lock.start_heartbeat()
    return lock


def _in_use(output: str, held: dict[str, Any] | None, timeout: float) -> str:
    owner = (
        f"host {held.get('host')}, pid {held.get('pid')}, started {held.get('started')}"
        if held
        else "an owner whose claim cannot be read yet"
    )
    return (
        f"--output {output} is in use by another run ({owner}): wait until it ends or choose another --output; "
        f"its lock {join(output, LOCK_DIR)} is taken over once that run is gone ({timeout:.0f} s without heartbeat)."
    )


def _stale(held: dict[str, Any] | None, timeout: float) -> str | None:
    """Why the claim ``held`` is stale, or None when its owner may be running."""
    if held is None:
        return None
    if held.get("host") == socket.gethostname():
        pid = held.get("pid")
        if pid == os.getpid():
            return "it was this process's"
        if isinstance(pid, int) and not is_alive(pid):
            return "its process is gone"
    heartbeat = held.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or time.time() - heartbeat >= timeout:
        return f"no heartbeat for {timeout:.0f} s"
    return None

    return True


def _take_over(folder: str, held: dict[str, Any] | None, timeout: float, storage_options) -> bool:
    """Removes the claim ``held`` if it is stale and still there; True when the lock can now be taken.

    A short-lived takeover guard, itself created only if absent, makes the
    check and the removal one step: without it, two runs could both remove
    a stale claim and the second remove the fresh one of the first.
    """
    why = _stale(held, timeout)
    if why is None:
        return False
    fs, path = filesystem(folder, storage_options)
    guard = join(path, _LOCK_TAKEOVER)
    try:
        with fs.open(guard, "xb") as out:
            out.write(json.dumps({"at": time.time()}).encode())
    except FileExistsError:
        # A guard is held for milliseconds; one as old as the timeout belongs to a run that died holding it.
        taken = _read_json(join(folder, _LOCK_TAKEOVER), storage_options) or {}
        if time.time() - taken.get("at", 0) >= timeout:
            with contextlib.suppress(FileNotFoundError):
                fs.rm(guard)
        return False
    try:
        if _read_json(join(folder, _LOCK_OWNER), storage_options) != held:
            return False
        with contextlib.suppress(FileNotFoundError):
            fs.rm(join(path, _LOCK_OWNER))
        _LOGGER.warning(
            "took over the lock of %s from host %s, pid %s, started %s: %s",
            posixpath.dirname(folder),
            held.get("host"),
            held.get("pid"),
            held.get("started"),
            why,
        )
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(guard)


class _PublishFn(beam.DoFn):
    """Publishes a run's staged outputs (:meth:`OutputPlan.publish`): safe to retry, and done once."""

    def __init__(self, plan: OutputPlan):
        self._plan = plan

    def process(self, files_written: int):
        published = self._plan.publish()
        _LOGGER.info(
            "published %s (%d files) to %s", ", ".join(published) or "nothing", files_written, self._plan.output
        )
        yield files_written


class Publish(beam.PTransform):
    """Moves a run's staged outputs into its output folder once every file has been written.

    Applied to the files every writer of the run wrote (their results,
    flattened), it waits for all of them, then publishes once.
    """

    def __init__(self, plan: OutputPlan):
        super().__init__()
        # The lock stays with the launcher: workers get the plan without it.
        self._plan = dataclasses.replace(plan, lock=None)

    def expand(self, written_files):
        return (
            written_files
            | "CountWritten" >> beam.combiners.Count.Globally()
            | "MoveIntoPlace" >> beam.ParDo(_PublishFn(self._plan))
        )
