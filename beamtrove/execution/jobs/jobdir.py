"""The job directory: its layout, the verified manifest, task locks, attempts and once-only records.

Everything here relies only on POSIX semantics that shared file systems such
as NFS and Lustre keep: ``O_CREAT|O_EXCL`` creation, ``link`` failing on an
existing name, and ``rename``. A task is what one worker runs at a time: a
shard of a shard job, a stage's partition of a staged job
(:mod:`~beamtrove.execution.jobs.kinds`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from beamtrove import __version__
from beamtrove.fs import is_local, read_json_record, staging_file

__all__ = [
    "ATTEMPT_FILE",
    "SHARDS_KIND",
    "STAGED_KIND",
    "DamagedRecord",
    "ElasticError",
    "JobDir",
    "ShardLock",
    "attempt_status",
    "check_job_dir_is_posix",
    "config_sha256",
    "job_identity",
    "publish_once",
    "sha256_of",
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
    """A task's done or failed record that is not the JSON object a worker publishes; the message says what to do.

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


def publish_once(path: pathlib.Path, record: dict[str, Any]) -> bool:
    """Publishes ``record`` as ``path`` unless it exists; True when this call published it.

    The record is complete before it has its name (a hard link from a
    temporary file), so readers never see half of one, and of racing
    publishers exactly one wins.
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


def _age(path: pathlib.Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None


@dataclasses.dataclass
class ShardLock:
    """A held claim on a shard: ``locks/<shard>.lock``, created with ``O_CREAT|O_EXCL``.

    While :meth:`heartbeat` runs, the lock's mtime is refreshed every fifth of
    the lock timeout, so only the locks of dead or frozen workers go stale (a
    hung pipeline does not stop the heartbeat: ``--attempt-timeout`` covers it).
    """

    path: pathlib.Path
    token: str
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    def owned(self) -> bool:
        """Whether the lock file is still this claim (not taken over)."""
        content = read_json_record(self.path)
        return content is not None and content.get("token") == self.token

    @contextlib.contextmanager
    def heartbeat(self, interval: float):
        def beat():
            while not self._stop.wait(interval):
                with contextlib.suppress(FileNotFoundError):
                    if self.owned():
                        os.utime(self.path)

        thread = threading.Thread(target=beat, name=f"heartbeat-{self.path.stem}", daemon=True)
        self._stop.clear()
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def release(self) -> None:
        """Removes the lock file if it is still this claim."""
        if self.owned():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


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

    def lock_path(self, shard_id: str) -> pathlib.Path:
        return self.path / "locks" / f"{shard_id}.lock"

    def attempts_dir(self, shard_id: str) -> pathlib.Path:
        return self.path / "attempts" / shard_id

    def done_path(self, shard_id: str) -> pathlib.Path:
        return self.path / "done" / f"{shard_id}.json"

    def failed_path(self, shard_id: str) -> pathlib.Path:
        return self.path / "failed" / f"{shard_id}.json"

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
        # Workers publish a record whole under its name (publish_once): a record that does not parse was damaged later.
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

    def _new_history_dir(self, shard_id: str) -> pathlib.Path:
        directory = self.path / "history" / shard_id / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        directory.mkdir(parents=True)
        return directory

    def archive(self, paths: list[pathlib.Path], shard_id: str) -> None:
        """Moves ``paths`` together into a new ``history/<shard>/<time>-<random>/`` directory."""
        destination = self._new_history_dir(shard_id)
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

    def try_lock(self, shard_id: str, host: str) -> ShardLock | None:
        """Claims ``shard_id``; None when another worker holds it."""
        token = uuid.uuid4().hex
        path = self.lock_path(shard_id)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return None
        claim = {"host": host, "pid": os.getpid(), "token": token, "acquired_at": time.time()}
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(json.dumps(claim).encode())
                out.flush()
                os.fsync(out.fileno())
        except BaseException:  # a stop, or a full disk: no claim of nobody's is left behind
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return ShardLock(path, token)

    def lock_state(self, shard_id: str, timeout: float) -> tuple[str, dict[str, Any] | None]:
        """``("free" | "running" | "stale", claim)`` of the shard's lock."""
        path = self.lock_path(shard_id)
        age = _age(path)
        if age is None:
            return "free", None
        return ("stale" if age >= timeout else "running"), read_json_record(path)

    def take_over_stale(self, shard_id: str, timeout: float) -> bool:
        """Archives the shard's lock if it is stale; True when the shard can now be claimed.

        A short-lived ``.takeover`` guard, itself created with ``O_EXCL``,
        makes the check and the archiving one step: without it, a worker could
        archive the fresh lock another worker just took over.
        """
        lock = self.lock_path(shard_id)
        guard = lock.with_suffix(".takeover")
        try:
            os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            # A guard is held for milliseconds; one as old as the timeout belongs to a worker that died holding it.
            guard_age = _age(guard)
            if guard_age is not None and guard_age >= timeout:
                with contextlib.suppress(FileNotFoundError):
                    guard.unlink()
            return False
        try:
            age = _age(lock)
            if age is None:
                return True
            if age < timeout:
                return False
            self.archive([lock], shard_id)
            return True
        finally:
            guard.unlink()

    def attempts(self, shard_id: str) -> list[pathlib.Path]:
        """The shard's attempt directories, oldest first."""
        directory = self.attempts_dir(shard_id)
        return sorted(p for p in directory.iterdir() if p.is_dir()) if directory.exists() else []

    def spent_attempts(self, shard_id: str) -> list[pathlib.Path]:
        """The shard's attempts that count against its retries; call it holding the shard's lock.

        Failed attempts count, and so do those still ``running``: the caller
        holds the lock, so their workers died. An attempt stopped by SIGTERM
        or Ctrl-C (``interrupted``) does not: a preempted worker is no fault
        of the shard.
        """
        return [attempt for attempt in self.attempts(shard_id) if attempt_status(attempt) in ("failed", "running")]

    def requeue(self, shard_id: str, *, holding_lock: bool = False) -> None:
        """Archives the shard's attempts (its outputs with them), stale lock, and failure or done record.

        Workers then start the shard afresh. The records move last: until
        then workers leave the shard alone, so none starts an attempt that
        would be archived with the old ones.

        Args:
            shard_id: The shard.
            holding_lock: The caller holds the shard's lock, to run it
                again itself: the lock stays.
        """
        paths = (
            self.attempts_dir(shard_id),
            *(() if holding_lock else (self.lock_path(shard_id),)),
            self.failed_path(shard_id),
            self.done_path(shard_id),
        )
        existing = [path for path in paths if path.exists()]
        if existing:
            self.archive(existing, shard_id)
