"""Shard jobs: each task is a shard of the input, run by a shard-safe pipeline (``beamtrove run``) in a child process.

The child runs ``beamtrove run PIPELINE`` over the shard's input ranges into
its attempt's ``output/``; its documents are then collected, sorted by id,
into one ``documents.jsonl.gz`` (:mod:`~beamtrove.execution.jobs.shard_output`)
that the done record describes with the run's step counters
(:mod:`~beamtrove.execution.jobs.shard_attempt`). A merge lays the shards'
outputs out as the parts of one run folder, in manifest order.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import pathlib
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from beamtrove.execution.jobs.jobdir import ElasticError, JobDir
from beamtrove.execution.jobs.shard_output import DEFAULT_SORT_MEMORY
from beamtrove.execution.jobs.task import Attempt, OpenTasks, RedoFirst
from beamtrove.fs import file_damage
from beamtrove.pipelines import pipeline_spec

if TYPE_CHECKING:
    from beamtrove.pipelines.spec import PipelineSpec

__all__ = ["ShardJob"]

# Below this a run would hold only a few documents.
_MIN_SORT_MEMORY = 64 << 10


class ShardJob:
    """The kind of a shard job (see :mod:`~beamtrove.execution.jobs.kinds`).

    Args:
        job: The job directory.
        manifest: Its manifest.
        echo: Where progress lines go.
        sort_memory: Bytes of documents held while sorting a shard's output by id.

    Raises:
        ElasticError: ``sort_memory`` is too small.
    """

    noun = "shard"

    def __init__(
        self,
        job: JobDir,
        manifest: dict[str, Any],
        *,
        echo: Callable[[str], None] = print,
        sort_memory: int = DEFAULT_SORT_MEMORY,
        **_: Any,
    ):
        if sort_memory < _MIN_SORT_MEMORY:
            raise ElasticError(
                f"--sort-memory {sort_memory} is too small: give at least {_MIN_SORT_MEMORY} bytes (64 KiB); "
                f"the default is {DEFAULT_SORT_MEMORY} (256 MiB)."
            )
        self.job = job
        self.manifest = manifest
        self.echo = echo
        self.sort_memory = sort_memory
        self._shards = {shard["id"]: shard for shard in manifest["shards"]}
        self._open = OpenTasks(job, self._shards)
        # A shard takes minutes: the job's states, read after each, cost little beside it.
        self.states_after_each_task = True
        # A shard takes minutes; its worker may die and leave it to be taken over once its lock is stale.
        self.poll_interval = min(manifest["lock_timeout"] / 5, 10.0)

    @functools.cached_property
    def _attempts(self) -> ModuleType:
        """What runs shards and merges them: imported by workers and merges, never by ``elastic status``, which
        reads a job without Beam (start-up time)."""
        from beamtrove.execution.jobs import shard_attempt  # noqa: PLC0415 - it imports Beam (start-up time)

        return shard_attempt

    @functools.cached_property
    def _scan(self) -> ModuleType:
        """What checks the input against the manifest: imported by workers, never by ``elastic status``."""
        from beamtrove.execution.jobs import scan  # noqa: PLC0415 - it imports Beam (start-up time)

        return scan

    @functools.cached_property
    def spec(self) -> PipelineSpec:
        """The job's pipeline (looked up when used: it imports Beam, which status does without)."""
        return pipeline_spec(self.manifest["pipeline"]["name"])

    def shard(self, task: str) -> dict[str, Any]:
        """The manifest's entry of the shard ``task``."""
        return self._shards[task]

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """While a worker runs this job's tasks: nothing to set up, attempts run in their own processes."""
        yield

    def describe(self) -> str:
        records = sum(shard["records"] for shard in self._shards.values())
        return f"{len(self._shards)} shards over {len(self.manifest['inputs'])} input file(s), {records} records"

    def check_unchanged(self) -> None:
        self._scan.check_unchanged(self.manifest)

    def task_ids(self) -> Iterator[tuple[str, str | None]]:
        for shard_id in self._shards:
            yield shard_id, None

    def records_in(self, task: str) -> int:
        return self._shards[task]["records"]

    def open_tasks(self) -> Iterator[str] | None:
        offered = self._open.offered()
        if offered is None:
            # Every shard seen finished: one fresh look finds those requeued meanwhile (`retry` while workers run).
            self._open = OpenTasks(self.job, self._shards)
            offered = self._open.offered()
        return offered

    def prepare(self, task: str) -> None:
        self._scan.check_shard_bytes(self.manifest, self._shards[task], task)

    def requeue(self, task: str, *, holding_lock: bool = False) -> None:
        self.job.requeue(task, holding_lock=holding_lock)

    def redo(self, redo: RedoFirst) -> None:  # pragma: no cover - shards read no task's files
        raise AssertionError(f"a shard job's tasks read no other task's files ({redo.task})")

    def run(self, task: str, work: None, attempt: Attempt) -> dict[str, Any]:
        return self._attempts.run(self, task, attempt)

    def judge(self, task: str, done: Mapping[str, Any], *, read: bool, memo: dict) -> tuple[str, str | None]:
        """``done``, or ``damaged`` when the shard's documents are missing, or not the file its record describes
        (its size, its SHA-256 unless unchanged since, by modification time; with ``read``, always its SHA-256 and
        its count of documents)."""
        path = self.job.path / done["output"] if done.get("output") else None
        if path is None:
            return "damaged", "its done record names no output"
        trust = not read and _unchanged_since(path, done)
        damage = None if trust else file_damage(str(path), done.get("bytes"), done.get("sha256"))
        if damage is None and read:
            damage = _count_damage(path, done["records"])
        return ("damaged", damage) if damage else ("done", None)

    def documents(self, task: str, done: Mapping[str, Any]) -> int:
        return done["records"]

    def mismatches(self, task: str, done: Mapping[str, Any]) -> str | None:
        """Where the manifest and the shard's done record disagree: its input checksum or the records read."""
        shard = self._shards[task]
        if done.get("input_sha256") != shard["sha256"]:
            return (
                f"{task}: the manifest gives its input the SHA-256 {shard['sha256']}, "
                f"its done record {done.get('input_sha256')}"
            )
        read = done.get("records_read")
        if read is None:
            return f"{task}: its done record does not say how many records its run read"
        if any("scan_error" in self.manifest["inputs"][segment["input"]] for segment in shard["segments"]):
            # Past an unreadable record the reader still counts what it finds, so the manifest's count is a floor.
            if read < shard["records"]:
                return f"{task}: the manifest says it holds at least {shard['records']} records, its run read {read}"
        elif read != shard["records"]:
            return f"{task}: the manifest says it holds {shard['records']} records, its run read {read}"
        return None

    def done_records(self) -> list[dict[str, Any]]:
        """Every shard's done record, in manifest order (a merge runs once every shard is done)."""
        return [self.job.read_done(shard_id) for shard_id in self._shards]

    def steps(self) -> list[Mapping[str, Any]]:
        """The step counters of every shard's run, in manifest order."""
        return [done["stats"] for done in self.done_records() if done["stats"] is not None]

    def stats_details(self) -> dict[str, Any]:
        return {}

    def flow(self, output: str):
        """The pipeline's flow as the job's options build it, writing into ``output``."""
        return self._attempts.flow(self, output)

    def lay_out(self, folder: str, *, link: bool) -> None:
        """Puts the shards' outputs into ``folder`` as the parts of one run, in manifest order (see
        :func:`~beamtrove.execution.jobs.shard_attempt.lay_out`)."""
        self._attempts.lay_out(self, folder)


def _unchanged_since(path: pathlib.Path, done: Mapping[str, Any]) -> bool:
    """Whether the file has the size and modification time its done record gives (status then skips hashing it)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return stat.st_size == done.get("bytes") and stat.st_mtime_ns == done.get("mtime_ns")


def _count_damage(path: pathlib.Path, records: int) -> str | None:
    """Whether the gzip file holds ``records`` lines, else what is wrong."""
    try:
        with gzip.open(path, "rb") as source:
            found = sum(1 for _ in source)
    except (OSError, EOFError) as exc:
        return f"{path} is unreadable: {exc}"
    return None if found == records else f"{path} holds {found} documents, its done record says {records}"
