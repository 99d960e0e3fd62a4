"""Staged workers: claim the tasks of each stage in turn, run each as a Beam pipeline, publish done records.

A stage's tasks are claimed as elastic shards are (``O_CREAT|O_EXCL`` locks
with a heartbeat, stale locks taken over, failed attempts retried), and a
worker moves to the next stage only once every task of this one is done, so
a task's inputs are complete when it starts. A task is a small Beam
pipeline on the local runner in the worker's own process: it reads its
partition of the datasets it needs, checked against their producers' done
records first (:mod:`~beamtrove.execution.staged.tasks`), applies its stage
and writes its datasets into its attempt directory; its done record lists
every file it made with its size and SHA-256, the done records whose files
it read, and its step counters.

A task whose done record is damaged, or was made from files of a task
redone since, runs again before anything reads it; so does the producer of
a file found damaged. SIGTERM or Ctrl-C stops the worker at once: the task
it was running is free for other workers and its attempt is not counted.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pathlib
import re
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import orjson
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beamtrove.execution.direct_runner import pipeline_runner
from beamtrove.execution.elastic.jobdir import ATTEMPT_FILE, ElasticError, JobDir, ShardLock, publish_once
from beamtrove.execution.elastic.scan import check_unchanged, shard_sha256
from beamtrove.execution.elastic.status import DamagedRecord
from beamtrove.execution.staged.plan import JobPlan
from beamtrove.execution.staged.records import ReadDataset, WriteDataset, written_files
from beamtrove.execution.staged.tasks import (
    CURRENT,
    DATA_DIR,
    MISSING,
    OUTDATED,
    RUN_OUTPUT_DIR,
    DamagedInput,
    StagedTasks,
    TaskFiles,
    file_entries,
    task_id,
)
from beamtrove.fs import read_json_record, write_local_atomically
from beamtrove.metrics import collect_stats
from beamtrove.processes import is_alive, stopped_by, stops_interrupt
from beamtrove.transforms.stages import Stage

__all__ = ["NO_SPACE", "run_staged_worker", "run_task"]

_DEFAULT_POLL = 0.5
#: The exit status of a worker that stopped because its disk is full (as for a task that failed for good).
NO_SPACE = 2
_FULL = (errno.ENOSPC, errno.EDQUOT)
# Where Beam logs the error of a step that failed, with its traceback.
_STEP_ERRORS = "apache_beam.runners.common"


class _NoSpace(Exception):
    """The job's file system is full: no task can be written; the worker stops."""


def _disk_full(error: BaseException | None) -> bool:
    """Whether ``error``, or what caused it (a runner re-raises a step's error in its own), is a full disk."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in _FULL:
            return True
        if "No space left on device" in str(error) or "Disk quota exceeded" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def _quiet_step_errors() -> Iterator[None]:
    """Within the block, Beam does not log the error of a step that fails, with its traceback: a task's attempt
    records it, and the worker says in one line that the task failed and why."""
    logger = logging.getLogger(_STEP_ERRORS)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _label(dataset: str) -> str:
    # A "/" in a label would nest it.
    return dataset.replace("/", ":")


def run_task(plan: JobPlan, stage: Stage, index: int, files: TaskFiles, attempt_dir: pathlib.Path) -> dict[str, Any]:
    """Runs one task as a Beam pipeline on the local runner over ``files``; returns its step counters.

    Raises:
        RuntimeError: The pipeline did not finish.
    """
    options = PipelineOptions([])
    pipeline = beam.Pipeline(runner=pipeline_runner(options), options=options)
    inputs = {tag: pipeline | f"Read[{_label(tag)}]" >> ReadDataset(paths) for tag, paths in files.reads.items()}
    sides = {tag: pipeline | f"Side[{_label(tag)}]" >> ReadDataset(paths) for tag, paths in files.sides.items()}
    built = plan.stage_for(stage.name, index, str(attempt_dir / RUN_OUTPUT_DIR))
    written = built.run(pipeline, inputs, sides)
    for dataset, records in written.items():
        placement = stage.writes[dataset]
        directory = str(attempt_dir / DATA_DIR / dataset)
        records | f"Write[{_label(dataset)}]" >> WriteDataset(directory, placement, plan.partitions, index)
    result = pipeline.run()
    state = result.wait_until_finish()
    if state != PipelineState.DONE:
        raise RuntimeError(f"the task's pipeline ended {state}")
    return collect_stats(result)


class _Worker:
    def __init__(self, job_dir: str | os.PathLike, host: str, echo: Callable[[str], None], poll_interval: float):
        self.job = JobDir(job_dir)
        self.manifest = self.job.manifest()
        self.plan = JobPlan(self.job.path, self.manifest)
        self.tasks = StagedTasks(self.job, self.plan)
        self.host = host
        self.echo = echo
        self.poll_interval = poll_interval
        self.timeout = self.manifest["lock_timeout"]
        #: The stop signals received (SIGTERM, Ctrl-C), filled in as they come.
        self.stopped: list[int] = []

    def run(self, max_tasks: int | None) -> int:
        """Works on the first stage with tasks left until none is left (0), or one failed for good (2).

        Every round starts from the first stage again: a task of an earlier
        stage that must run again is redone before anything reads it.

        Raises:
            KeyboardInterrupt: A stop signal came (:attr:`stopped` lists it), while a task ran or between two.
        """
        processed = 0
        while max_tasks is None or processed < max_tasks:
            if self.stopped:  # one that came where it could not interrupt the task it came in
                raise KeyboardInterrupt
            memo: dict[str, str] = {}
            stage = next((stage for stage in self.plan.stages if self.open(stage, memo)), None)
            if stage is None:
                break
            failed = [task for task in self.open(stage, memo) if self.job.failed_path(task).exists()]
            if failed:
                self.echo(
                    f"{stage.name}: {', '.join(failed)} failed for good; see its attempts directory, fix the cause, "
                    f"then `beamtrove elastic retry --job-dir {self.job.path} --all-failed`"
                )
                return 2
            claimed: list[tuple[str, ShardLock]] = []
            try:
                self.claim(self.open(stage, memo), claimed)
                if not claimed:
                    time.sleep(self.poll_interval)
                    continue
                ((task, lock),) = claimed
                self.process(stage, self.tasks.ids(stage).index(task), lock)
            except DamagedInput as damaged:
                lock.release()  # before claiming the producer's
                self.echo(f"{task}: {damaged}; running {damaged.task} again first")
                self.redo(damaged)
                continue
            finally:
                # However the task ends, a stop included: its claim goes with it.
                for _, held in claimed:
                    held.release()
            processed += 1
        self.echo(f"worker {self.host}:{os.getpid()} finished after processing {processed} task(s)")
        return 0

    def open(self, stage: Stage, memo: dict[str, str]) -> list[str]:
        """The stage's tasks without a done record that stands."""
        return [task for task in self.tasks.ids(stage) if self.tasks.state(task, memo) != CURRENT]

    def claim(self, tasks: list[str], claimed: list[tuple[str, ShardLock]]) -> None:
        """Claims the first of ``tasks`` another worker has not, adding it to ``claimed`` as soon as it is held."""
        for task in tasks:
            lock = self.lock(task)
            if lock is None:
                continue
            claimed.append((task, lock))
            if self.tasks.state(task) != CURRENT and not self.job.failed_path(task).exists():
                return
            claimed.pop()
            lock.release()  # finished between the look and the claim

    def lock(self, task: str) -> ShardLock | None:
        """Claims ``task``, taking over the lock of a worker that is gone; None when a live one holds it."""
        lock = self.job.try_lock(task, self.host)
        if lock is None and self.job.take_over_stale(task, self.stale_after(task)):
            self.echo(f"{task}: its worker is gone; taking over")
            lock = self.job.try_lock(task, self.host)
        return lock

    def stale_after(self, task: str) -> float:
        """Seconds without a heartbeat before the task's lock is stale: none when its owner here is dead."""
        claim = read_json_record(self.job.lock_path(task))
        if claim and claim.get("host") == self.host and not is_alive(claim.get("pid", 0)):
            return 0.0
        return self.timeout

    def redo(self, damaged: DamagedInput) -> None:
        """Requeues the producer of a damaged file or record, unless another worker is at it already."""
        lock = self.lock(damaged.task)
        if lock is None:
            return
        try:
            try:
                done = self.tasks.done(damaged.task)
            except DamagedRecord:
                done = {"token": damaged.token}
            # No record left to requeue (it runs as any task without one), or another worker redid it meanwhile.
            settled = done is None or (damaged.token is not None and done.get("token") != damaged.token)
            if not settled:
                self.job.requeue(damaged.task, holding_lock=True)
        finally:
            lock.release()

    def process(self, stage: Stage, index: int, lock: ShardLock) -> None:
        task = task_id(stage, index)
        state = self.tasks.state(task)
        if state != MISSING:
            why = "was made from files of tasks redone since" if state == OUTDATED else "cannot be read"
            self.echo(f"{task}: its done record {why}; running it again")
            self.job.requeue(task, holding_lock=True)
        attempts = self.job.attempts(task)
        spent = self.job.spent_attempts(task)
        allowed = 1 + self.manifest["max_retries"]
        if len(spent) >= allowed:
            self.fail(task, "no attempt left (the last ones were abandoned by dead workers)")
            return
        if stage is self.plan.stages[0]:
            shard = self.manifest["shards"][index]
            if shard_sha256(self.manifest, shard) != shard["sha256"]:
                raise ElasticError(
                    f"The bytes of the input of {task} changed since the job was prepared although sizes and times "
                    "did not: restore the input, or prepare a new job directory."
                )
        files = self.tasks.files(stage, index)
        safe_host = re.sub(r"[^A-Za-z0-9_.-]", "_", self.host)
        attempt_dir = self.job.attempts_dir(task) / f"{len(attempts) + 1:02d}-{safe_host}-{os.getpid()}"
        attempt_dir.mkdir(parents=True)
        record = {"task": task, "host": self.host, "pid": os.getpid(), "started_at": time.time(), "status": "running"}
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
        self.echo(f"{task}: attempt {attempt_dir.name} started")
        started = time.monotonic()
        try:
            with lock.heartbeat(self.timeout / 5):
                stats = run_task(self.plan, stage, index, files, attempt_dir)
        except KeyboardInterrupt:
            self.interrupted(attempt_dir, record)
            raise
        except Exception as exc:  # a task that fails is retried, then failed; the worker goes on
            if self.stopped:
                # A stop the runner reported as the error of the step it came in (Beam may wrap it).
                self.interrupted(attempt_dir, record)
                raise KeyboardInterrupt from exc
            if _disk_full(exc):
                # No fault of the task either; written if the disk still takes it, else the attempt's worker is gone.
                record.update(status="interrupted", error="the file system is full", finished_at=time.time())
                with contextlib.suppress(OSError):
                    write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
                raise _NoSpace(task) from exc
            record.update(status="failed", error="".join(traceback.format_exception_only(exc)).strip())
            record["traceback"] = traceback.format_exc()
            write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
            if len(spent) + 1 >= allowed:
                self.fail(task, record["error"])
            else:
                self.echo(f"{task}: attempt {attempt_dir.name} failed ({record['error']}); it will be retried")
            return
        seconds = round(time.monotonic() - started, 3)
        self.publish(task, lock, attempt_dir, record, stats, files, seconds)

    def interrupted(self, attempt_dir: pathlib.Path, record: dict[str, Any]) -> None:
        """Records an attempt a stop (SIGTERM, Ctrl-C) ended: no fault of its task, so it is not counted."""
        record.update(status="interrupted", finished_at=time.time())
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))

    def publish(
        self,
        task: str,
        lock: ShardLock,
        attempt_dir: pathlib.Path,
        record: dict[str, Any],
        stats: dict[str, Any],
        files: TaskFiles,
        seconds: float,
    ) -> None:
        outputs = written_files(attempt_dir / DATA_DIR) if (attempt_dir / DATA_DIR).exists() else {}
        done = {
            "shard": task,
            "host": self.host,
            "pid": os.getpid(),
            "token": lock.token,
            "records": sum(
                entry["records"] for parts in outputs.values() for entries in parts.values() for entry in entries
            ),
            "attempt": str(attempt_dir.relative_to(self.job.path)),
            "seconds": seconds,
            "finished_at": time.time(),
            "outputs": outputs,
            "read": files.producers,
            "stats": stats,
        }
        run_output = attempt_dir / RUN_OUTPUT_DIR
        if run_output.is_dir():
            # What a sink laid out for the run (the write task's outputs, or token shards), checked before publishing.
            done["run_output"] = str(run_output.relative_to(self.job.path))
            done["run_files"] = file_entries(run_output)
        record.update(status="succeeded", seconds=seconds)
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
        if publish_once(self.job.done_path(task), done):
            self.echo(f"{task}: done in {seconds:.1f} s")

    def fail(self, task: str, error: str) -> None:
        publish_once(self.job.failed_path(task), {"shard": task, "host": self.host, "at": time.time(), "error": error})
        self.echo(f"{task}: failed: {error}")


def run_staged_worker(
    job_dir: str | os.PathLike,
    *,
    host: str | None = None,
    echo: Callable[[str], None] = print,
    poll_interval: float | None = None,
    max_tasks: int | None = None,
    started_by_run: bool = False,
) -> int:
    """Runs tasks of the staged job until every stage is done or ``max_tasks`` ran.

    Args:
        job_dir: The job directory.
        host: The host name recorded in locks and done records (default: this machine's).
        echo: Where progress lines go.
        poll_interval: Seconds between looks for claimable tasks while all are running elsewhere.
        max_tasks: Stop after running this many tasks.
        started_by_run: The worker is one of those ``beamtrove run --staged`` started, which says itself why
            they stopped and how to go on.

    Returns:
        0 when every stage is done or ``max_tasks`` ran; 2 when a task failed for good or the disk is full
        (:data:`NO_SPACE`); 128 + the signal's number when SIGTERM or Ctrl-C stopped it.

    Raises:
        ElasticError: The manifest is damaged or of another version, or the input or a file the job reads by path
            changed since the job was prepared.
    """
    worker = _Worker(job_dir, host or socket.gethostname(), echo, poll_interval or _DEFAULT_POLL)
    check_unchanged(worker.manifest)
    with stops_interrupt() as received, _quiet_step_errors():
        worker.stopped = received
        try:
            return worker.run(max_tasks)
        except KeyboardInterrupt:
            signal_name, status = stopped_by(received)
            if not started_by_run:
                echo(f"stopped by {signal_name}; the task it was running is free for other workers")
            return status
        except (_NoSpace, OSError) as exc:
            if not _disk_full(exc):
                raise
            where = f"{exc}: " if isinstance(exc, _NoSpace) else ""
            advice = "" if started_by_run else "; free space, then start the workers again"
            echo(f"{where}stopped, the job directory's file system is full{advice}")
            return NO_SPACE
