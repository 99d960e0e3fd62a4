"""What a kind of job is to the engine, and the one place that chooses a job's kind: its manifest's ``kind``.

The engine (:mod:`~beamtrove.execution.jobs.worker`, ``status``, ``merge``)
claims, attempts, records, verifies and merges tasks the same way for every
job. What a task is, how one runs, what its done record adds and how the
job's outputs are laid out is its kind's:

* ``shards`` (:mod:`~beamtrove.execution.jobs.shards`): each task is a shard
  of the input, run by a shard-safe pipeline in a child process;
* ``staged`` (:mod:`~beamtrove.execution.jobs.staged.kind`): each task is one
  partition of one stage of a pipeline with global steps, run as a Beam
  pipeline in the worker's process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from beamtrove.execution.jobs.jobdir import SHARDS_KIND, STAGED_KIND, ElasticError, JobDir
from beamtrove.execution.jobs.task import Attempt, OpenTasks, RedoFirst, TaskFailed

if TYPE_CHECKING:
    from beamtrove.pipelines.spec import PipelineSpec

__all__ = ["Attempt", "JobKind", "OpenTasks", "RedoFirst", "TaskFailed", "job_kind"]

# Each kind's module, imported when a job of that kind is opened: a shard job's status is read without Beam
# (start-up time), and a staged job's plan is made of Beam transforms.
_KINDS = {
    SHARDS_KIND: ("beamtrove.execution.jobs.shards", "ShardJob"),
    STAGED_KIND: ("beamtrove.execution.jobs.staged.kind", "StagedJob"),
}


class JobKind(Protocol):
    """A kind of job: its tasks, how one runs, how its outputs are checked, laid out and counted."""

    job: JobDir
    manifest: dict[str, Any]
    #: The job's pipeline.
    spec: PipelineSpec
    #: What its tasks are called in messages: ``shard`` or ``task``.
    noun: str
    #: Seconds between a worker's looks for claimable tasks while all are running elsewhere.
    poll_interval: float
    #: Whether a worker says how far the job is after each task (reading every task's state).
    states_after_each_task: bool

    # What workers do.

    def describe(self) -> str:
        """The job in a few words, for ``prepare``: its tasks and its input."""

    def check_unchanged(self) -> None:
        """Refuses a job whose input or files read changed since it was prepared (:class:`ElasticError`)."""

    def running(self) -> Any:
        """A context manager around a worker's run of tasks."""

    def open_tasks(self) -> Iterator[str] | None:
        """Tasks a worker may claim now, in order (:class:`OpenTasks`), none while those left run elsewhere; None
        when none is left."""

    def prepare(self, task: str) -> Any:
        """What an attempt of ``task`` needs, checked (its input's bytes, its producers' files); may raise
        :class:`RedoFirst`."""

    def run(self, task: str, work: Any, attempt: Attempt) -> dict[str, Any]:
        """Runs one attempt, its lock kept fresh (:meth:`Attempt.beating`); returns what its done record adds.

        Raises :class:`TaskFailed` when the attempt failed.
        """

    def requeue(self, task: str, *, holding_lock: bool = False) -> None:
        """Archives the task's records and attempts (and what was made from them) so workers run it again."""

    def redo(self, redo: RedoFirst) -> None:
        """Requeues the producer named by ``redo`` unless it was redone since; its lock is held."""

    # What status and verify read.

    def task_ids(self) -> Iterator[tuple[str, str | None]]:
        """Every task with its group (a staged job's stage, else None), in the order workers run them."""

    def records_in(self, task: str) -> int:
        """The input records of ``task`` (for the time left), 0 when unknown."""

    def judge(self, task: str, done: Mapping[str, Any], *, read: bool, memo: dict) -> tuple[str, str | None]:
        """``("done", None)``, ``("damaged", what is wrong)`` or ``("outdated", why)`` of a task with a done record."""

    def documents(self, task: str, done: Mapping[str, Any]) -> int:
        """The documents of the job's output that ``done`` counts."""

    def mismatches(self, task: str, done: Mapping[str, Any]) -> str | None:
        """Where the done record disagrees with the manifest, for ``verify``; None when it agrees."""

    # What a merge lays out.

    def steps(self) -> list[Mapping[str, Any]]:
        """The step counters of every done task."""

    def flow(self, output: str) -> Any:
        """The pipeline's flow as the job's options build it, writing into ``output``."""

    def stats_details(self) -> dict[str, Any]:
        """What ``stats.json`` says of the job's kind (a staged job's ``staged`` section), beside every job's."""

    def lay_out(self, folder: str, *, link: bool) -> None:
        """Puts the job's outputs into ``folder`` as one run folder."""


def job_kind(job: JobDir, *, echo: Callable[[str], None] = print, **options: Any) -> JobKind:
    """The kind of the job in ``job``, from its manifest: the one place a job's kind is decided.

    Args:
        job: The job directory.
        echo: Where the kind's progress lines go.
        options: The worker's options of the kind: its ``host``, a shard job's ``sort_memory``.

    Raises:
        ElasticError: The manifest is damaged, of another version, or of an unknown kind.
    """
    manifest = job.manifest()
    if manifest.get("kind") not in _KINDS:
        raise ElasticError(f"{job.path}: a job of unknown kind {manifest.get('kind')!r}; prepare it again.")
    module, name = _KINDS[manifest["kind"]]
    return getattr(importlib.import_module(module), name)(job, manifest, echo=echo, **options)
