"""What ``beamtrove elastic status``, ``verify`` and ``merge`` do for a staged job.

Task states are those of elastic shards (``done``, ``running``, ``stale``,
``pending``, ``failed``, ``damaged``), and task records are read as shard
records are, so ``retry`` requeues tasks as it requeues shards. A done task
is ``damaged`` when one of its files is missing or of another size;
``verify`` also compares every file's SHA-256.
"""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

from beamtrove.execution.elastic.jobdir import JobDir
from beamtrove.execution.elastic.status import STATES, DamagedRecord, read_done, read_failed
from beamtrove.execution.staged.plan import JobPlan
from beamtrove.execution.staged.worker import DATA_DIR, task_id
from beamtrove.fs import file_sha256
from beamtrove.stats import merge_stats, order_steps

__all__ = [
    "copy_run_outputs",
    "file_damage",
    "format_task_status",
    "run_outputs",
    "staged_stats",
    "task_states",
    "verify_staged",
]


def _files(job: JobDir, done: dict[str, Any]) -> Iterator[tuple[pathlib.Path, dict[str, Any]]]:
    for partitions in done["outputs"].values():
        for entries in partitions.values():
            for entry in entries:
                yield job.path / done["attempt"] / DATA_DIR / entry["path"], entry


def file_damage(job: JobDir, done: dict[str, Any], *, read: bool) -> str | None:
    """The first file of a done task that is missing or other than its record says; None when all are intact."""
    for path, entry in _files(job, done):
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != entry["bytes"]:
            return f"{path} is {path.stat().st_size} B, its done record says {entry['bytes']} B"
        if read and file_sha256(path) != entry["sha256"]:
            return f"{path} does not have the SHA-256 its done record gives"
    if done.get("run_output") and not (job.path / done["run_output"]).is_dir():
        return f"{job.path / done['run_output']} is missing"
    return None


def task_states(job: JobDir, plan: JobPlan, *, read: bool = False) -> list[dict[str, Any]]:
    """One entry per task, stage by stage: ``id``, ``stage``, ``state``, ``attempts`` and what it did or why not."""
    timeout = plan.manifest["lock_timeout"]
    states = []
    for stage in plan.stages:
        for index in range(plan.tasks(stage)):
            task = task_id(stage, index)
            entry = {"id": task, "stage": stage.name, "attempts": len(job.attempts(task)), "records_in": 0}
            try:
                done = read_done(job, task)
                failed = None if done is not None else read_failed(job, task)
            except DamagedRecord as exc:
                entry.update(state="damaged", damage=exc.damage, message=str(exc))
                states.append(entry)
                continue
            if done is not None:
                damage = file_damage(job, done, read=read)
                entry.update(owner=f"{done['host']}:{done['pid']}", records=done["records"], seconds=done["seconds"])
                entry.update(state="done" if damage is None else "damaged", **({"message": damage} if damage else {}))
            elif failed is not None:
                entry.update(state="failed", owner=failed["host"], error=failed["error"])
            else:
                state, claim = job.lock_state(task, timeout)
                entry["state"] = "pending" if state == "free" else state
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
    producers = {plan.producers[dataset].name: plan.producers[dataset] for dataset in plan.kept}
    for stage in producers.values():
        for index in range(plan.tasks(stage)):
            done = read_done(job, task_id(stage, index)) if complete else None
            for dataset, partitions in (done or {}).get("outputs", {}).items():
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
    runs = []
    for stage in plan.stages:
        for index in range(plan.tasks(stage)):
            done = read_done(job, task_id(stage, index))
            if done is not None:
                runs.append(done["stats"])
    return order_steps(merge_stats(runs), plan.flow.funnel, plan.flow.writers)


def run_outputs(job: JobDir, plan: JobPlan) -> list[pathlib.Path]:
    """The folders where tasks laid out the run's outputs: the write task's, and a staged sink's tasks'."""
    folders = []
    for stage in plan.stages:
        for index in range(plan.tasks(stage)):
            done = read_done(job, task_id(stage, index))
            if done is not None and done.get("run_output"):
                folders.append(job.path / done["run_output"])
    return folders


def copy_run_outputs(job: JobDir, plan: JobPlan, folder: str, *, move: bool) -> None:
    """Puts what tasks laid out into ``folder`` (a run's staging folder), moved or copied; no two lay out a file.

    Raises:
        FileExistsError: Two tasks laid out the same file.
    """
    for source in run_outputs(job, plan):
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            target = pathlib.Path(folder) / path.relative_to(source)
            if target.exists():
                raise FileExistsError(f"{target} is laid out by two tasks (the second: {path}).")
            target.parent.mkdir(parents=True, exist_ok=True)
            if move:
                path.rename(target)
            else:
                shutil.copy2(path, target)
