"""Staged workers: claim the tasks of each stage in turn, run each as a Beam pipeline, publish done records.

A stage's tasks are claimed as elastic shards are (``O_CREAT|O_EXCL`` locks
with a heartbeat, stale locks taken over, failed attempts retried), and a
worker moves to the next stage only once every task of this one is done, so
a task's inputs are complete when it starts. A task is a small Beam
pipeline on the local runner in the worker's own process: it reads its
partition of the datasets it needs, applies its stage and writes its
datasets into its attempt directory; its done record lists every file with
its size and SHA-256, and its step counters.
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
import orjson
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beamtrove.execution.direct_runner import pipeline_runner
from beamtrove.execution.elastic.jobdir import JobDir, ShardLock, publish_once
from beamtrove.execution.staged.plan import JobPlan
from beamtrove.execution.staged.records import DamagedDataset, ReadDataset, WriteDataset, written_files
from beamtrove.fs import read_json_record, write_local_atomically
from beamtrove.metrics import collect_stats
from beamtrove.processes import is_alive
from beamtrove.transforms.stages import Stage

__all__ = ["ATTEMPT_FILE", "DATA_DIR", "RUN_OUTPUT_DIR", "dataset_files", "run_staged_worker", "task_id"]

ATTEMPT_FILE = "attempt.json"
#: Where a task's datasets go in its attempt directory.
DATA_DIR = "data"
#: Where a task lays out what it writes for the run itself (the write task's outputs, token shards).
RUN_OUTPUT_DIR = "output"
_DEFAULT_POLL = 0.5


def task_id(stage: Stage, index: int) -> str:
    """The name of a stage's task: its stage, then its partition."""
    return f"{stage.name}-{index:05d}"

    return True


def dataset_files(job: JobDir, plan: JobPlan, dataset: str, partition: int | None) -> list[pathlib.Path]:
    """The files of one partition of a dataset (every partition for None), checked against their done records.

    Raises:
        DamagedDataset: A file is missing or not the size its done record gives.
    """
    producer = plan.producers[dataset]
    files = []
    for index in range(plan.tasks(producer)):
        done = read_json_record(job.done_path(task_id(producer, index)))
        if done is None:
            raise DamagedDataset(f"{task_id(producer, index)} has no done record, so {dataset} is not complete.")
        partitions = done["outputs"].get(dataset, {})
        chosen = partitions.values() if partition is None else [partitions.get(str(partition), [])]
        for entries in chosen:
            for entry in entries:
                path = job.path / done["attempt"] / DATA_DIR / entry["path"]
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    size = None
                if size != entry["bytes"]:
                    raise DamagedDataset(
                        f"{path} ({task_id(producer, index)}) is {'missing' if size is None else f'{size} B'}, its "
                        f"done record says {entry['bytes']} B: `beamtrove elastic retry --all-damaged` redoes it."
                    )
                files.append(path)
    return files


def _label(dataset: str) -> str:
    # A "/" in a label would nest it.
    return dataset.replace("/", ":")


def run_task(job: JobDir, plan: JobPlan, stage: Stage, index: int, attempt_dir: pathlib.Path) -> dict[str, Any]:
    """Runs one task as a Beam pipeline on the local runner; returns its step counters.

    Raises:
        DamagedDataset: An input file is damaged.
        RuntimeError: The pipeline did not finish.
    """
    options = PipelineOptions([])
    pipeline = beam.Pipeline(runner=pipeline_runner(options), options=options)
    partition = None if stage.whole else index

    def read(datasets: Sequence[str], label: str, partition: int | None = partition):
        files = [str(path) for dataset in datasets for path in dataset_files(job, plan, dataset, partition)]
        return pipeline | label >> ReadDataset(files)

    inputs = {tag: read(names, f"Read[{_label(tag)}]") for tag, names in stage.reads.items()}
    # A side is one element, in whichever partition its task wrote it: every task reads all of it.
    sides = {tag: read((name,), f"Side[{_label(tag)}]", None) for tag, name in stage.sides.items()}
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
        self.host = host
        self.echo = echo
        self.poll_interval = poll_interval
        self.timeout = self.manifest["lock_timeout"]

    def run(self, max_tasks: int | None) -> int:
        """Works on the first stage with tasks left until none is left (0), or one failed for good (2).

        Every round starts from the first stage again: a task of an earlier
        stage that ``retry`` requeued is redone before anything reads it.
        """
        processed = 0
        while max_tasks is None or processed < max_tasks:
            stage = next((stage for stage in self.plan.stages if self.pending(stage)), None)
            if stage is None:
                break
            failed = [task for task in self.task_ids(stage) if self.job.failed_path(task).exists()]
            if failed:
                self.echo(
                    f"{stage.name}: {', '.join(failed)} failed for good; see its attempts directory, fix the cause, "
                    f"then `beamtrove elastic retry --job-dir {self.job.path} --all-failed`"
                )
                return 2
            claimed = self.claim(self.pending(stage))
            if claimed is None:
                time.sleep(self.poll_interval)
                continue
            task, lock = claimed
            try:
                self.process(stage, self.task_ids(stage).index(task), lock)
            finally:
                lock.release()
            processed += 1
        self.echo(f"worker {self.host}:{os.getpid()} finished after processing {processed} task(s)")
        return 0

    def task_ids(self, stage: Stage) -> list[str]:
        return [task_id(stage, index) for index in range(self.plan.tasks(stage))]

    def pending(self, stage: Stage) -> list[str]:
        """The stage's tasks without a done record."""
        return [task for task in self.task_ids(stage) if not self.job.done_path(task).exists()]

    def claim(self, tasks: list[str]) -> tuple[str, ShardLock] | None:
        for task in tasks:
            lock = self.job.try_lock(task, self.host)
            if lock is None and self.job.take_over_stale(task, self.stale_after(task)):
                self.echo(f"{task}: its worker is gone; taking over")
                lock = self.job.try_lock(task, self.host)
            if lock is None:
                continue
            if self.job.done_path(task).exists() or self.job.failed_path(task).exists():
                lock.release()
                continue
            return task, lock
        return None

    def stale_after(self, task: str) -> float:
        """Seconds without a heartbeat before the task's lock is stale: none when its owner here is dead."""
        claim = read_json_record(self.job.lock_path(task))
        if claim and claim.get("host") == self.host and not is_alive(claim.get("pid", 0)):
            return 0.0
        return self.timeout

    def process(self, stage: Stage, index: int, lock: ShardLock) -> None:
        task = task_id(stage, index)
        attempts = self.job.attempts(task)
        # We hold the lock, so an attempt still "running" belongs to a worker that died.
        counted = [
            a for a in attempts if (read_json_record(a / ATTEMPT_FILE) or {}).get("status", "running") != "succeeded"
        ]
        allowed = 1 + self.manifest["max_retries"]
        if len(counted) >= allowed:
            self.fail(task, "no attempt left (the last ones were abandoned by dead workers)")
            return
        safe_host = re.sub(r"[^A-Za-z0-9_.-]", "_", self.host)
        attempt_dir = self.job.attempts_dir(task) / f"{len(attempts) + 1:02d}-{safe_host}-{os.getpid()}"
        attempt_dir.mkdir(parents=True)
        record = {"task": task, "host": self.host, "pid": os.getpid(), "started_at": time.time(), "status": "running"}
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
        self.echo(f"{task}: attempt {attempt_dir.name} started")
        started = time.monotonic()
        try:
            with lock.heartbeat(self.timeout / 5):
                stats = run_task(self.job, self.plan, stage, index, attempt_dir)
        except Exception as exc:  # a task that fails is retried, then failed; the worker goes on
            record.update(status="failed", error="".join(traceback.format_exception_only(exc)).strip())
            record["traceback"] = traceback.format_exc()
            write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
            if len(counted) + 1 >= allowed:
                self.fail(task, record["error"])
            else:
                self.echo(f"{task}: attempt {attempt_dir.name} failed ({record['error']}); it will be retried")
            return
        seconds = round(time.monotonic() - started, 3)
        outputs = written_files(attempt_dir / DATA_DIR) if (attempt_dir / DATA_DIR).exists() else {}
        done = {
            "shard": task,
            "host": self.host,
            "pid": os.getpid(),
            "records": sum(
                entry["records"] for parts in outputs.values() for files in parts.values() for entry in files
            ),
            "attempt": str(attempt_dir.relative_to(self.job.path)),
            "seconds": seconds,
            "finished_at": time.time(),
            "outputs": outputs,
            "stats": stats,
        }
        if (attempt_dir / RUN_OUTPUT_DIR).is_dir():
            # What a sink laid out for the run (the write task's outputs, or token shards).
            done["run_output"] = str((attempt_dir / RUN_OUTPUT_DIR).relative_to(self.job.path))
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
) -> int:
    """Runs tasks of the staged job until every stage is done or ``max_tasks`` ran (0), or one failed for good (2)."""
    worker = _Worker(job_dir, host or socket.gethostname(), echo, poll_interval or _DEFAULT_POLL)
    return worker.run(max_tasks)
