"""Task states, and re-queueing failed or damaged tasks: ``beamtrove elastic status`` and ``retry``, for every kind."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from beamtrove.execution.jobs.jobdir import DamagedRecord, ElasticError, JobDir
from beamtrove.execution.jobs.kinds import JobKind, job_kind
from beamtrove.progress import format_duration

__all__ = ["STATES", "damage_line", "format_status", "job_progress", "retry_tasks", "state_counts", "task_states"]

#: The states of a task, in the order status lists their counts.
STATES = ("done", "running", "stale", "pending", "failed", "damaged")

#: The states ``retry`` re-queues when named: a running task belongs to its worker, an intact done one is finished.
_RETRYABLE = ("stale", "pending", "failed", "damaged")


def task_states(job_dir: str | os.PathLike, kind: JobKind | None = None, *, read: bool = False) -> list[dict[str, Any]]:
    """One entry per task, in the order workers run them: ``id``, ``state``, ``attempts``, and what it did or why not.

    States: ``done`` (a done record exists and the files it lists are intact),
    ``damaged`` (a done record exists, but a file it lists is missing or of
    another size, or with ``read`` other bytes: ``damage`` says which; or its
    done or failure record is itself damaged: ``damage`` says how, ``record``
    names it and ``message`` says what to do),
    ``failed`` (out of attempts), ``running`` (locked, with a fresh heartbeat),
    ``stale`` (locked, heartbeat older than the lock timeout: its worker died
    or hangs) and ``pending`` (a staged task whose done record was made from
    files redone since is pending too, with a ``message`` saying so). A staged
    job's entries name their ``stage``.

    Args:
        job_dir: The job directory.
        kind: Its kind, when the caller has it opened already.
        read: Compare every file's SHA-256 with its record's, not only its size.
    """
    job = JobDir(job_dir)
    kind = kind or job_kind(job)
    timeout = kind.manifest["lock_timeout"]
    memo: dict[str, Any] = {}
    states = []
    for task, group in kind.task_ids():
        entry: dict[str, Any] = {"id": task, "records_in": kind.records_in(task), "attempts": len(job.attempts(task))}
        if group is not None:
            entry["stage"] = group
        try:
            done = job.read_done(task)
            failed = None if done is not None else job.read_failed(task)
        except DamagedRecord as exc:
            entry.update(
                state="damaged", damage=exc.damage, record=str(exc.path.relative_to(job.path)), message=str(exc)
            )
            states.append(entry)
            continue
        judged = kind.judge(task, done, read=read, memo=memo) if done is not None else None
        if judged is not None and judged[0] != "outdated":
            state, damage = judged
            entry.update(state=state, owner=f"{done['host']}:{done['pid']}", documents=kind.documents(task, done))
            if "seconds" in done and "finished_at" in done:
                entry.update(seconds=done["seconds"], started_at=done["finished_at"] - done["seconds"])
            if damage:
                entry["damage"] = damage
        elif failed is not None:
            entry.update(state="failed", owner=failed["host"], error=failed["error"])
        else:
            lock_state, claim = job.lock_state(task, timeout)
            entry["state"] = "pending" if lock_state == "free" else lock_state
            if judged is not None:
                entry["message"] = judged[1]
            if claim:
                entry.update(owner=f"{claim['host']}:{claim['pid']}", since=claim["acquired_at"])
        states.append(entry)
    return states


def damage_line(job_dir: str | os.PathLike, entry: dict[str, Any]) -> str:
    """What is wrong with a damaged task, and the command that runs it again."""
    if entry.get("message"):
        return entry["message"]
    command = f"beamtrove elastic retry --job-dir {job_dir} --task {entry['id']}"
    return f"{entry['id']}: {entry['damage']}: `{command}` runs it again"


def _tasks_to_retry(
    states: dict[str, dict[str, Any]], tasks: Iterable[str], all_failed: bool, all_damaged: bool
) -> list[str]:
    """The named tasks and those the ``all_*`` flags select, once each, in that order."""
    selected = [state for flag, state in ((all_failed, "failed"), (all_damaged, "damaged")) if flag]
    wanted = [*tasks, *(task for task, entry in states.items() if entry["state"] in selected)]
    if not wanted:
        raise ElasticError(
            f"Nothing to retry: no task is {' or '.join(selected)}." if selected else "Name tasks to retry."
        )
    return list(dict.fromkeys(wanted))


def retry_tasks(
    job_dir: str | os.PathLike,
    tasks: Iterable[str] = (),
    all_failed: bool = False,
    all_damaged: bool = False,
    *,
    kind: JobKind | None = None,
) -> list[str]:
    """Re-queues tasks: their failure or done record, attempts and stale lock move to ``history/``.

    Args:
        job_dir: The job directory.
        tasks: Tasks to re-queue: failed, damaged, stale or pending ones.
        all_failed: Also re-queue every failed task.
        all_damaged: Also re-queue every damaged task (see :func:`task_states`).
        kind: Its kind, when the caller has it opened already.

    Returns:
        The re-queued tasks.

    Raises:
        ElasticError: An unknown task, one that is running or done with intact files, or nothing to retry.
    """
    kind = kind or job_kind(JobDir(job_dir))
    # Files are hashed: a retry must find damaged what verify finds damaged.
    states = {entry["id"]: entry for entry in task_states(job_dir, kind, read=True)}
    wanted = _tasks_to_retry(states, tasks, all_failed, all_damaged)
    for task in wanted:
        if task not in states:
            raise ElasticError(f"No task {task!r} in this job (see `beamtrove elastic status --all`).")
        state = states[task]["state"]
        if state == "done":
            raise ElasticError(
                f"{task} is done and its files are intact: only failed, damaged, stale or pending tasks retry."
            )
        if state not in _RETRYABLE:
            raise ElasticError(f"{task} is {state}: only failed, damaged, stale or pending tasks retry.")
    for task in wanted:
        kind.requeue(task)
    return wanted


def state_counts(states: list[dict[str, Any]]) -> dict[str, int]:
    """How many tasks are in each state, in the order of :data:`STATES`."""
    return {state: sum(entry["state"] == state for entry in states) for state in STATES}


def _detail(entry: dict[str, Any]) -> str:
    """What the listing says after a task's state: its owner, and what it did or what went wrong."""
    detail = entry.get("owner", "")
    if "since" in entry:
        detail += f" for {time.time() - entry['since']:.0f} s"
    if entry["state"] == "done":
        detail += f", {entry['documents']} documents"
    if entry["state"] == "damaged":
        # A damaged record names no owner; a damaged file is its owner's.
        detail += entry["message"] if "message" in entry else f": {entry['damage']}"
    elif entry.get("message"):
        detail += f": {entry['message']}"
    if entry["state"] == "failed":
        detail += f": {(entry['error'].strip().splitlines() or [''])[-1]}"
    return detail


def job_progress(states: list[dict[str, Any]], now: float | None = None) -> str:
    """``k/N tasks done``, and the time left at the rate input records were done so far.

    The rate is the done tasks' input records over the time since the first
    of them started, so it counts every worker that ran at once; a failed
    or damaged task, which no worker takes until it is retried, is left out
    of what remains. Tasks whose input records are unknown (a staged job's)
    give no time left.
    """
    done = [entry for entry in states if entry["state"] == "done"]
    line = f"{len(done)}/{len(states)} tasks done"
    left = sum(entry["records_in"] for entry in states if entry["state"] not in ("done", "failed", "damaged"))
    if not done or not left:
        return line
    timed = [entry for entry in done if "started_at" in entry]
    now = time.time() if now is None else now
    elapsed = now - min((entry["started_at"] for entry in timed), default=now)
    records_done = sum(entry["records_in"] for entry in timed)
    if elapsed <= 0 or not records_done:
        return line
    return f"{line} · ETA {format_duration(left * elapsed / records_done)}"


def format_status(states: list[dict[str, Any]], show_all: bool = False) -> str:
    """What ``status`` prints: the counts per state and the time left, each stage's counts (a staged job), then
    each task not done (all with ``show_all``)."""
    counts = state_counts(states)
    stages: dict[str, list[dict[str, Any]]] = {}
    for entry in states:
        if "stage" in entry:
            stages.setdefault(entry["stage"], []).append(entry)
    grouped = f" in {len(stages)} stages" if stages else ""
    counted = ", ".join(f"{counts[state]} {state}" for state in STATES)
    lines = [f"{len(states)} tasks{grouped}: {counted} · {job_progress(states)}"]
    for name, entries in stages.items():
        counted = ", ".join(
            f"{count} {state}" for state in STATES if (count := sum(entry["state"] == state for entry in entries))
        )
        lines.append(f"  {name:<40} {len(entries):>5} tasks: {counted}")
    for entry in states:
        if entry["state"] == "done" and not show_all:
            continue
        lines.append(f"  {entry['id']}  {entry['state']:<8} attempts {entry['attempts']}  {_detail(entry)}")
    return "\n".join(lines)
