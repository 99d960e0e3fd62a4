"""status and retry over hand-made shard states (the worker tests reach them with real processes)."""

from __future__ import annotations

import json
import os
import time

import pytest

from beamtrove.elastic import ElasticError, JobDir, prepare_job, retry_shards, shard_states
from beamtrove.elastic.cli import main
from beamtrove.elastic.jobdir import publish_once


@pytest.fixture
def job(review_jsonl, tmp_path) -> JobDir:
    """Five shards: running (a), stale (b), failed, done (c) and pending."""
    prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 5, lock_timeout=60)
    job = JobDir(tmp_path / "job")
    job.try_lock("shard-00000", "a")
    stale = job.try_lock("shard-00001", "b")
    old = time.time() - 600
    os.utime(stale.path, (old, old))
    publish_once(job.failed_path("shard-00002"), {"shard": "shard-00002", "host": "b", "error": "exit code 1\nboom"})
    publish_once(job.done_path("shard-00003"), {"shard": "shard-00003", "host": "c", "pid": 7, "records": 120})
    return job


def test_status_names_each_state_and_owner(job, capsys):
    states = {entry["id"]: entry for entry in shard_states(job.path)}
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
    assert main(["status", "--job-dir", str(job.path)]) == 1
    out = capsys.readouterr().out
    assert "5 shards: 1 done, 1 running, 1 stale, 1 pending, 1 failed" in out
    assert "shard-00002  failed   attempts 0  b: boom" in out
    assert "shard-00003" not in out
    assert main(["status", "--job-dir", str(job.path), "--all", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["complete"] is False and len(report["shards"]) == 5


def test_retry_requeues_failed_and_stale_shards_only(job, capsys):
    for shard_id, message in (("shard-00000", "is running"), ("shard-00003", "is done"), ("shard-9", "No shard")):
        with pytest.raises(ElasticError, match=message):
            retry_shards(job.path, [shard_id])
    assert retry_shards(job.path, ["shard-00001"]) == ["shard-00001"]
    assert not job.lock_path("shard-00001").exists()
    assert list((job.path / "history" / "shard-00001").glob("*/shard-00001.lock"))
    assert main(["retry", "--job-dir", str(job.path), "--all-failed"]) == 0
    assert "re-queued 1 shard(s): shard-00002" in capsys.readouterr().out
    assert not job.failed_path("shard-00002").exists()
    assert main(["retry", "--job-dir", str(job.path), "--all-failed"]) == 2
    assert "no shard is failed" in capsys.readouterr().err
    states = {entry["id"]: entry["state"] for entry in shard_states(job.path)}
    assert states["shard-00001"] == states["shard-00002"] == "pending"


def test_pipeline_options_go_after_the_separator_of_prepare_only(job, capsys):
    assert main(["status", "--job-dir", str(job.path), "--", "--lid_model", "x"]) == 2
    assert "only prepare takes pipeline options" in capsys.readouterr().err
