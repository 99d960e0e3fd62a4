"""``beamtrove elastic worker``: claim tasks of a job, attempt each, write done records; one loop for every kind.

A worker claims a task with an ``O_CREAT|O_EXCL`` lock whose heartbeat it
renews while the task runs, takes over the lock of a worker that is gone,
counts the task's attempts (one stopped by SIGTERM or Ctrl-C is no fault of
the task and is not counted), has the job's kind
(:mod:`~beamtrove.execution.jobs.kinds`) run the attempt, and writes the
task's done record, or its failure record once it ran out of attempts.

Several workers on one machine (``beamtrove run --staged``, ``beamtrove
elastic worker --processes N``) are forked from the process that starts them,
which has imported Beam and the job's modules: each starts with them loaded,
in memory pages the workers share, instead of a new interpreter of its own.

Also the Slurm array script that runs one worker per array task
(``beamtrove elastic slurm-template``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.resources
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from beamtrove.execution.jobs.jobdir import ElasticError, JobDir, write_once
from beamtrove.execution.jobs.kinds import JobKind, job_kind
from beamtrove.execution.jobs.shard_output import DEFAULT_SORT_MEMORY
from beamtrove.execution.jobs.status import damage_line, job_progress, task_states
from beamtrove.execution.jobs.task import Attempt, RedoFirst, TaskFailed
from beamtrove.execution.lease import Lease, heartbeats_paused
from beamtrove.processes import PythonChild, stop_signals, stopped_by, stops_interrupt

__all__ = ["NO_SPACE", "WORKER_MODULE", "run_worker", "run_worker_process", "run_workers", "slurm_array_script"]

#: The exit status of a worker that stopped because a task failed for good, is damaged, or the disk is full.
NO_SPACE = 2
_FULL = (errno.ENOSPC, errno.EDQUOT)
#: The module a new interpreter runs a worker process with: ``python -m beamtrove.execution.jobs JOB_DIR [...]``.
WORKER_MODULE = "beamtrove.execution.jobs"
# Seconds stopped worker processes get to free their tasks before they are killed, and between looks at them.
_STOP_GRACE = 10.0
_POLL = 0.2


class _NoSpace(Exception):
    """The job's file system is full: no task can be written; the worker stops."""


def disk_full(error: BaseException | None) -> bool:
    """Whether ``error``, or what caused it (a runner re-raises a step's error in its own), is a full disk."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in _FULL:
            return True
        if "No space left on device" in str(error) or "Disk quota exceeded" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


class _Worker:
    def __init__(self, job: JobDir, kind: JobKind, host: str, echo: Callable[[str], None], poll: float):
        self.job = job
        self.kind = kind
        self.manifest = kind.manifest
        self.host = host
        self.echo = echo
        self.poll = poll
        self.timeout = self.manifest["lock_timeout"]
        #: The stop signals received (SIGTERM, Ctrl-C), filled in as they come.
        self.stopped: list[int] = []

    def run(self, max_tasks: int | None) -> int:
        """Claims and attempts tasks until none is left (or ``max_tasks`` ran); returns how many ran.

        Raises:
            KeyboardInterrupt: A stop signal came (:attr:`stopped` lists it), while a task ran or between two.
        """
        processed = 0
        while max_tasks is None or processed < max_tasks:
            if self.stopped:  # one that came where it could not interrupt the task it came in
                raise KeyboardInterrupt
            tasks = self.kind.open_tasks()
            if tasks is None:
                break
            claim = self.claim(tasks)
            if claim is None:
                time.sleep(self.poll)
                continue
            task, lock = claim
            try:
                self.process(task, lock)
            except RedoFirst as redo:
                lock.release()  # before claiming the producer's
                # A producer whose record it names runs again; a damaged listing only has its stage sealed again.
                self.echo(f"{task}: {redo}" + (f"; running {redo.task} again first" if redo.token else ""))
                self.redo(redo)
                continue
            finally:
                lock.release()
            processed += 1
        return processed

    def claim(self, tasks: Iterator[str]) -> tuple[str, Lease] | None:
        """Claims the first of ``tasks`` no live worker holds and that is still open."""
        for task in tasks:
            lock = self.lock(task)
            if lock is None:
                continue
            if self.job.done_path(task).exists() or self.job.failed_path(task).exists():
                lock.release()  # finished between the look and the claim
                continue
            return task, lock
        return None

    def lock(self, task: str) -> Lease | None:
        """Claims ``task``, taking over the lock of a worker that is gone; None when a live one holds it."""
        lock = self.job.try_lock(task, self.host, timeout=self.timeout)
        if lock is not None and lock.took_over:
            self.echo(f"{task}: its lock went stale ({lock.took_over}); taking over")
        return lock

    def redo(self, redo: RedoFirst) -> None:
        """Has the kind requeue the producer ``redo`` names, unless another worker is at it already."""
        lock = self.lock(redo.task)
        if lock is None:
            return
        try:
            self.kind.redo(redo)
        finally:
            lock.release()

    def process(self, task: str, lock: Lease) -> None:
        spent = self.job.spent_attempts(task)
        allowed = 1 + self.manifest["max_retries"]
        if len(spent) >= allowed:
            self.fail(task, len(spent), "no attempt left (the last ones were abandoned by dead workers)")
            return
        work = self.kind.prepare(task)
        record = {"task": task, "host": self.host, "pid": os.getpid(), "token": lock.token, "started_at": time.time()}
        attempt = Attempt(
            self.job.new_attempt_dir(task, self.host), {**record, "status": "running"}, lock, self.timeout / 5
        )
        # A stop anywhere from the attempt's first record to the task's done record marks the attempt interrupted;
        # one left "running" would spend one of the task's attempts, as a dead worker's does.
        try:
            self.run_attempt(task, work, attempt, record, number=len(spent) + 1, last=len(spent) + 1 >= allowed)
        except KeyboardInterrupt:
            self.interrupted(task, attempt)
            raise

    def run_attempt(
        self, task: str, work: Any, attempt: Attempt, record: dict[str, Any], *, number: int, last: bool
    ) -> None:
        """Runs the ``number``-th attempt of ``task`` on what the kind prepared for it, saving the attempt's record
        as it starts and ends; writes the task's done record, or its failure record when it was the ``last``."""
        attempt.save()
        self.echo(f"{task}: attempt {attempt.directory.name} started")
        started = time.monotonic()
        try:
            fields = self.kind.run(task, work, attempt)
        except TaskFailed as failed:
            self.attempt_failed(task, attempt, failed, number, last=last)
            return
        except Exception as exc:  # a task that fails is retried, then failed; the worker goes on
            if self.stopped:
                # A stop the runner reported as the error of the step it came in (Beam may wrap it).
                raise KeyboardInterrupt from exc
            if disk_full(exc):
                # No fault of the task either; written if the disk still takes it, else the attempt's worker is gone.
                with contextlib.suppress(OSError):
                    attempt.save(status="interrupted", error="the file system is full", finished_at=time.time())
                raise _NoSpace(task) from exc
            error = "".join(traceback.format_exception_only(exc)).strip()
            failed = TaskFailed(error, traceback=traceback.format_exc())
            self.attempt_failed(task, attempt, failed, number, last=last)
            return
        seconds = round(time.monotonic() - started, 3)
        done = {
            **record,
            "attempt": str(attempt.directory.relative_to(self.job.path)),
            "seconds": seconds,
            "finished_at": time.time(),
            **fields,
        }
        attempt.save(status="succeeded", seconds=seconds, finished_at=done["finished_at"])
        if write_once(self.job.done_path(task), done):
            progress = (
                f" · {job_progress(task_states(self.job.path, self.kind))}" if self.kind.states_after_each_task else ""
            )
            self.echo(f"{task}: done, {done['records']} records in {seconds:.1f} s{progress}")
        else:
            self.echo(f"{task}: finished, but another attempt's done record came first; that one counts")

    def attempt_failed(self, task: str, attempt: Attempt, failed: TaskFailed, attempts: int, *, last: bool) -> None:
        """Records why the attempt failed; fails the task when it was its last, else says it will be retried."""
        attempt.save(status="failed", error=failed.error, finished_at=time.time(), **failed.details)
        if last:
            self.fail(task, attempts, failed.error)
        else:
            line = (failed.error.strip().splitlines() or [""])[-1]
            self.echo(f"{task}: attempt {attempt.directory.name} failed ({line}); it will be retried")

    def interrupted(self, task: str, attempt: Attempt) -> None:
        """Records an attempt a stop (SIGTERM, Ctrl-C) ended, wherever it came (the task's run, the hashing of its
        files): one with no done record to show for it is no fault of its task, so it is not counted. One that
        failed before the stop came stays failed."""
        if attempt.record.get("status") != "failed" and not self.job.done_path(task).exists():
            attempt.save(status="interrupted", finished_at=time.time())

    def fail(self, task: str, attempts: int, error: str) -> None:
        record = {"task": task, "attempts": attempts, "host": self.host, "at": time.time(), "error": error}
        if write_once(self.job.failed_path(task), record):
            self.echo(
                f"{task}: failed after {attempts} attempts; see its attempts directory, fix the cause, then "
                f"`beamtrove elastic retry --job-dir {self.job.path} --task {task}`"
            )


def _unfinished(job: JobDir, kind: JobKind, echo: Callable[[str], None]) -> bool:
    """Says which tasks no worker will take (failed for good, damaged); True when there are any."""
    states = task_states(job.path, kind)
    for entry in states:
        if entry["state"] == "damaged":
            echo(damage_line(job.path, entry))
    failed = [entry["id"] for entry in states if entry["state"] == "failed"]
    if failed:
        echo(
            f"{len(failed)} {kind.noun}(s) failed for good: {', '.join(failed)}; see their attempts directories, fix "
            f"the cause, then `beamtrove elastic retry --job-dir {job.path} --all-failed`"
        )
    return bool(failed) or any(entry["state"] == "damaged" for entry in states)


def run_worker(
    job_dir: str | os.PathLike,
    *,
    max_tasks: int | None = None,
    host: str | None = None,
    poll_interval: float | None = None,
    sort_memory: int = DEFAULT_SORT_MEMORY,
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    started_by_run: bool = False,
) -> int:
    """Claims and runs tasks of the job until none is left; returns the exit status.

    A worker waits while the tasks left are running elsewhere, since their
    workers may die and leave them to be taken over.

    Args:
        job_dir: A prepared job directory.
        max_tasks: Stop after running this many tasks.
        host: The host name recorded in locks and done records (default: this machine's).
        poll_interval: Seconds between looks for claimable tasks when all are running elsewhere (default: the
            kind's: for shards a fifth of the lock timeout, at most 10; for a staged job's tasks, 0.2).
        sort_memory: A shard job's: about how many bytes of documents to hold while sorting a shard's output by
            id (at least 64 KiB); a larger shard is sorted in runs spilled to its attempt directory, then merged.
        echo: Where progress lines go.
        started_by_run: The worker is one of those ``beamtrove run --staged`` started, which says itself why
            they stopped and how to go on.

    Returns:
        0 when every task is done (or ``max_tasks`` ran); 2 when a task failed for good or is damaged (no worker
        takes those; each is named with the command that redoes it) or the disk is full (:data:`NO_SPACE`);
        128 + the signal's number when SIGTERM or Ctrl-C stopped the worker (143, 130), which frees its task at
        once.

    Raises:
        ElasticError: ``sort_memory`` is too small, the manifest is damaged or from another version, or the
            input or a file the options name changed since prepare.
    """
    job = JobDir(job_dir)
    host = host or socket.gethostname()
    kind = job_kind(job, echo=echo, host=host, sort_memory=sort_memory)
    kind.check_unchanged()
    poll = poll_interval if poll_interval is not None else kind.poll_interval
    worker = _Worker(job, kind, host, echo, poll)
    with stops_interrupt() as received, kind.running():
        worker.stopped = received
        try:
            processed = worker.run(max_tasks)
        except KeyboardInterrupt:
            signal_name, status = stopped_by(received)
            if not started_by_run:
                echo(f"stopped by {signal_name}; the {kind.noun} it was running is free for other workers")
            return status
        except (_NoSpace, OSError) as exc:
            if not disk_full(exc):
                raise
            where = f"{exc}: " if isinstance(exc, _NoSpace) else ""
            advice = "" if started_by_run else "; free space, then start the workers again"
            echo(f"{where}stopped, the job directory's file system is full{advice}")
            return NO_SPACE
    # Tasks no worker will take: a user must look at them, so the job's workers say so rather than "finished".
    if (max_tasks is None or processed < max_tasks) and _unfinished(job, kind, echo):
        return 2
    echo(f"worker {host}:{os.getpid()} finished after running {processed} {kind.noun}(s)")
    return 0


def run_worker_process(job_dir: str | os.PathLike, **options: Any) -> int:
    """The body of a worker process that :func:`run_workers` started: :func:`run_worker`, its error in one line.

    Args:
        job_dir: A prepared job directory.
        **options: :func:`run_worker`'s keyword arguments but ``echo``; the process's progress lines go to stdout
            when it was ``started_by_run``, else to stderr.
    """
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if options.get("started_by_run"):
        options["echo"] = functools.partial(print, flush=True)
    try:
        return run_worker(job_dir, **options)
    except ElasticError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr, flush=True)
        return 2


def _worker_command(job_dir: str | os.PathLike, options: dict[str, Any]) -> list[str]:
    """The command that runs :func:`run_worker_process` with ``options`` in a new interpreter."""
    command = [sys.executable, "-m", WORKER_MODULE, os.fspath(job_dir)]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value is not None and value is not False:
            command += [flag, str(value)]
    return command


def run_workers(job_dir: str | os.PathLike, processes: int, **options: Any) -> tuple[list[int], list[int]]:
    """Runs ``processes`` worker processes over the job until they end.

    They are forked from this process (its heartbeats paused meanwhile) when
    it runs no other thread (see :class:`~beamtrove.processes.PythonChild`),
    each in a session of its own so that a terminal's Ctrl-C reaches this
    process alone. A stop signal (Ctrl-C, SIGTERM) is passed on to them as
    SIGTERM, which frees their tasks without spending their attempts, and
    those still running after a while are killed. The handler raises nothing:
    an exception raised wherever this process is when the signal comes (a
    garbage collector's callback) could be lost or leave a child behind.

    Args:
        job_dir: A prepared job directory.
        processes: How many worker processes to run.
        **options: :func:`run_worker_process`'s.

    Returns:
        The workers' exit codes (negative: the signal that killed one), and the stop signals received.
    """
    target = functools.partial(run_worker_process, job_dir, **options)
    command = _worker_command(job_dir, options)
    with heartbeats_paused():
        children = [PythonChild(target, command, new_session=True) for _ in range(processes)]

    def stop(signum: int) -> None:
        for child in children:
            if child.wait(0) is None:
                child.terminate()

    try:
        with stop_signals(stop) as received:
            deadline = None
            for child in children:
                while child.wait(_POLL) is None:
                    if received and deadline is None:
                        deadline = time.monotonic() + _STOP_GRACE
                    if deadline is not None and time.monotonic() >= deadline:
                        child.kill()
        return [child.wait() for child in children], received
    finally:
        for child in children:
            if child.wait(0) is None:
                child.kill()
                child.wait()


def slurm_array_script() -> str:
    """The Slurm array script that runs one worker per array task, with how to use it in its comments."""
    return importlib.resources.files(__package__).joinpath("array.sbatch").read_text(encoding="utf-8")
