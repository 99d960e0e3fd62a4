"""A staged job's tasks as their done records say: which stand, what each made, and which files are damaged.

A task's done record lists every file it made, with its size and SHA-256:
the datasets later tasks read (under ``data/`` in its attempt) and what it
laid out for the run itself (under ``output/``: the write task's outputs, a
staged sink's token files). It also names the done record of every task
whose files it read (their ``token``), so a task redone since (its file was
damaged, or ``retry`` requeued it) makes every task that read its old files
*outdated*: workers redo them in turn, and nothing mixes an old output with
a new one. Before a task reads a file, its size and SHA-256 are checked
against its producer's done record: a damaged file is never read, and its
producer is redone (:class:`DamagedInput`).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from beamtrove.execution.elastic.jobdir import JobDir
from beamtrove.execution.elastic.status import DamagedRecord, read_done
from beamtrove.execution.staged.plan import JobPlan
from beamtrove.fs import file_sha256
from beamtrove.transforms.stages import Stage

__all__ = [
    "CURRENT",
    "DATA_DIR",
    "MISSING",
    "OUTDATED",
    "RUN_OUTPUT_DIR",
    "UNREADABLE",
    "DamagedInput",
    "StagedTasks",
    "TaskFiles",
    "file_entries",
    "task_id",
]

#: Where a task's datasets go in its attempt directory.
DATA_DIR = "data"
#: Where a task lays out what it writes for the run itself (the write task's outputs, token shards).
RUN_OUTPUT_DIR = "output"

#: A task's done record stands: readable, and made from the files its producers' done records describe now.
CURRENT = "current"
#: A task has no done record.
MISSING = "missing"
#: A task's done record was made from files of a task redone since: the task runs again.
OUTDATED = "outdated"
#: A task's done record cannot be read: the task runs again.
UNREADABLE = "unreadable"


def task_id(stage: Stage, index: int) -> str:
    """The name of a stage's task: its stage, then its partition."""
    return f"{stage.name}-{index:05d}"


def file_entries(directory: pathlib.Path) -> list[dict[str, Any]]:
    """``{"path", "bytes", "sha256"}`` of every file under ``directory``, by relative path: a task's run output."""
    return [
        {"path": str(path.relative_to(directory)), "bytes": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(p for p in directory.rglob("*") if p.is_file())
    ]


class DamagedInput(Exception):
    """A file a task would read is missing or is not what its producer's done record says.

    Attributes:
        task: The producer, which must be redone.
        token: The token of the producer's done record found damaged (None when it had none).
    """

    def __init__(self, task: str, token: str | None, message: str):
        super().__init__(message)
        self.task = task
        self.token = token


class TaskFiles:
    """The verified files one task reads: its inputs and sides by tag, and the producers they come from."""

    def __init__(self):
        self.reads: dict[str, list[str]] = {}
        self.sides: dict[str, list[str]] = {}
        #: Producer task -> the token of the done record whose files were read.
        self.producers: dict[str, str] = {}


class StagedTasks:
    """The tasks of one staged job and what their done records say, each record read once while it is unchanged.

    Args:
        job: The job directory.
        plan: Its stages.
    """

    def __init__(self, job: JobDir, plan: JobPlan):
        self.job = job
        self.plan = plan
        self._records: dict[str, tuple[tuple[int, int, int], dict[str, Any] | DamagedRecord]] = {}

    def ids(self, stage: Stage) -> list[str]:
        """The stage's tasks, in partition order."""
        return [task_id(stage, index) for index in range(self.plan.tasks(stage))]

    def done(self, task: str) -> dict[str, Any] | None:
        """The task's done record; None when it has none.

        Raises:
            DamagedRecord: The record cannot be read, or is not one of this task.
        """
        path = self.job.done_path(task)
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._records.pop(task, None)
            return None
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = self._records.get(task)
        if cached is not None and cached[0] == key:
            record = cached[1]
        else:
            try:
                record = read_done(self.job, task)
            except DamagedRecord as exc:
                record = exc
            if record is None:  # archived between the look and the read
                return None
            self._records[task] = (key, record)
        if isinstance(record, DamagedRecord):
            raise record
        return record

    def state(self, task: str, memo: dict[str, str] | None = None) -> str:
        """:data:`CURRENT`, :data:`MISSING`, :data:`OUTDATED` or :data:`UNREADABLE`.

        Args:
            task: The task.
            memo: States found so far in one look at the job: a task's state
                depends on its producers', each looked at once.
        """
        memo = {} if memo is None else memo
        if task not in memo:
            try:
                done = self.done(task)
            except DamagedRecord:
                memo[task] = UNREADABLE
                return memo[task]
            if done is None:
                memo[task] = MISSING
            else:
                stands = all(
                    self.state(producer, memo) == CURRENT and self._token(producer) == token
                    for producer, token in done.get("read", {}).items()
                )
                memo[task] = CURRENT if stands else OUTDATED
        return memo[task]

    def _token(self, task: str) -> str | None:
        done = self.done(task)
        return None if done is None else done.get("token")

    def files(self, stage: Stage, index: int) -> TaskFiles:
        """The files the task of ``index`` in ``stage`` reads, each checked against its producer's done record.

        Raises:
            DamagedInput: A producer has no done record that stands, or one of its files is missing or not the
                size and SHA-256 its done record gives.
        """
        files, memo = TaskFiles(), {}
        partition = None if stage.whole else index
        for tag, datasets in stage.reads.items():
            files.reads[tag] = [path for name in datasets for path in self._dataset(name, partition, files, memo)]
        # A side is one element, in whichever partition its task wrote it: every task reads all of it.
        for tag, dataset in stage.sides.items():
            files.sides[tag] = list(self._dataset(dataset, None, files, memo))
        return files

    def _dataset(self, dataset: str, partition: int | None, files: TaskFiles, memo: dict[str, str]) -> Iterator[str]:
        producer = self.plan.producers[dataset]
        for task in self.ids(producer):
            try:
                done = self.done(task)
            except DamagedRecord as exc:
                raise DamagedInput(task, None, str(exc)) from None
            if done is None or self.state(task, memo) != CURRENT:
                token = None if done is None else done.get("token")
                raise DamagedInput(task, token, f"{task} has no done record that stands, so {dataset} is not complete.")
            files.producers[task] = done["token"]
            partitions = done["outputs"].get(dataset, {})
            chosen = partitions.values() if partition is None else [partitions.get(str(partition), [])]
            for entries in chosen:
                for entry in entries:
                    path = self.job.path / done["attempt"] / DATA_DIR / entry["path"]
                    damage = file_damage(path, entry, read=True)
                    if damage:
                        raise DamagedInput(task, done["token"], f"{damage} ({task})")
                    yield str(path)

    def damage(self, done: Mapping[str, Any], *, read: bool) -> str | None:
        """The first file of a done task that is missing or other than its record says; None when all are intact.

        Args:
            done: The task's done record.
            read: Compare SHA-256s too, reading every file, not only sizes.
        """
        for path, entry in self.made(done):
            damage = file_damage(path, entry, read=read)
            if damage:
                return damage
        return None

    def made(self, done: Mapping[str, Any]) -> Iterator[tuple[pathlib.Path, Mapping[str, Any]]]:
        """Every file a done task made, with its entry in the record: its datasets, then its run output."""
        for partitions in done["outputs"].values():
            for entries in partitions.values():
                for entry in entries:
                    yield self.job.path / done["attempt"] / DATA_DIR / entry["path"], entry
        yield from self.laid_out(done)

    def laid_out(self, done: Mapping[str, Any]) -> Iterator[tuple[pathlib.Path, Mapping[str, Any]]]:
        """The files a done task laid out for the run (its ``output/``), with their entries."""
        if done.get("run_output"):
            for entry in done["run_files"]:
                yield self.job.path / done["run_output"] / entry["path"], entry

    def done_records(self, stages: Sequence[Stage] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(task, done record)`` of every task of ``stages`` (all by default) that has one, stage by stage."""
        for stage in self.plan.stages if stages is None else stages:
            for task in self.ids(stage):
                done = self.done(task)
                if done is not None:
                    yield task, done


def file_damage(path: pathlib.Path, entry: Mapping[str, Any], *, read: bool) -> str | None:
    """What is wrong with a file a done record lists: missing, another size or (``read``) other bytes; else None."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{path} is missing"
    if size != entry["bytes"]:
        return f"{path} is {size} B, its done record says {entry['bytes']} B"
    if read and file_sha256(path) != entry["sha256"]:
        return f"{path} does not have the SHA-256 its done record gives"
    return None
