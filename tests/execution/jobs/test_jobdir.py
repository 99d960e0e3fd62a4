"""Locks, once-only records and the manifest check, with real processes racing on real files."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import time

import pytest

from beamtrove import __version__
from beamtrove.execution.jobs import ElasticError, JobDir, prepare_job
from beamtrove.execution.jobs.jobdir import MANIFEST, MANIFEST_CHECKSUM, sha256_of
from tests.execution.jobs.racers import SHARDS, claim_all, publish_all


@pytest.fixture
def job(review_jsonl, tmp_path) -> JobDir:
    prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 3)
    return JobDir(tmp_path / "job")


@pytest.mark.parametrize("operation", [claim_all, publish_all])
def test_racing_processes_each_win_a_shard_exactly_once(job, operation):
    # Spawned, not forked: a child forked from a test process whose earlier pipelines left threads holding locks
    # can hang before it runs (seen once in a full suite), and would never report.
    context = multiprocessing.get_context("spawn")
    hosts = [f"host{k}" for k in range(6)]
    # Every process, and this one, at the start line before any goes: they race once all have imported.
    start, results = context.Barrier(len(hosts) + 1, timeout=120), context.Queue()
    processes = [context.Process(target=operation, args=(str(job.path), h, start, results)) for h in hosts]
    for process in processes:
        process.start()
    start.wait()
    won = dict(results.get(timeout=60) for _ in hosts)
    for process in processes:
        process.join(timeout=60)
    winners = [shard for shards in won.values() for shard in shards]
    assert sorted(winners) == SHARDS
    for host, shards in won.items():
        for shard in shards:
            path = job.lock_path(shard) if operation is claim_all else job.done_path(shard)
            assert json.loads(path.read_text())["host"] == host
    assert not [p for p in (job.path / "done").iterdir() if p.name.endswith(".tmp")]


def test_only_a_stale_lock_is_taken_over_and_it_is_archived(job):
    lock = job.try_lock("shard-00000", "a")
    assert job.try_lock("shard-00000", "b") is None
    assert job.lock_state("shard-00000", 60)[0] == "running"
    assert not job.take_over_stale("shard-00000", timeout=60)
    old = time.time() - 120
    os.utime(lock.path, (old, old))
    state, claim = job.lock_state("shard-00000", 60)
    assert state == "stale" and claim["host"] == "a" and claim["token"] == lock.token
    assert job.take_over_stale("shard-00000", timeout=60)
    archived = list((job.path / "history" / "shard-00000").glob("*/shard-00000.lock"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["token"] == lock.token
    second = job.try_lock("shard-00000", "b")
    assert second is not None and not lock.owned() and second.owned()
    lock.release()  # the old owner must not remove the new claim
    assert second.path.exists()


def _lock_and_exit(job_path: str, shard: str, host: str) -> None:
    JobDir(job_path).try_lock(shard, host)
    os._exit(0)  # the lock left behind, as a killed worker leaves it


def _dead_workers_lock(job: JobDir, shard: str, host: str) -> None:
    worker = multiprocessing.get_context("fork").Process(target=_lock_and_exit, args=(str(job.path), shard, host))
    worker.start()
    worker.join(timeout=60)
    assert worker.exitcode == 0 and job.lock_path(shard).exists()


def test_the_lock_of_a_dead_worker_of_this_host_is_taken_over_at_once_and_archived(job):
    _dead_workers_lock(job, "shard-00003", socket.gethostname())
    state, claim = job.lock_state("shard-00003", 60)
    assert state == "stale" and sorted(claim) == ["acquired_at", "heartbeat", "host", "pid", "token"]
    assert job.try_lock("shard-00003", "b") is None, "without a timeout only a free lock is claimed"
    lock = job.try_lock("shard-00003", socket.gethostname(), timeout=60)
    assert lock is not None and lock.took_over == "its process is gone" and lock.owned()
    archived = list((job.path / "history" / "shard-00003").glob("*/shard-00003.lock"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["token"] == claim["token"]

    # A worker named otherwise (--host) judges the claims naming it as its host's.
    _dead_workers_lock(job, "shard-00004", "node-a")
    assert job.lock_state("shard-00004", 60)[0] == "running"
    assert job.lock_state("shard-00004", 60, host="node-a")[0] == "stale"
    assert job.try_lock("shard-00004", "node-b", timeout=60) is None
    assert not job.take_over_stale("shard-00004", timeout=60)
    assert job.take_over_stale("shard-00004", timeout=60, host="node-a")
    assert job.try_lock("shard-00004", "node-b") is not None


def test_a_takeover_guard_blocks_others_until_it_is_itself_stale(job):
    lock = job.try_lock("shard-00001", "a")
    old = time.time() - 120
    os.utime(lock.path, (old, old))
    guard = lock.path.with_suffix(".takeover")
    guard.touch()
    assert not job.take_over_stale("shard-00001", timeout=60)
    assert lock.path.exists()
    os.utime(guard, (old, old))
    assert not job.take_over_stale("shard-00001", timeout=60)  # clears the dead guard
    assert not guard.exists()
    assert job.take_over_stale("shard-00001", timeout=60)


def test_the_heartbeat_keeps_a_lock_fresh_only_while_it_is_owned(job):
    lock = job.try_lock("shard-00002", "a")
    old = time.time() - 120
    os.utime(lock.path, (old, old))
    with lock.heartbeat(0.05):
        time.sleep(0.3)
        assert job.lock_state("shard-00002", 60)[0] == "running"
        os.utime(lock.path, (old, old))
        lock.path.write_text(json.dumps({"token": "someone else"}))
        os.utime(lock.path, (old, old))
        time.sleep(0.3)
    assert job.lock_state("shard-00002", 60)[0] == "stale"


def test_a_modified_manifest_is_refused(job):
    manifest_path = job.path / MANIFEST
    original = manifest_path.read_bytes()
    manifest_path.write_bytes(original.replace(b'"max_retries": 2', b'"max_retries": 9'))
    with pytest.raises(ElasticError, match="modified after prepare"):
        job.manifest()
    # Editing the configuration and rewriting the checksum still breaks the pipeline's own checksum.
    manifest = json.loads(original)
    manifest["pipeline"]["args"] = ["--text_key", "review"]
    _rewrite(job, manifest)
    with pytest.raises(ElasticError, match="pipeline checksum does not match"):
        job.manifest()
    manifest = json.loads(original)
    manifest["beamtrove_version"] = "0.0.1"
    _rewrite(job, manifest)
    with pytest.raises(ElasticError, match=f"prepared with beamtrove 0.0.1, this is {__version__}"):
        job.manifest()


def _rewrite(job: JobDir, manifest: dict) -> None:
    data = json.dumps(manifest).encode()
    (job.path / MANIFEST).write_bytes(data)
    (job.path / MANIFEST_CHECKSUM).write_text(f"{sha256_of(data)}  {MANIFEST}\n")


def test_no_job_here_says_to_prepare(tmp_path):
    with pytest.raises(ElasticError, match="run `beamtrove elastic prepare` first"):
        JobDir(tmp_path).manifest()
