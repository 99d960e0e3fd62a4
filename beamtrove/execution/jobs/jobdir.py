"""The job directory: its layout, the verified manifest, task locks, attempts and once-only records.

Everything here relies only on POSIX semantics that shared file systems such
as NFS and Lustre keep: ``O_CREAT|O_EXCL`` creation, ``link`` failing on an
existing name, and ``rename``. A task is what one worker runs at a time: a
shard of a shard job, a stage's partition of a staged job
(:mod:`~beamtrove.execution.jobs.kinds`). A task's lock is a lease
(:mod:`beamtrove.execution.lease`), stale by its one rule.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from beamtrove import __version__
from beamtrove.execution.lease import Lease, LeasePath, lease_state, remove_stale, take_lease
from beamtrove.fs import is_local, read_json_record, staging_file

__all__ = [
    "ATTEMPT_FILE",
    "SHARDS_KIND",
    "STAGED_KIND",
    "DamagedRecord",
    "ElasticError",
    "JobDir",
    "attempt_status",
    "check_job_dir_is_posix",
    "config_sha256",
    "job_identity",
    "sha256_of",
    "write_once",
]

MANIFEST = "manifest.json"
MANIFEST_CHECKSUM = "manifest.sha256"
#: The layout of job directories this beamtrove reads (2: one done record for every kind, with its ``task``).
FORMAT_VERSION = 2
SUBDIRS = ("locks", "attempts", "done", "failed", "history")
#: An attempt's record in its directory: its worker, when it started and how it ended.
ATTEMPT_FILE = "attempt.json"

#: The manifest's ``kind`` of a job whose tasks are shards of the input, each run by a shard-safe pipeline.
SHARDS_KIND = "shards"
#: The manifest's ``kind`` of a job whose tasks are the stages of a pipeline with global steps.
STAGED_KIND = "staged"
# What status, verify and merge read of every done or failed record, and its type.
_DONE_FIELDS = {"task": str, "host": str, "pid": int, "records": int}
_FAILED_FIELDS = {"task": str, "host": str, "error": str}


class ElasticError(Exception):
    """A refused or failed operation on a job; the message says what to do."""


class DamagedRecord(ElasticError):
    """A task's done or failed record that is not the JSON object a worker writes; the message says what to do.

    Attributes:
        path: The record's file.
        damage: What is wrong with it, e.g. ``not JSON``.
    """

    def __init__(self, job_path: pathlib.Path, path: pathlib.Path, task: str, damage: str):
        super().__init__(
            f"{path} is damaged ({damage}): `beamtrove elastic retry --job-dir {job_path} --task {task}` "
            "archives it and runs the task again"
        )
        self.path = path
        self.damage = damage


def _record_damage(data: bytes, task: str, fields: dict[str, type]) -> str | None:
    """What makes ``data`` other than a record of ``task`` with ``fields``; None when it is one."""
    if not data.strip():
        return "empty"
    try:
        record = json.loads(data)
    except ValueError:  # UnicodeDecodeError included
        return "not JSON"
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for name, kind in fields.items():
        if name not in record:
            return f'no "{name}" in it'
        value = record[name]
        # bool is an int to Python, never to a record.
        if not isinstance(value, kind) or isinstance(value, bool):
            return f'"{name}" is {type(value).__name__}, not {kind.__name__}'
    if record["task"] != task:
        return f"it is the record of {record['task']}"
    return None


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_sha256(pipeline: str, args: list[str]) -> str:
    """The SHA-256 identifying a pipeline configuration: its name and arguments."""
    return sha256_of(json.dumps({"pipeline": pipeline, "args": args}, separators=(",", ":")).encode())


#: Manifest keys that may differ between two preparations of the same job.
_PROVENANCE_KEYS = ("created_at", "created_by")


def job_identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two manifests the same job: everything but when and where they were prepared."""
    return {key: value for key, value in manifest.items() if key not in _PROVENANCE_KEYS}


def write_once(path: pathlib.Path, record: dict[str, Any]) -> bool:
    """Writes ``record`` as ``path`` unless it exists; True when this call wrote it.

    The record is complete before it has its name (a hard link from a
    temporary file), so readers never see half of one, and of racing
    writers exactly one wins.
    """
    with staging_file(path, json.dumps(record, indent=1).encode()) as staging:
        try:
            os.link(staging, path)
            return True
        except FileExistsError:
            return False


def attempt_status(attempt_dir: pathlib.Path) -> str:
    """``running``, ``succeeded``, ``failed`` or ``interrupted``; an attempt whose worker died stays ``running``."""
    record = read_json_record(attempt_dir / ATTEMPT_FILE)
    return record.get("status", "running") if record else "running"


def check_job_dir_is_posix(path: str | os.PathLike, named: str | None = None, instead: str | None = None) -> None:
    """Refuses a job directory on an object store, before anything is made there.

    Its locks and records rely on ``O_EXCL`` creates, hard links and renames, which ``gs://`` and ``s3://`` do
    not have; taken as a local path, ``gs://b/job`` would be made in a folder named ``gs:`` on this machine.

    Args:
        path: The job directory.
        named: How the message names it; default ``--job-dir PATH``.
        instead: What the message says to do; default: put it on a POSIX file system.

    Raises:
        ElasticError: ``path`` is a URL of another file system than the local one; the message says what to use.
    """
    # A pathlib path is local; a string is a URL only if it holds "://" (checked first: fsspec is not imported
    # for a local job's status).
    if isinstance(path, str) and "://" in path and not is_local(path):
        raise ElasticError(
            f"{named or f'--job-dir {path}'} is on an object store, and a job directory needs a POSIX file system "
            "every worker shares (a local disk, NFS, Lustre) for its locks, links and renames: "
            f"{instead or 'put it on one; the inputs may stay on the object store'}."
        )


class JobDir:
    """Paths and operations of one job directory.

    Raises:
        ElasticError: ``path`` is on an object store (:func:`check_job_dir_is_posix`).
    """

    def __init__(self, path: str | os.PathLike):
        check_job_dir_is_posix(path)
        self.path = pathlib.Path(path).absolute()

    def lock_path(self, task: str) -> pathlib.Path:
        return self.path / "locks" / f"{task}.lock"

    def attempts_dir(self, task: str) -> pathlib.Path:
        return self.path / "attempts" / task

    def done_path(self, task: str) -> pathlib.Path:
        return self.path / "done" / f"{task}.json"

    def failed_path(self, task: str) -> pathlib.Path:
        return self.path / "failed" / f"{task}.json"

    def new_attempt_dir(self, task: str, host: str) -> pathlib.Path:
        """Makes the directory of the task's next attempt: ``attempts/<task>/<NN>-<host>-<pid>``."""
        safe_host = re.sub(r"[^A-Za-z0-9_.-]", "_", host)
        directory = self.attempts_dir(task) / f"{len(self.attempts(task)) + 1:02d}-{safe_host}-{os.getpid()}"
        directory.mkdir(parents=True)
        return directory

    def read_done(self, task: str) -> dict[str, Any] | None:
        """The task's done record; None when it has none.

        Raises:
            DamagedRecord: The record is empty, not JSON, or not a done record of
                this task (one of ``task``, ``host``, ``pid`` and ``records`` is
                missing or of another type).
        """
        return self._read_record(self.done_path(task), task, _DONE_FIELDS)

    def read_failed(self, task: str) -> dict[str, Any] | None:
        """The task's failure record; None when it has none.

        Raises:
            DamagedRecord: As :meth:`read_done`, for ``task``, ``host`` and ``error``.
        """
        return self._read_record(self.failed_path(task), task, _FAILED_FIELDS)

    def _read_record(self, path: pathlib.Path, task: str, fields: dict[str, type]) -> dict[str, Any] | None:
        # Workers write a record whole under its name (write_once): a record that does not parse was damaged later.
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:  # a folder in its place, or unreadable
            raise DamagedRecord(self.path, path, task, f"unreadable: {exc.strerror}") from None
        damage = _record_damage(data, task, fields)
        if damage is not None:
            raise DamagedRecord(self.path, path, task, damage)
        return json.loads(data)

    def _new_history_dir(self, task: str) -> pathlib.Path:
        directory = self.path / "history" / task / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        directory.mkdir(parents=True)
        return directory

    def archive(self, paths: list[pathlib.Path], task: str) -> None:
        """Moves ``paths`` together into a new ``history/<shard>/<time>-<random>/`` directory."""
        destination = self._new_history_dir(task)
        for path in paths:
            target = destination / path.name
            if target.exists():  # a shard's done and failed records share their name
                target = destination / f"{path.parent.name}-{path.name}"
            os.rename(path, target)

    def manifest(self) -> dict[str, Any]:
        """The manifest, after checking it is intact and meant for this beamtrove.

        Raises:
            ElasticError: No job here, or the manifest was modified, or it was
                prepared by another beamtrove version.
        """
        try:
            data = (self.path / MANIFEST).read_bytes()
            recorded = (self.path / MANIFEST_CHECKSUM).read_text().split()[0]
        except (FileNotFoundError, IndexError):
            raise ElasticError(
                f"{self.path} is not a prepared elastic job (no {MANIFEST} with its checksum): "
                "run `beamtrove elastic prepare` first."
            ) from None
        if sha256_of(data) != recorded:
            raise ElasticError(
                f"{self.path / MANIFEST} does not match {MANIFEST_CHECKSUM}: the manifest was modified after "
                "prepare. Prepare a new job directory instead of editing it."
            )
        manifest = json.loads(data)
        if manifest.get("format") != FORMAT_VERSION:
            raise ElasticError(
                f"{self.path} is a job directory of layout {manifest.get('format')}, which this beamtrove "
                f"({__version__}, layout {FORMAT_VERSION}) does not read: finish it with the beamtrove that prepared "
                f"it ({manifest.get('beamtrove_version')}), or prepare a new job directory."
            )
        if manifest["beamtrove_version"] != __version__:
            raise ElasticError(
                f"The job was prepared with beamtrove {manifest['beamtrove_version']}, this is {__version__}: "
                "run its workers with the same version, so every task is processed alike."
            )
        pipeline = manifest["pipeline"]
        if config_sha256(pipeline["name"], pipeline["args"]) != pipeline["sha256"]:
            raise ElasticError(f"{self.path / MANIFEST} is inconsistent: its pipeline checksum does not match.")
        return manifest

    def create(self, manifest: dict[str, Any], files: Mapping[str, bytes] | None = None) -> bool:
        """Builds the job directory (its manifest and ``files``) beside its final place, renames it there.

        Returns False if a job directory appeared there first.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.staging-{uuid.uuid4().hex}")
        staging.mkdir()
        try:
            data = json.dumps(manifest, indent=1).encode()
            (staging / MANIFEST).write_bytes(data)
            (staging / MANIFEST_CHECKSUM).write_text(f"{sha256_of(data)}  {MANIFEST}\n")
            for subdir in SUBDIRS:
                (staging / subdir).mkdir()
            for name, content in (files or {}).items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(content)
            try:
                os.rename(staging, self.path)  # replaces nothing but an empty directory
            except OSError:
                return False
            return True
        finally:
            if staging.exists():
                shutil.rmtree(staging)

    def try_lock(self, task: str, host: str, timeout: float | None = None) -> Lease | None:
        """Claims ``task``; None when another worker holds it.

        Args:
            task: The shard (or task).
            host: The worker's host name, recorded in the claim; a claim naming it is judged as one of this host.
            timeout: Seconds without a heartbeat after which a lock is stale: a stale lock is then taken over,
                archived into ``history/`` (the lock's ``took_over`` says why). None claims only a free lock.
        """
        claim = {"host": host, "pid": os.getpid(), "acquired_at": time.time()}
        return take_lease(self.lock_path(task), claim, timeout, on_stale=self._archiver(task))

    def _archiver(self, task: str) -> Callable[[LeasePath], None]:
        """Archives a stale lock of ``task`` into ``history/`` instead of deleting it: what the worker did."""
        return lambda path: self.archive([pathlib.Path(path)], task)

    def lock_state(self, task: str, timeout: float, host: str | None = None) -> tuple[str, dict[str, Any] | None]:
        """``("free" | "running" | "stale", claim)`` of the shard's lock, by the lease's rule.

        ``host`` is the name this host goes by in claims; default this machine's.
        """
        return lease_state(self.lock_path(task), timeout, host=host)

    def take_over_stale(self, task: str, timeout: float, host: str | None = None) -> bool:
        """Archives the shard's lock if it is stale; True when the shard can now be claimed.

        :meth:`try_lock` with a ``timeout`` does this and the claim in one call. The check and the archiving are
        one step under the lease's takeover guard (:func:`~beamtrove.execution.lease.remove_stale`).
        """
        return remove_stale(self.lock_path(task), timeout, host=host, on_stale=self._archiver(task))

    def attempts(self, task: str) -> list[pathlib.Path]:
        """The shard's attempt directories, oldest first."""
        directory = self.attempts_dir(task)
        return sorted(p for p in directory.iterdir() if p.is_dir()) if directory.exists() else []

    def spent_attempts(self, task: str) -> list[pathlib.Path]:
        """The shard's attempts that count against its retries; call it holding the shard's lock.

        Failed attempts count, and so do those still ``running``: the caller
        holds the lock, so their workers died. An attempt stopped by SIGTERM
        or Ctrl-C (``interrupted``) does not: a preempted worker is no fault
        of the shard.
        """
        return [attempt for attempt in self.attempts(task) if attempt_status(attempt) in ("failed", "running")]

    def requeue(self, task: str, *, holding_lock: bool = False) -> None:
        """Archives the shard's attempts (its outputs with them), stale lock, and failure or done record.

        Workers then start the shard afresh. The records move last: until
        then workers leave the shard alone, so none starts an attempt that
        would be archived with the old ones.

        Args:
            task: The shard.
            holding_lock: The caller holds the shard's lock, to run it
                again itself: the lock stays.
        """
        paths = (
            self.attempts_dir(task),
            *(() if holding_lock else (self.lock_path(task),)),
            self.failed_path(task),
            self.done_path(task),
        )
        existing = [path for path in paths if path.exists()]
        if existing:
            self.archive(existing, task)
