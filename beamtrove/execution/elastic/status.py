"""Shard states, and re-queueing failed or damaged shards: ``beamtrove elastic status`` and ``retry``."""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

from beamtrove.execution.elastic.jobdir import ElasticError, JobDir, is_staged
from beamtrove.fs import file_sha256
from beamtrove.progress import format_duration

__all__ = [
    "STATES",
    "DamagedRecord",
    "format_status",
    "job_progress",
    "output_damage",
    "read_done",
    "read_failed",
    "retry_shards",
    "shard_states",
    "state_counts",
]

#: The states of a shard, in the order status lists their counts.
STATES = ("done", "running", "stale", "pending", "failed", "damaged")

#: The states ``retry`` re-queues when named: a running shard belongs to its worker, an intact done one is finished.
_RETRYABLE = ("stale", "pending", "failed", "damaged")

# What status, verify and merge read of every done or failed record, and its type.
_DONE_FIELDS = {"shard": str, "host": str, "pid": int, "records": int}
_FAILED_FIELDS = {"shard": str, "host": str, "error": str}


class DamagedRecord(ElasticError):
    """A shard's done or failed record that is not the JSON object a worker publishes; the message says what to do.

    Attributes:
        path: The record's file.
        damage: What is wrong with it, e.g. ``not JSON``.
    """

    def __init__(self, job: JobDir, path: pathlib.Path, shard_id: str, damage: str):
        super().__init__(
            f"{path} is damaged ({damage}): `beamtrove elastic retry --job-dir {job.path} --shard-id {shard_id}` "
            "archives it and runs the shard again"
        )
        self.path = path
        self.damage = damage


def _record_damage(data: bytes, shard_id: str, fields: Mapping[str, type]) -> str | None:
    """What makes ``data`` other than a record of ``shard_id`` with ``fields``; None when it is one."""
    if not data.strip():
        return "empty"
    try:
        record = json.loads(data)
    except ValueError:  # UnicodeDecodeError included
        return "not JSON"
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for name, kind in fields.items():
        if name not in record:
            return f'no "{name}" in it'
        value = record[name]
        # bool is an int to Python, never to a record.
        if not isinstance(value, kind) or isinstance(value, bool):
            return f'"{name}" is {type(value).__name__}, not {kind.__name__}'
    if record["shard"] != shard_id:
        return f"it is the record of {record['shard']}"
    return None


def _read_record(job: JobDir, path: pathlib.Path, shard_id: str, fields: Mapping[str, type]) -> dict[str, Any] | None:
    # Workers publish a record whole under its name (publish_once): a record that does not parse was damaged later.
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a folder in its place, or unreadable
        raise DamagedRecord(job, path, shard_id, f"unreadable: {exc.strerror}") from None
    damage = _record_damage(data, shard_id, fields)
    if damage is not None:
        raise DamagedRecord(job, path, shard_id, damage)
    return json.loads(data)


def read_done(job: JobDir, shard_id: str) -> dict[str, Any] | None:
    """The shard's done record; None when it has none.

    Raises:
        DamagedRecord: The record is empty, not JSON, or not a done record of
            this shard (one of ``shard``, ``host``, ``pid`` and ``records`` is
            missing or of another type).
    """
    return _read_record(job, job.done_path(shard_id), shard_id, _DONE_FIELDS)


def read_failed(job: JobDir, shard_id: str) -> dict[str, Any] | None:
    """The shard's failure record; None when it has none.

    Raises:
        DamagedRecord: As :func:`read_done`, for ``shard``, ``host`` and ``error``.
    """
    return _read_record(job, job.failed_path(shard_id), shard_id, _FAILED_FIELDS)


def output_damage(job: JobDir, done: dict[str, Any], *, trust_unchanged_mtime: bool = False) -> str | None:
    """What is wrong with a done record's output file: ``missing``, ``size differs`` or ``hash differs``.

    Args:
        job: The job directory.
        done: The shard's done record.
        trust_unchanged_mtime: Skip reading the file when its size and
            modification time are those its done record gives (so ``status``
            does not read every output each time; ``verify`` reads them all).

    Returns:
        The damage, or None when the output is the one the done record describes.
    """
    path = job.path / done["output"] if done.get("output") else None
    if path is None or not path.is_file():
        return "missing"
    stat = path.stat()
    if stat.st_size != done.get("bytes"):
        return "size differs"
    if trust_unchanged_mtime and stat.st_mtime_ns == done.get("mtime_ns"):
        return None
    return "hash differs" if file_sha256(path) != done.get("sha256") else None


def _done_entry(job: JobDir, done: dict[str, Any]) -> dict[str, Any]:
    """The state of a shard with a done record: ``done``, or ``damaged`` with what is wrong with its output."""
    entry = {
        "owner": f"{done['host']}:{done['pid']}",
        "documents": done["records"],
    }
    if "finished_at" in done and "seconds" in done:
        entry["started_at"] = done["finished_at"] - done["seconds"]
    damage = output_damage(job, done, trust_unchanged_mtime=True)
    if damage is None:
        return {"state": "done", **entry}
    return {"state": "damaged", **entry, "damage": damage, "output": done.get("output")}


def shard_states(job_dir: str | os.PathLike, *, read: bool = False) -> list[dict[str, Any]]:
    """One entry per shard, in manifest order: id, state, owner, attempts, records.

    States: ``done`` (a done record exists and its output is intact),
    ``damaged`` (a done record exists, but its output is missing or its size or
    SHA-256 differs from the record's: ``damage`` says which; or its done or
    failure record is itself damaged: ``damage`` says how, ``record`` names
    it and ``message`` says what to do), ``failed`` (out of attempts),
    ``running`` (locked, with a fresh heartbeat), ``stale`` (locked, heartbeat
    older than the lock timeout: its worker died or hangs) and ``pending``.
    """
    job = JobDir(job_dir)
    manifest = job.manifest()
    if is_staged(manifest):
        # Imported here: staged jobs build on this package's job directory.
        from beamtrove.execution.staged.plan import JobPlan  # noqa: PLC0415
        from beamtrove.execution.staged.status import task_states  # noqa: PLC0415

        return task_states(job, JobPlan(job.path, manifest), read=read)
    states = []
    for shard in manifest["shards"]:
        shard_id = shard["id"]
        entry = {"id": shard_id, "records_in": shard["records"], "attempts": len(job.attempts(shard_id))}
        try:
            done = read_done(job, shard_id)
            failed = None if done is not None else read_failed(job, shard_id)
        except DamagedRecord as exc:
            record = str(exc.path.relative_to(job.path))
            entry.update(state="damaged", damage=exc.damage, record=record, message=str(exc))
            states.append(entry)
            continue
        if done is not None:
            entry.update(_done_entry(job, done))
        elif failed is not None:
            entry.update(state="failed", owner=failed["host"], error=failed["error"])
        else:
            state, claim = job.lock_state(shard_id, manifest["lock_timeout"])
            entry["state"] = "pending" if state == "free" else state
            if claim:
                entry.update(owner=f"{claim['host']}:{claim['pid']}", since=claim["acquired_at"])
        states.append(entry)
    return states


def _shards_to_retry(
    states: dict[str, dict[str, Any]], shard_ids: Iterable[str], all_failed: bool, all_damaged: bool
) -> list[str]:
    """The named shards and those the ``all_*`` flags select, once each, in that order."""
    selected = [state for flag, state in ((all_failed, "failed"), (all_damaged, "damaged")) if flag]
    wanted = [*shard_ids, *(shard_id for shard_id, entry in states.items() if entry["state"] in selected)]
    if not wanted:
        raise ElasticError(
            f"Nothing to retry: no shard is {' or '.join(selected)}." if selected else "Name shards to retry."
        )
    return list(dict.fromkeys(wanted))


def retry_shards(
    job_dir: str | os.PathLike, shard_ids: Iterable[str] = (), all_failed: bool = False, all_damaged: bool = False
) -> list[str]:
    """Re-queues shards: their failure or done record, attempts and stale lock move to ``history/``.

    Args:
        job_dir: The job directory.
        shard_ids: Shards to re-queue: failed, damaged, stale or pending ones.
        all_failed: Also re-queue every failed shard.
        all_damaged: Also re-queue every damaged shard (see :func:`shard_states`).

    Returns:
        The re-queued shard ids.

    Raises:
        ElasticError: An unknown shard, one that is running or done with an
            intact output, or nothing to retry.
    """
    job = JobDir(job_dir)
    # A staged task's files are hashed only when read: a retry must find damaged what verify finds damaged.
    states = {entry["id"]: entry for entry in shard_states(job_dir, read=True)}
    wanted = _shards_to_retry(states, shard_ids, all_failed, all_damaged)
    for shard_id in wanted:
        if shard_id not in states:
            raise ElasticError(f"No shard {shard_id!r} in this job (see `beamtrove elastic status --all`).")
        state = states[shard_id]["state"]
        if state == "done":
            raise ElasticError(
                f"{shard_id} is done and its output is intact: only failed, damaged, stale or pending shards retry."
            )
        if state not in _RETRYABLE:
            raise ElasticError(f"{shard_id} is {state}: only failed, damaged, stale or pending shards retry.")
    for shard_id in wanted:
        job.requeue(shard_id)
    return wanted


def state_counts(states: list[dict[str, Any]]) -> dict[str, int]:
    """How many shards are in each state, in the order of :data:`STATES`."""
    return {state: sum(entry["state"] == state for entry in states) for state in STATES}


def _detail(entry: dict[str, Any]) -> str:
    """What the listing says after a shard's state: its owner, and what it did or what went wrong."""
    detail = entry.get("owner", "")
    if "since" in entry:
        detail += f" for {time.time() - entry['since']:.0f} s"
    if entry["state"] == "done":
        detail += f", {entry['documents']} documents"
    if entry["state"] == "damaged":
        detail += f": output {entry['damage']} ({entry['output']})" if "output" in entry else entry["message"]
    if entry["state"] == "failed":
        detail += f": {(entry['error'].strip().splitlines() or [''])[-1]}"
    return detail


def job_progress(states: list[dict[str, Any]], now: float | None = None) -> str:
    """``k/N shards done``, and the time left at the rate input records were done so far.

    The rate is the done shards' input records over the time since the first
    of them started, so it counts every worker that ran at once; a failed
    or damaged shard, which no worker takes until it is retried, is left out
    of what remains.
    """
    done = [entry for entry in states if entry["state"] == "done"]
    line = f"{len(done)}/{len(states)} shards done"
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
    """What ``status`` prints: the counts per state and the ETA, then each shard not done (all with ``show_all``)."""
    counts = state_counts(states)
    counted = ", ".join(f"{counts[state]} {state}" for state in STATES)
    lines = [f"{len(states)} shards: {counted} · {job_progress(states)}"]
    for entry in states:
        if entry["state"] == "done" and not show_all:
            continue
        lines.append(f"  {entry['id']}  {entry['state']:<8} attempts {entry['attempts']}  {_detail(entry)}")
    return "\n".join(lines)
