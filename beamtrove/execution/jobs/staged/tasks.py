"""A staged job's tasks and stages as their records say: which stand, what each made, which files are damaged.

A task's done record lists every file it made, with its size and SHA-256:
the datasets later tasks read (under ``data/`` in its attempt) and what it
laid out for the run itself (under ``output/``: the write task's outputs, a
staged sink's token files).

Once every task of a stage is done, the stage is *sealed*: one worker lists
its outputs once, by partition, under ``stages/<stage>/``, with a token::

    stages/<stage>/seal.json                 token, and the seals of the stages it read
    stages/<stage>/partitions/<NNNNN>.json   {dataset: [file entries]} for the tasks that read one partition
    stages/<stage>/whole.json                {dataset: [file entries]} for those that read a dataset whole

so a task reads one listing per stage it reads, however many tasks made
them, and its done record names the seals it read (``read``). A seal stands
while the seals it read stand. A task redone (its file was damaged, or
``retry`` requeued it) unseals its stage and every stage that read it: their
done records, made from files of the old seal, are *outdated*, and the next
sealing runs those tasks again. Before a task reads a file, its size and
SHA-256 are checked against the listing: a damaged file is never read, and
its producer is redone (:class:`~beamtrove.execution.jobs.task.RedoFirst`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from beamtrove.execution.jobs.jobdir import DamagedRecord, JobDir
from beamtrove.execution.jobs.staged.plan import JobPlan
from beamtrove.execution.jobs.task import RedoFirst
from beamtrove.fs import file_damage, file_sha256
from beamtrove.transforms.stages import Stage

__all__ = [
    "DATA_DIR",
    "RUN_OUTPUT_DIR",
    "StagedTasks",
    "TaskFiles",
    "file_entries",
    "task_id",
]

#: Where a task's datasets go in its attempt directory.
DATA_DIR = "data"
#: Where a task lays out what it writes for the run itself (the write task's outputs, token shards).
RUN_OUTPUT_DIR = "output"
_STAGES = "stages"
_SEAL = "seal.json"
_WHOLE = "whole.json"
_PARTITIONS = "partitions"


def task_id(stage: Stage, index: int) -> str:
    """The name of a stage's task: its stage, then its partition."""
    return f"{stage.name}-{index:05d}"


def file_entries(directory: pathlib.Path) -> list[dict[str, Any]]:
    """``{"path", "bytes", "sha256"}`` of every file under ``directory``, by relative path: a task's run output."""
    return [
        {"path": str(path.relative_to(directory)), "bytes": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(p for p in directory.rglob("*") if p.is_file())
    ]


class TaskFiles:
    """The verified files one task reads: its inputs and sides by tag, and the seals of the stages they come from."""

    def __init__(self):
        self.reads: dict[str, list[str]] = {}
        self.sides: dict[str, list[str]] = {}
        #: Producer stage -> the token of the seal whose files were read.
        self.seals: dict[str, str] = {}


class StagedTasks:
    """The tasks and stage seals of one staged job.

    Args:
        job: The job directory.
        plan: Its stages.
    """

    def __init__(self, job: JobDir, plan: JobPlan):
        self.job = job
        self.plan = plan
        self._stages = {stage.name: stage for stage in plan.stages}
        self._task_stage = {
            task_id(stage, index): (stage, index) for stage in plan.stages for index in range(plan.tasks(stage))
        }
        # Stage -> the stages whose datasets it reads, and how each dataset is read: by partition or whole.
        self.inputs = {stage.name: self._input_stages(stage) for stage in plan.stages}
        self._whole_read = {
            dataset
            for stage in plan.stages
            for dataset in (
                *stage.sides.values(),
                *((name for names in stage.reads.values() for name in names) if stage.whole else ()),
            )
        }

    def _input_stages(self, stage: Stage) -> list[str]:
        datasets = [name for names in stage.reads.values() for name in names] + list(stage.sides.values())
        return sorted({self.plan.producers[dataset].name for dataset in datasets})

    def ids(self, stage: Stage) -> list[str]:
        """The stage's tasks, in partition order."""
        return [task_id(stage, index) for index in range(self.plan.tasks(stage))]

    def stage_of(self, task: str) -> tuple[Stage, int]:
        """The stage of ``task`` and its partition (or input shard)."""
        return self._task_stage[task]

    # Seals.

    def _seal_dir(self, stage: str) -> pathlib.Path:
        return self.job.path / _STAGES / stage

    def seal(self, stage: str) -> dict[str, Any] | None:
        """The stage's seal, None when it has none (or a damaged one, which is archived)."""
        try:
            seal = json.loads((self._seal_dir(stage) / _SEAL).read_bytes())
        except FileNotFoundError:
            if self._seal_dir(stage).exists():
                self.unseal(stage)  # a seal is written whole: a folder without one was damaged
            return None
        except ValueError:
            self.unseal(stage)
            return None
        return seal

    def current_seals(
        self, memo: dict[str, str | None] | None = None, upto: str | None = None
    ) -> dict[str, str | None]:
        """Stage -> the token of its seal that stands (None: not sealed, or sealed from seals replaced since).

        Args:
            memo: Filled in and returned: a look at the job reads each seal once.
            upto: Stop after this stage.
        """
        memo = {} if memo is None else memo
        for stage in self.plan.stages:
            if stage.name not in memo:
                seal = self.seal(stage.name)
                stands = seal is not None and all(memo.get(name) == token for name, token in seal["read"].items())
                memo[stage.name] = seal["token"] if stands else None
            if stage.name == upto:
                break
        return memo

    def unseal(self, stage: str) -> None:
        """Archives the stage's seal, and the seals of the stages that read it, into ``history/``."""
        for name in [stage, *self._readers(stage)]:
            directory = self._seal_dir(name)
            if directory.exists():
                with contextlib.suppress(FileNotFoundError):  # another worker archived it first
                    self.job.archive([directory], f"seal-{name}")

    def _readers(self, stage: str) -> list[str]:
        """The stages that read ``stage``'s datasets, directly or through others, in plan order."""
        readers: set[str] = set()
        for other in self.plan.stages:
            if set(self.inputs[other.name]) & (readers | {stage}):
                readers.add(other.name)
        return [other.name for other in self.plan.stages if other.name in readers]

    def try_seal(self, stage: Stage, seals: Mapping[str, str | None]) -> dict[str, str]:
        """Seals ``stage``, whose every task has a done record; returns the tasks that must run again first, and why.

        Every done record is read once here: a damaged one, or one made from seals replaced since, is requeued
        (and returned) instead; a task whose record went meanwhile (requeued by another worker) is returned.
        Otherwise the stage's listings are written beside its final place and renamed there whole; a worker that
        finds it sealed by another first leaves it.
        """
        wanted = {name: seals.get(name) for name in self.inputs[stage.name]}
        entries: dict[str, dict[int, list[dict[str, Any]]]] = {}
        redo, missing = {}, []
        for task in self.ids(stage):
            try:
                done = self.job.read_done(task)
            except DamagedRecord:
                redo[task] = "its done record cannot be read"
                continue
            if done is None:  # requeued since this worker saw it done: it is another's to run
                missing.append(task)
                continue
            if done.get("read", {}) != wanted:
                redo[task] = "its done record was made from files of tasks redone since"
                continue
            for dataset, partitions in done["outputs"].items():
                for partition, files in partitions.items():
                    for entry in files:
                        path = str(pathlib.Path(done["attempt"]) / DATA_DIR / entry["path"])
                        listed = {**entry, "path": path, "task": task, "token": done["token"]}
                        entries.setdefault(dataset, {}).setdefault(int(partition), []).append(listed)
        for task in redo:
            self.job.requeue(task)
        if redo or missing:
            return {**redo, **dict.fromkeys(missing, "its done record is gone")}
        self._write_seal(stage, wanted, entries)
        return {}

    def _write_seal(
        self, stage: Stage, read: Mapping[str, str | None], entries: Mapping[str, Mapping[int, list[dict[str, Any]]]]
    ) -> None:
        root = self.job.path / _STAGES
        root.mkdir(exist_ok=True)
        staging = root / f".{stage.name}.sealing-{uuid.uuid4().hex}"
        (staging / _PARTITIONS).mkdir(parents=True)
        try:
            by_partition: dict[int, dict[str, list]] = {index: {} for index in range(self.plan.partitions)}
            whole: dict[str, list] = {}
            for dataset in stage.writes:
                partitions = entries.get(dataset, {})
                if dataset in self._whole_read:
                    whole[dataset] = [entry for index in sorted(partitions) for entry in partitions[index]]
                for index, files in partitions.items():
                    by_partition.setdefault(index, {})[dataset] = files
            for index, datasets in by_partition.items():
                (staging / _PARTITIONS / f"{index:05d}.json").write_bytes(json.dumps(datasets).encode())
            (staging / _WHOLE).write_bytes(json.dumps(whole).encode())
            seal = {"stage": stage.name, "token": uuid.uuid4().hex, "read": dict(read), "sealed_at": time.time()}
            (staging / _SEAL).write_bytes(json.dumps(seal).encode())
            with contextlib.suppress(OSError):  # sealed by another worker first
                os.rename(staging, self._seal_dir(stage.name))
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    # What one task reads.

    def files(self, stage: Stage, index: int, seals: Mapping[str, str | None]) -> TaskFiles:
        """The files the task of ``index`` in ``stage`` reads, each checked against its stage's listing.

        Raises:
            RedoFirst: A file is missing or not the size and SHA-256 its listing gives (its producer runs again),
                or a listing is damaged (its stage is sealed again).
        """
        files = TaskFiles()
        partition = None if stage.whole else index
        for tag, datasets in stage.reads.items():
            files.reads[tag] = [path for name in datasets for path in self._dataset(name, partition, files, seals)]
        # A side is small, in whichever partitions its tasks wrote it: every task reads all of it.
        for tag, dataset in stage.sides.items():
            files.sides[tag] = list(self._dataset(dataset, None, files, seals))
        return files

    def _listing(self, producer: str, partition: int | None) -> dict[str, list[dict[str, Any]]]:
        name = _WHOLE if partition is None else f"{_PARTITIONS}/{partition:05d}.json"
        path = self._seal_dir(producer) / name
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError):
            self.unseal(producer)
            first = self.ids(self._stages[producer])[0]
            raise RedoFirst(first, None, f"{path} is damaged or missing; {producer} is sealed again") from None

    def _dataset(self, dataset: str, partition: int | None, files: TaskFiles, seals: Mapping[str, str | None]):
        producer = self.plan.producers[dataset].name
        files.seals[producer] = seals[producer]
        for entry in self._listing(producer, partition).get(dataset, []):
            path = self.job.path / entry["path"]
            damage = file_damage(str(path), entry["bytes"], entry["sha256"])
            if damage:
                raise RedoFirst(entry["task"], entry["token"], f"{damage} ({entry['task']})")
            yield str(path)

    # What a done task made.

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

    def damage(self, done: Mapping[str, Any], *, read: bool) -> str | None:
        """The first file of a done task that is missing or other than its record says; None when all are intact."""
        for path, entry in self.made(done):
            damage = file_damage(str(path), entry["bytes"], entry["sha256"], read=read)
            if damage:
                return damage
        return None

    def done_records(self, stages: Sequence[Stage] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(task, done record)`` of every task of ``stages`` (all by default) that has one, stage by stage."""
        for stage in self.plan.stages if stages is None else stages:
            for task in self.ids(stage):
                done = self.job.read_done(task)
                if done is not None:
                    yield task, done
