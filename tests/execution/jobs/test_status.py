"""Shard states, their listing and re-queueing, over hand-made shard states (the worker tests reach them with real
processes)."""

from __future__ import annotations

import json
import os

import pytest

from beamtrove.execution.jobs import ElasticError
from beamtrove.execution.jobs.status import format_status, job_progress, retry_tasks, task_states


def _state_of(job, shard_id: str) -> dict:
    return next(entry for entry in task_states(job.path) if entry["id"] == shard_id)


def _output(job, shard_id: str):
    return job.path / json.loads(job.done_path(shard_id).read_text())["output"]


def test_each_shard_has_its_state_and_owner(shard_states_job):
    states = {entry["id"]: entry for entry in task_states(shard_states_job.path)}
    assert {k: v["state"] for k, v in states.items()} == {
        "shard-00000": "running",
        "shard-00001": "stale",
        "shard-00002": "failed",
        "shard-00003": "done",
        "shard-00004": "pending",
    }
    assert states["shard-00000"]["owner"] == f"a:{os.getpid()}"
    assert states["shard-00001"]["owner"] == f"b:{os.getpid()}"
    assert states["shard-00003"]["owner"] == "c:7" and states["shard-00003"]["documents"] == 120
    assert states["shard-00002"]["error"] == "exit code 1\nboom"
    # 600 reviews and one malformed row.
    assert sum(entry["records_in"] for entry in states.values()) == 601


def test_the_listing_counts_states_and_shows_what_is_not_done(shard_states_job):
    states = task_states(shard_states_job.path)
    listing = format_status(states).splitlines()
    assert listing[0].startswith("5 tasks: 1 done, 1 running, 1 stale, 1 pending, 1 failed, 0 damaged · 1/5 tasks done")
    assert [line.split()[:2] for line in listing[1:]] == [
        ["shard-00000", "running"],
        ["shard-00001", "stale"],
        ["shard-00002", "failed"],
        ["shard-00004", "pending"],
    ]
    assert listing[3].endswith("attempts 0  b: boom"), "a failure shows the last line of its error"
    assert "for " in listing[1] and listing[1].endswith(" s"), "a running shard shows how long it has been held"
    assert "shard-00003  done     attempts 1  c:7, 120 documents" in format_status(states, show_all=True)


def test_retry_requeues_failed_and_stale_shards_only(shard_states_job):
    job = shard_states_job
    refusals = (
        ("shard-00000", "is running"),
        ("shard-00003", "is done and its files are intact"),
        ("shard-9", "No task"),
    )
    for shard_id, message in refusals:
        with pytest.raises(ElasticError, match=message):
            retry_tasks(job.path, [shard_id])
    assert retry_tasks(job.path, ["shard-00001"]) == ["shard-00001"]
    assert not job.lock_path("shard-00001").exists()
    assert list((job.path / "history" / "shard-00001").glob("*/shard-00001.lock"))
    assert retry_tasks(job.path, all_failed=True) == ["shard-00002"]
    assert not job.failed_path("shard-00002").exists()
    with pytest.raises(ElasticError, match="no task is failed"):
        retry_tasks(job.path, all_failed=True)
    states = {entry["id"]: entry["state"] for entry in task_states(job.path)}
    assert states["shard-00001"] == states["shard-00002"] == "pending"


def test_a_done_shard_whose_output_is_missing_or_changed_is_damaged_with_the_reason(shard_states_job):
    job = shard_states_job
    output = _output(job, "shard-00003")
    pristine = output.read_bytes()
    records_in = _state_of(job, "shard-00003")["records_in"]
    output.unlink()
    assert _state_of(job, "shard-00003") == {
        "id": "shard-00003",
        "records_in": records_in,
        "attempts": 1,
        "state": "damaged",
        "owner": "c:7",
        "documents": 120,
        "damage": f"{output} is missing",
    }
    output.write_bytes(pristine[:-10])
    assert (
        _state_of(job, "shard-00003")["damage"]
        == f"{output} is {len(pristine) - 10} B, its record says {len(pristine)} B"
    )
    changed = bytearray(pristine)
    changed[len(changed) // 2] ^= 0xFF
    output.write_bytes(bytes(changed))
    hashed = f"{output} does not have the SHA-256 its record gives"
    assert _state_of(job, "shard-00003")["damage"] == hashed, "a same-size rewrite is caught by its hash"
    listing = format_status(task_states(job.path)).splitlines()
    assert listing[0] == "5 tasks: 0 done, 1 running, 1 stale, 1 pending, 1 failed, 1 damaged · 0/5 tasks done"
    assert f"  shard-00003  damaged  attempts 1  c:7: {hashed}" in listing
    output.write_bytes(pristine)
    assert _state_of(job, "shard-00003")["state"] == "done"


def test_retry_moves_a_damaged_shards_done_record_and_attempts_to_its_history(shard_states_job):
    job = shard_states_job
    _output(job, "shard-00003").unlink()
    assert retry_tasks(job.path, all_failed=True, all_damaged=True) == ["shard-00002", "shard-00003"]
    assert not job.done_path("shard-00003").exists() and not job.attempts_dir("shard-00003").exists()
    (archived,) = (job.path / "history" / "shard-00003").iterdir()
    assert sorted(path.name for path in archived.iterdir()) == ["shard-00003", "shard-00003.json"]
    assert json.loads((archived / "shard-00003.json").read_text())["host"] == "c"
    assert _state_of(job, "shard-00003")["state"] == "pending"
    with pytest.raises(ElasticError, match="Nothing to retry: no task is damaged"):
        retry_tasks(job.path, all_damaged=True)


def test_the_eta_comes_from_the_rate_at_which_done_shards_did_their_input():
    states = [
        {"state": "done", "records_in": 100, "started_at": 1_000.0},
        {"state": "done", "records_in": 300, "started_at": 1_010.0},
        {"state": "running", "records_in": 200},
        {"state": "pending", "records_in": 200},
        {"state": "failed", "records_in": 500},
    ]
    # 400 records done in the 100 s since the first done shard started: 400 left take 100 s more.
    assert job_progress(states, now=1_100.0) == "2/5 tasks done · ETA 1m 40s"
    assert job_progress(states[2:], now=1_100.0) == "0/3 tasks done"
    assert job_progress([{**entry, "state": "done"} for entry in states[:2]], now=1_100.0) == "2/2 tasks done"


@pytest.mark.parametrize(
    ("record", "damage"),
    [
        (b"", "empty"),
        (b'{"task": "shard-00003", "host": "c", "pid": 7, "rec', "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b'{"task": "shard-00003", "host": "c", "pid": 7}', 'no "records" in it'),
        (b'{"task": "shard-00003", "host": "c", "pid": 7, "records": "120"}', '"records" is str, not int'),
        (b'{"task": "shard-00001", "host": "c", "pid": 7, "records": 120}', "it is the record of shard-00001"),
    ],
)
def test_a_damaged_done_record_is_a_damaged_shard_that_retry_redoes(shard_states_job, record, damage):
    job = shard_states_job
    job.done_path("shard-00003").write_bytes(record)
    message = (
        f"{job.done_path('shard-00003')} is damaged ({damage}): `beamtrove elastic retry --job-dir {job.path} "
        "--task shard-00003` archives it and runs the task again"
    )
    entry = _state_of(job, "shard-00003")
    assert {key: entry[key] for key in ("state", "damage", "record", "message")} == {
        "state": "damaged",
        "damage": damage,
        "record": "done/shard-00003.json",
        "message": message,
    }
    assert f"  shard-00003  damaged  attempts 1  {message}" in format_status(task_states(job.path)).splitlines()
    assert retry_tasks(job.path, all_damaged=True) == ["shard-00003"]
    assert _state_of(job, "shard-00003")["state"] == "pending"


def test_a_damaged_failure_record_is_a_damaged_shard(shard_states_job):
    job = shard_states_job
    job.failed_path("shard-00002").write_text("exit code 1")
    entry = _state_of(job, "shard-00002")
    assert (entry["state"], entry["damage"], entry["record"]) == ("damaged", "not JSON", "failed/shard-00002.json")
    assert retry_tasks(job.path, ["shard-00002"]) == ["shard-00002"]
    assert _state_of(job, "shard-00002")["state"] == "pending"
