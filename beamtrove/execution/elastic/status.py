"""Looking at an elastic job's shards and re-queueing the failed ones: ``beamtrove elastic status`` and ``retry``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from beamtrove.execution.elastic.jobdir import ElasticError, JobDir, read_json

__all__ = ["STATES", "format_status", "retry_shards", "shard_states", "state_counts"]

#: The states of a shard, in the order status lists their counts.
STATES = ("done", "running", "stale", "pending", "failed")


def shard_states(job_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """One entry per shard, in manifest order: id, state, owner, attempts, records.

    States: ``done`` (a done record exists), ``failed`` (out of attempts),
    ``running`` (locked, with a fresh heartbeat), ``stale`` (locked, heartbeat
    older than the lock timeout: its worker died or hangs) and ``pending``.
    """
    job = JobDir(job_dir)
    manifest = job.manifest()
    states = []
    for shard in manifest["shards"]:
        shard_id = shard["id"]
        entry = {"id": shard_id, "records_in": shard["records"], "attempts": len(job.attempts(shard_id))}
        done = read_json(job.done_path(shard_id))
        failed = read_json(job.failed_path(shard_id))
        if done is not None:
            entry.update(state="done", owner=f"{done['host']}:{done['pid']}", documents=done["records"])
        elif failed is not None:
            entry.update(state="failed", owner=failed["host"], error=failed["error"])
        else:
            state, claim = job.lock_state(shard_id, manifest["lock_timeout"])
            entry["state"] = "pending" if state == "free" else state
            if claim:
                entry.update(owner=f"{claim['host']}:{claim['pid']}", since=claim["acquired_at"])
        states.append(entry)
    return states


def retry_shards(job_dir: str | os.PathLike, shard_ids: Iterable[str] = (), all_failed: bool = False) -> list[str]:
    """Re-queues shards: their failure, attempts and stale lock move to ``history/``.

    Returns:
        The re-queued shard ids.

    Raises:
        ElasticError: An unknown shard, one that is done or running, or
            nothing to retry.
    """
    job = JobDir(job_dir)
    states = {entry["id"]: entry for entry in shard_states(job_dir)}
    wanted = list(shard_ids)
    if all_failed:
        wanted += [shard_id for shard_id, entry in states.items() if entry["state"] == "failed"]
    if not wanted:
        raise ElasticError("Nothing to retry: no shard is failed." if all_failed else "Name shards to retry.")
    for shard_id in wanted:
        if shard_id not in states:
            raise ElasticError(f"No shard {shard_id!r} in this job (see `beamtrove elastic status --all`).")
        if states[shard_id]["state"] in ("done", "running"):
            raise ElasticError(
                f"{shard_id} is {states[shard_id]['state']}: only failed, stale or pending shards retry."
            )
    for shard_id in dict.fromkeys(wanted):
        job.requeue(shard_id)
    return list(dict.fromkeys(wanted))


def state_counts(states: list[dict[str, Any]]) -> dict[str, int]:
    """How many shards are in each state, in the order of :data:`STATES`."""
    return {state: sum(entry["state"] == state for entry in states) for state in STATES}


def format_status(states: list[dict[str, Any]], show_all: bool = False) -> str:
    """What ``status`` prints: the counts per state, then each shard not done (every shard with ``show_all``)."""
    counts = state_counts(states)
    lines = [f"{len(states)} shards: " + ", ".join(f"{counts[state]} {state}" for state in STATES)]
    for entry in states:
        if entry["state"] == "done" and not show_all:
            continue
        detail = entry.get("owner", "")
        if "since" in entry:
            detail += f" for {time.time() - entry['since']:.0f} s"
        if entry["state"] == "done":
            detail += f", {entry['documents']} documents"
        if entry["state"] == "failed":
            detail += f": {(entry['error'].strip().splitlines() or [''])[-1]}"
        lines.append(f"  {entry['id']}  {entry['state']:<8} attempts {entry['attempts']}  {detail}")
    return "\n".join(lines)
