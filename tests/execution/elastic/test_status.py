"""Shard states, their listing and re-queueing, over hand-made shard states (the worker tests reach them with real
processes)."""

from __future__ import annotations

import os

import pytest

from beamtrove.execution.elastic import ElasticError, retry_shards, shard_states
from beamtrove.execution.elastic.status import format_status


def test_each_shard_has_its_state_and_owner(shard_states_job):
    states = {entry["id"]: entry for entry in shard_states(shard_states_job.path)}
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
    states = shard_states(shard_states_job.path)
    listing = format_status(states).splitlines()
    assert listing[0] == "5 shards: 1 done, 1 running, 1 stale, 1 pending, 1 failed"
    assert [line.split()[:2] for line in listing[1:]] == [
        ["shard-00000", "running"],
        ["shard-00001", "stale"],
        ["shard-00002", "failed"],
        ["shard-00004", "pending"],
    ]
    assert listing[3].endswith("attempts 0  b: boom"), "a failure shows the last line of its error"
    assert "for " in listing[1] and listing[1].endswith(" s"), "a running shard shows how long it has been held"
    assert "shard-00003  done     attempts 0  c:7, 120 documents" in format_status(states, show_all=True)


def test_retry_requeues_failed_and_stale_shards_only(shard_states_job):
    job = shard_states_job
    for shard_id, message in (("shard-00000", "is running"), ("shard-00003", "is done"), ("shard-9", "No shard")):
        with pytest.raises(ElasticError, match=message):
            retry_shards(job.path, [shard_id])
    assert retry_shards(job.path, ["shard-00001"]) == ["shard-00001"]
    assert not job.lock_path("shard-00001").exists()
    assert list((job.path / "history" / "shard-00001").glob("*/shard-00001.lock"))
    assert retry_shards(job.path, all_failed=True) == ["shard-00002"]
    assert not job.failed_path("shard-00002").exists()
    with pytest.raises(ElasticError, match="no shard is failed"):
        retry_shards(job.path, all_failed=True)
    states = {entry["id"]: entry["state"] for entry in shard_states(job.path)}
    assert states["shard-00001"] == states["shard-00002"] == "pending"
