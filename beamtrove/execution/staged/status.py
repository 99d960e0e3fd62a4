"""What ``beamtrove elastic status``, ``verify`` and ``merge`` do for a staged job.

Task states are those of elastic shards (``done``, ``running``, ``stale``,
``pending``, ``failed``, ``damaged``), and task records are read as shard
records are, so ``retry`` requeues tasks as it requeues shards. A done task
is ``damaged`` when one of its files is missing or of another size;
``verify`` also compares every file's SHA-256. A task whose done record was
made from files of a task redone since is ``pending``: workers run it again.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
from typing import Any

from beamtrove.execution.elastic.jobdir import ElasticError, JobDir
from beamtrove.execution.elastic.status import STATES, DamagedRecord, read_failed
from beamtrove.execution.staged.plan import JobPlan
from beamtrove.execution.staged.tasks import CURRENT, OUTDATED, UNREADABLE, StagedTasks, file_damage
from beamtrove.fs import is_local, join, put_file
from beamtrove.stats import merge_stats, order_steps

__all__ = [
    "damaged_run_outputs",
    "format_task_status",
    "lay_out_run_outputs",
    "staged_stats",
    "task_states",
    "verify_staged",
]


def task_states(job: JobDir, plan: JobPlan, *, read: bool = False) -> list[dict[str, Any]]:
    """One entry per task, stage by stage: ``id``, ``stage``, ``state``, ``attempts`` and what it did or why not.

    Args:
        job: The job directory.
        plan: Its stages.
        read: Compare every file's SHA-256 with its done record's, not only its size.
    """
    tasks = StagedTasks(job, plan)
    timeout = plan.manifest["lock_timeout"]
    memo: dict[str, str] = {}
    states = []
    for stage in plan.stages:
        for task in tasks.ids(stage):
            entry = {"id": task, "stage": stage.name, "attempts": len(job.attempts(task)), "records_in": 0}
            state = tasks.state(task, memo)
            if state == UNREADABLE:
                try:
                    tasks.done(task)
                except DamagedRecord as exc:
                    entry.update(state="damaged", damage=exc.damage, message=str(exc))
                    states.append(entry)
                    continue
            done = tasks.done(task) if state in (CURRENT, OUTDATED) else None
            failed = None
            if done is None:
                try:
                    failed = read_failed(job, task)
                except DamagedRecord as exc:
                    entry.update(state="damaged", damage=exc.damage, message=str(exc))
                    states.append(entry)
                    continue
            if state == CURRENT:
                damage = tasks.damage(done, read=read)
                entry.update(owner=f"{done['host']}:{done['pid']}", records=done["records"], seconds=done["seconds"])
                entry.update(state="done" if damage is None else "damaged", **({"message": damage} if damage else {}))
            elif failed is not None:
                entry.update(state="failed", owner=failed["host"], error=failed["error"])
            else:
                lock_state, claim = job.lock_state(task, timeout)
                entry["state"] = "pending" if lock_state == "free" else lock_state
                if state == OUTDATED:
                    entry["message"] = "made from files of a task redone since: workers run it again"
                if claim:
                    entry.update(owner=f"{claim['host']}:{claim['pid']}", since=claim["acquired_at"])
            states.append(entry)
    return states


def format_task_status(states: list[dict[str, Any]], show_all: bool = False) -> str:
    """What ``status`` prints for a staged job: each stage's task counts, then the tasks not done."""
    stages: dict[str, list[dict[str, Any]]] = {}
    for entry in states:
        stages.setdefault(entry["stage"], []).append(entry)
    done = sum(entry["state"] == "done" for entry in states)
    lines = [f"{len(states)} tasks in {len(stages)} stages: {done} done"]
    for name, entries in stages.items():
        counts = ", ".join(
            f"{count} {state}" for state in STATES if (count := sum(entry["state"] == state for entry in entries))
        )
        lines.append(f"  {name:<40} {len(entries):>5} tasks: {counts}")
    for entry in states:
        if entry["state"] == "done" and not show_all:
            continue
        detail = entry.get("message") or entry.get("error") or entry.get("owner", "")
        lines.append(f"    {entry['id']}  {entry['state']:<8} attempts {entry['attempts']}  {detail}")
    return "\n".join(lines)


def verify_staged(job: JobDir, plan: JobPlan, expect_hosts: int | None = None) -> dict[str, Any]:
    """``verify`` of a staged job: every task done, every file it lists intact (size and SHA-256)."""
    states = task_states(job, plan, read=True)
    hosts: dict[str, int] = {}
    for entry in states:
        if entry["state"] == "done":
            host = entry["owner"].rsplit(":", 1)[0]
            hosts[host] = hosts.get(host, 0) + 1
    missing = [entry["id"] for entry in states if entry["state"] in ("pending", "running", "stale")]
    failed = [entry["id"] for entry in states if entry["state"] == "failed"]
    problems = [f"{entry['id']}: {entry['message']}" for entry in states if entry["state"] == "damaged"]
    complete = not missing and not failed and not problems
    kept = 0
    if complete:
        producers = list({plan.producers[dataset].name: plan.producers[dataset] for dataset in plan.kept}.values())
        for _, done in StagedTasks(job, plan).done_records(producers):
            for dataset, partitions in done["outputs"].items():
                if dataset in plan.kept:
                    kept += sum(entry["records"] for entries in partitions.values() for entry in entries)
    return {
        "complete": complete,
        "missing": missing,
        "failed": failed,
        "problems": problems,
        "mismatches": [],
        "hosts": hosts,
        "documents": kept,
        "ok": complete and (expect_hosts is None or len(hosts) >= expect_hosts),
    }


def staged_stats(job: JobDir, plan: JobPlan) -> dict[str, Any]:
    """Every done task's step counters added up, in the flow's order."""
    runs = [done["stats"] for _, done in StagedTasks(job, plan).done_records()]
    return order_steps(merge_stats(runs), plan.flow.funnel, plan.flow.writers)


def damaged_run_outputs(job: JobDir, plan: JobPlan) -> list[str]:
    """The tasks one of whose files laid out for the run (the write task's, a staged sink's) is missing or is not
    the size and SHA-256 its done record gives: they must run again before the run is published."""
    tasks = StagedTasks(job, plan)
    return [
        task
        for task, done in tasks.done_records()
        if any(file_damage(path, entry, read=True) for path, entry in tasks.laid_out(done))
    ]


def lay_out_run_outputs(job: JobDir, plan: JobPlan, folder: str, *, link: bool) -> None:
    """Puts what tasks laid out for the run into ``folder`` (a run's staging folder), as their done records list it.

    The files are copied, or hard-linked: the job directory keeps its files
    until the run is published, so a publish stopped at any point is laid
    out again from them (check them first with :func:`damaged_run_outputs`).

    Args:
        job: The job directory.
        plan: Its stages.
        folder: Where to lay the files out.
        link: Hard-link the files where the file system allows it (a run whose job directory goes once it is
            published), rather than copy them (a job directory that stays, whose files must not change with
            the published ones).

    Raises:
        ElasticError: Two tasks laid out the same file.
    """
    tasks = StagedTasks(job, plan)
    laid_out: set[str] = set()
    for _, done in tasks.done_records():
        for source, entry in tasks.laid_out(done):
            if entry["path"] in laid_out:
                raise ElasticError(f"{join(folder, entry['path'])} is laid out by two tasks (the second: {source}).")
            laid_out.add(entry["path"])
            _place(source, join(folder, entry["path"]), link=link)


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
