"""Staged jobs: each task is one partition of one stage of a pipeline with global steps, run in the worker's process.

A pipeline's flow becomes stages (:mod:`~beamtrove.execution.jobs.staged.plan`).
Workers run the tasks of the first stage not sealed (:mod:`~beamtrove.execution.jobs.staged.tasks`),
so a task's inputs are complete when it starts. A task is a small Beam
pipeline on the local runner: it reads its partition of the datasets it needs,
checked against their stage's listing first, applies its stage and writes its
datasets into its attempt directory
(:mod:`~beamtrove.execution.jobs.staged.datasets`); its done record lists
every file it made with its size and SHA-256, the seals it read, and its step
counters.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import shutil
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beamtrove.execution.direct_runner import pipeline_runner
from beamtrove.execution.jobs.jobdir import ElasticError, JobDir
from beamtrove.execution.jobs.scan import check_shard_bytes, check_unchanged
from beamtrove.execution.jobs.staged.datasets import ReadDataset, WriteDataset, written_files
from beamtrove.execution.jobs.staged.plan import JobPlan
from beamtrove.execution.jobs.staged.tasks import DATA_DIR, RUN_OUTPUT_DIR, StagedTasks, TaskFiles, file_entries
from beamtrove.execution.jobs.task import Attempt, OpenTasks, RedoFirst
from beamtrove.fs import file_damage, is_local, join, put_file
from beamtrove.metrics import collect_stats
from beamtrove.transforms.stages import Stage

__all__ = ["StagedJob", "run_task"]

# Where Beam logs the error of a step that failed, with its traceback.
_STEP_ERRORS = "apache_beam.runners.common"


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


class StagedJob:
    """The kind of a staged job (see :mod:`~beamtrove.execution.jobs.kinds`).

    Args:
        job: The job directory.
        manifest: Its manifest.
        echo: Where progress lines go.
        host: The worker's host, named in the locks it takes.
    """

    noun = "task"
    #: A stage's last tasks take a second or two, and the next stage waits on them; a look costs a few stats.
    poll_interval = 0.2
    #: A task may take a fraction of a second: reading every task's state after each would cost more.
    states_after_each_task = False

    def __init__(
        self,
        job: JobDir,
        manifest: dict[str, Any],
        *,
        echo: Callable[[str], None] = print,
        host: str | None = None,
        **_: Any,
    ):
        self.job = job
        self.host = host or socket.gethostname()
        self.manifest = manifest
        self.echo = echo
        # Resolved once per worker: every task of the job builds its stage from it.
        self.plan = JobPlan(job.path, manifest)
        self.spec = self.plan.spec
        self.tasks = StagedTasks(job, self.plan)
        self._seals: dict[str, str | None] = {}
        # The open tasks of the stage workers are at, as this worker last looked.
        self._open: OpenTasks | None = None
        self._open_stage: str | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """While a worker runs tasks: Beam does not log the error of a step that fails, with its traceback (a
        task's attempt records it, and the worker says in one line that the task failed and why)."""
        logger = logging.getLogger(_STEP_ERRORS)
        level = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            logger.setLevel(level)

    def describe(self) -> str:
        partitions, inputs = self.plan.partitions, len(self.manifest["inputs"])
        return f"a staged job of {partitions} partitions over {inputs} input file(s)"

    def check_unchanged(self) -> None:
        check_unchanged(self.manifest)

    def task_ids(self) -> Iterator[tuple[str, str | None]]:
        for stage in self.plan.stages:
            for task in self.tasks.ids(stage):
                yield task, stage.name

    def records_in(self, task: str) -> int:
        return 0

    def open_tasks(self) -> Iterator[str] | None:
        """The open tasks of the first stage not sealed, sealing each stage once its tasks are all done.

        Reads one seal per stage and, over a stage, a few records per task, whatever the number of tasks.
        """
        while True:
            seals: dict[str, str | None] = {}
            stage = next((s for s in self.plan.stages if self.tasks.current_seals(seals, s.name)[s.name] is None), None)
            if stage is None:
                return None
            if self._open is None or self._open_stage != stage.name:
                self._open, self._open_stage = OpenTasks(self.job, self.tasks.ids(stage)), stage.name
            offered = self._open.offered()
            if offered is not None:
                self._seals = seals
                return offered
            if self._open.failed:  # the stage cannot be sealed until they are retried
                return None
            # One worker seals a stage: it may requeue tasks, which another must not archive at the same time.
            lock = self.job.try_lock(f"seal-{stage.name}", self.host, timeout=self.manifest["lock_timeout"])
            if lock is None:
                return iter(())
            try:
                redo = self.tasks.try_seal(stage, seals)
            finally:
                lock.release()
            for task, why in redo.items():
                self.echo(f"{task}: {why}; running it again")
            if redo:
                self._open = None  # they are open again

    def prepare(self, task: str) -> TaskFiles:
        stage, index = self.tasks.stage_of(task)
        if stage is self.plan.stages[0]:
            check_shard_bytes(self.manifest, self.manifest["shards"][index], task)
        # The seals of the look that offered the task: a seal replaced since shows as a damaged file.
        return self.tasks.files(stage, index, self._seals)

    def run(self, task: str, files: TaskFiles, attempt: Attempt) -> dict[str, Any]:
        stage, index = self.tasks.stage_of(task)
        if stage.idle_with(files.reads):
            stats = {}  # nothing to read, so nothing to write: no pipeline is built
        else:
            with attempt.beating():
                stats = run_task(self.plan, stage, index, files, attempt.directory)
        data = attempt.directory / DATA_DIR
        outputs = written_files(data) if data.exists() else {}
        done = {
            "records": sum(
                entry["records"] for parts in outputs.values() for entries in parts.values() for entry in entries
            ),
            "outputs": outputs,
            "read": {name: files.seals[name] for name in self.tasks.inputs[stage.name]},
            "stats": stats,
        }
        run_output = attempt.directory / RUN_OUTPUT_DIR
        if run_output.is_dir():
            # What a sink laid out for the run (the write task's outputs, or token shards), checked before publishing.
            done["run_output"] = str(run_output.relative_to(self.job.path))
            done["run_files"] = file_entries(run_output)
        return done

    def requeue(self, task: str, *, holding_lock: bool = False) -> None:
        """Requeues ``task`` and unseals its stage and those that read it: what they made from it is outdated."""
        stage, _ = self.tasks.stage_of(task)
        self.job.requeue(task, holding_lock=holding_lock)
        self.tasks.unseal(stage.name)

    def redo(self, redo: RedoFirst) -> None:
        """Requeues the producer of a damaged file, unless another worker redid it since (or it has no record)."""
        if redo.token is None:
            return
        try:
            done = self.job.read_done(redo.task)
        except ElasticError:
            done = {"token": redo.token}
        if done is not None and done.get("token") == redo.token:
            self.requeue(redo.task, holding_lock=True)

    def judge(self, task: str, done: Mapping[str, Any], *, read: bool, memo: dict) -> tuple[str, str | None]:
        """``outdated`` when made from seals replaced since; ``damaged`` when one of its files is missing or of
        another size (or, with ``read``, other bytes); else ``done``."""
        stage, _ = self.tasks.stage_of(task)
        seals = self.tasks.current_seals(memo)
        if done.get("read", {}) != {name: seals.get(name) for name in self.tasks.inputs[stage.name]}:
            return "outdated", "made from files of a task redone since: workers run it again"
        damage = self.tasks.damage(done, read=read)
        return ("damaged", damage) if damage else ("done", None)

    def documents(self, task: str, done: Mapping[str, Any]) -> int:
        """The records of the run's kept documents that ``done`` wrote."""
        return sum(
            entry["records"]
            for dataset, partitions in done["outputs"].items()
            if dataset in self.plan.kept
            for entries in partitions.values()
            for entry in entries
        )

    def mismatches(self, task: str, done: Mapping[str, Any]) -> str | None:
        return None

    def steps(self) -> list[Mapping[str, Any]]:
        """The step counters of every done task."""
        return [done["stats"] for _, done in self.tasks.done_records()]

    def stats_details(self) -> dict[str, Any]:
        return {"staged": {"partitions": self.plan.partitions}}

    def flow(self, output: str):
        """The pipeline's flow as the job's options build it."""
        return self.plan.flow

    def damaged_run_outputs(self) -> list[str]:
        """The tasks one of whose files laid out for the run (the write task's, a staged sink's) is missing or is
        not the size and SHA-256 its done record gives: they must run again before the run is published."""
        return [
            task
            for task, done in self.tasks.done_records()
            if any(file_damage(str(path), entry["bytes"], entry["sha256"]) for path, entry in self.tasks.laid_out(done))
        ]

    def lay_out(self, folder: str, *, link: bool) -> None:
        """Puts what tasks laid out for the run into ``folder`` (a run's staging folder), as their done records list it.

        The files are copied, or hard-linked: the job directory keeps its files
        until the run is published, so a publish stopped at any point is laid
        out again from them (check them first with :meth:`damaged_run_outputs`).

        Args:
            folder: Where to lay the files out.
            link: Hard-link the files where the file system allows it (a run whose job directory goes once it is
                published), rather than copy them (a job directory that stays, whose files must not change with
                the published ones).

        Raises:
            ElasticError: Two tasks laid out the same file.
        """
        laid_out: set[str] = set()
        for _, done in self.tasks.done_records():
            for source, entry in self.tasks.laid_out(done):
                if entry["path"] in laid_out:
                    raise ElasticError(
                        f"{join(folder, entry['path'])} is laid out by two tasks (the second: {source})."
                    )
                laid_out.add(entry["path"])
                _place(str(source), join(folder, entry["path"]), link=link)


def _place(source: str, target: str, *, link: bool) -> None:
    """Puts the job's file ``source`` at ``target``: linked or copied on a local disk, copied to an object store
    (``elastic merge --output gs://...``: the job directory is local, the output is not)."""
    if not is_local(target):
        put_file(source, target)
        return
    pathlib.Path(target).parent.mkdir(parents=True, exist_ok=True)
    if link:
        with contextlib.suppress(OSError):  # another file system, or one without hard links: copied below
            os.link(source, target)
    if not os.path.exists(target):
        shutil.copy2(source, target)
