"""What racing processes run: a module that imports no more than the job directory, so that a spawned racer
starts in a fraction of a second (a test module imports Beam through its fixtures)."""

from __future__ import annotations

from beamtrove.execution.jobs.jobdir import JobDir, write_once

SHARDS = [f"shard-{k:05d}" for k in range(40)]


def claim_all(job_path: str, host: str, start, results) -> None:
    """Waits at ``start``, then tries to lock every shard; puts ``(host, the shards it locked)`` on ``results``."""
    job = JobDir(job_path)
    start.wait()
    results.put((host, [shard for shard in SHARDS if job.try_lock(shard, host) is not None]))


def publish_all(job_path: str, host: str, start, results) -> None:
    """Waits at ``start``, then tries to write every shard's done record; puts ``(host, those it wrote)``."""
    job = JobDir(job_path)
    start.wait()
    won = [shard for shard in SHARDS if write_once(job.done_path(shard), {"task": shard, "host": host})]
    results.put((host, won))
