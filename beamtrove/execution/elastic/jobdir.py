"""The job directory: its layout, the verified manifest, shard locks and once-only records.

Everything here relies only on POSIX semantics that shared file systems such
as NFS and Lustre keep: ``O_CREAT|O_EXCL`` creation, ``link`` failing on an
existing name, and ``rename``. A shard's lock is a lease
(:mod:`beamtrove.execution.lease`), stale by its one rule.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from beamtrove import __version__
from beamtrove.execution.lease import Lease, LeasePath, lease_state, remove_stale, take_lease
from beamtrove.fs import is_local, read_json_record, staging_file

__all__ = [
    "ATTEMPT_FILE",
    "STAGED_KIND",
    "ElasticError",
    "JobDir",
    "ShardLock",
    "attempt_status",
    "check_job_dir_is_posix",
    "config_sha256",
    "is_staged",
    "publish_once",
    "sha256_of",
]

MANIFEST = "manifest.json"
MANIFEST_CHECKSUM = "manifest.sha256"
FORMAT_VERSION = 1
SUBDIRS = ("locks", "attempts", "done", "failed", "history")
#: An attempt's record in its directory: its worker, when it started and how it ended.
ATTEMPT_FILE = "attempt.json"


#: The manifest's ``kind`` of a staged job (:mod:`beamtrove.execution.staged`); a shard job has none.
STAGED_KIND = "staged"


def is_staged(manifest: dict[str, Any]) -> bool:
    """Whether a job directory's manifest is that of a staged job, whose tasks are stages of a global pipeline."""
    return manifest.get("kind") == STAGED_KIND


class ElasticError(Exception):
    """A refused or failed elastic operation; the message says what to do."""


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_sha256(pipeline: str, args: list[str]) -> str:
    """The SHA-256 identifying a pipeline configuration: its name and arguments."""
    return sha256_of(json.dumps({"pipeline": pipeline, "args": args}, separators=(",", ":")).encode())


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


#: A held lock on a shard or task, ``locks/<id>.lock``: a lease (:mod:`beamtrove.execution.lease`) whose claim
#: names its worker (host, pid, token, acquired_at). :meth:`JobDir.try_lock` takes one; ``heartbeat(interval)``
#: renews it while a task runs (a hung pipeline does not stop it: ``--attempt-timeout`` covers that).
ShardLock = Lease


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
        pipeline = manifest["pipeline"]
        if (
            manifest.get("format") != FORMAT_VERSION
            or config_sha256(pipeline["name"], pipeline["args"]) != pipeline["sha256"]
        ):
            raise ElasticError(f"{self.path / MANIFEST} is inconsistent: its pipeline checksum does not match.")
        if manifest["beamtrove_version"] != __version__:
            raise ElasticError(
                f"The job was prepared with beamtrove {manifest['beamtrove_version']}, this is {__version__}: "
                "run its workers with the same version, so every shard is processed alike."
            )
        return manifest

    def try_lock(self, shard_id: str, host: str, timeout: float | None = None) -> ShardLock | None:
        """Claims ``shard_id``; None when another worker holds it.

        Args:
            shard_id: The shard (or task).
            host: The worker's host name, recorded in the claim; a claim naming it is judged as one of this host.
            timeout: Seconds without a heartbeat after which a lock is stale: a stale lock is then taken over,
                archived into ``history/`` (the lock's ``took_over`` says why). None claims only a free lock.
        """
        claim = {"host": host, "pid": os.getpid(), "acquired_at": time.time()}
        return take_lease(self.lock_path(shard_id), claim, timeout, on_stale=self._archiver(shard_id))

    def _archiver(self, shard_id: str) -> Callable[[LeasePath], None]:
        """Archives a stale lock of ``shard_id`` into ``history/`` instead of deleting it: what the worker did."""
        return lambda path: self.archive([pathlib.Path(path)], shard_id)

    def lock_state(self, shard_id: str, timeout: float, host: str | None = None) -> tuple[str, dict[str, Any] | None]:
        """``("free" | "running" | "stale", claim)`` of the shard's lock, by the lease's rule.

        ``host`` is the name this host goes by in claims; default this machine's.
        """
        return lease_state(self.lock_path(shard_id), timeout, host=host)

    def take_over_stale(self, shard_id: str, timeout: float, host: str | None = None) -> bool:
        """Archives the shard's lock if it is stale; True when the shard can now be claimed.

        :meth:`try_lock` with a ``timeout`` does this and the claim in one call. The check and the archiving are
        one step under the lease's takeover guard (:func:`~beamtrove.execution.lease.remove_stale`).
        """
        return remove_stale(self.lock_path(shard_id), timeout, host=host, on_stale=self._archiver(shard_id))

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
