"""Verifying an elastic job's shard outputs and merging them in order: ``beamtrove elastic verify`` and ``merge``."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import time
import uuid
from typing import Any

from beamtrove.execution.elastic.jobdir import ElasticError, JobDir, is_staged, read_json
from beamtrove.execution.elastic.status import DamagedRecord, output_damage, read_done
from beamtrove.execution.output import OutputPlan, lock_output, recover_output
from beamtrove.layout import STAGING_DIR
from beamtrove.options import ConfigurationError
from beamtrove.stats import merge_stats

__all__ = ["format_verification", "merge_job", "verify_job"]


def _check_output(job: JobDir, done: dict[str, Any]) -> str | None:
    """What is wrong with a done record's output file, or None when its size, checksum and count hold."""
    damage = output_damage(job, done)
    if damage:
        return f"{done['shard']}: output {damage} ({done.get('output')})"
    path = job.path / done["output"]
    try:
        with gzip.open(path, "rb") as source:
            records = sum(1 for _ in source)
    except (OSError, EOFError) as exc:
        return f"{done['shard']}: {path} is unreadable: {exc}"
    if records != done["records"]:
        return f"{done['shard']}: {path} holds {records} documents, its done record says {done['records']}"
    return None


def _scan_stopped_early(manifest: dict[str, Any], shard: dict[str, Any]) -> bool:
    """Whether prepare stopped counting the records of one of the shard's files at an unreadable record."""
    return any("scan_error" in manifest["inputs"][segment["input"]] for segment in shard["segments"])


def _check_against_manifest(manifest: dict[str, Any], shard: dict[str, Any], done: dict[str, Any]) -> str | None:
    """Where the manifest and the shard's done record disagree: its input checksum or the records read."""
    if done.get("input_sha256") != shard["sha256"]:
        return (
            f"{shard['id']}: the manifest gives its input the SHA-256 {shard['sha256']}, "
            f"its done record {done.get('input_sha256')}"
        )
    read = done.get("records_read")
    if read is None:
        return f"{shard['id']}: its done record does not say how many records its run read"
    if _scan_stopped_early(manifest, shard):
        # Past an unreadable record the reader still counts what it finds, so the manifest's count is a floor.
        if read < shard["records"]:
            return f"{shard['id']}: the manifest says it holds at least {shard['records']} records, its run read {read}"
    elif read != shard["records"]:
        return f"{shard['id']}: the manifest says it holds {shard['records']} records, its run read {read}"
    return None


def verify_job(job_dir: str | os.PathLike, expect_hosts: int | None = None) -> dict[str, Any]:
    """Re-checks every done record's output against its checksum and count, and against the manifest.

    Returns:
        ``{"complete", "missing", "failed", "problems", "mismatches", "hosts",
        "documents", "ok"}``: ``problems`` are damaged outputs, ``mismatches``
        shards whose done record disagrees with the manifest (the records its
        run read, its input checksum); ``ok`` is True when every shard is done,
        every output checks out, nothing disagrees and at least
        ``expect_hosts`` distinct hosts completed shards.
    """
    job = JobDir(job_dir)
    manifest = job.manifest()
    if is_staged(manifest):
        # Imported here: staged jobs build on this package's job directory.
        from beamtrove.execution.staged.plan import JobPlan  # noqa: PLC0415
        from beamtrove.execution.staged.status import verify_staged  # noqa: PLC0415

        return verify_staged(job, JobPlan(job.path, manifest), expect_hosts)
    missing, failed, problems, mismatches, hosts, documents = [], [], [], [], {}, 0
    for shard in manifest["shards"]:
        try:
            done = read_done(job, shard["id"])
        except DamagedRecord as exc:
            problems.append(str(exc))
            continue
        if done is None:
            (failed if job.failed_path(shard["id"]).exists() else missing).append(shard["id"])
            continue
        problem = _check_output(job, done)
        if problem:
            problems.append(problem)
        mismatch = _check_against_manifest(manifest, shard, done)
        if mismatch:
            mismatches.append(mismatch)
        hosts[done["host"]] = hosts.get(done["host"], 0) + 1
        documents += done["records"]
    complete = not missing and not failed
    enough_hosts = expect_hosts is None or len(hosts) >= expect_hosts
    return {
        "complete": complete,
        "missing": missing,
        "failed": failed,
        "problems": problems,
        "mismatches": mismatches,
        "hosts": hosts,
        "documents": documents,
        "ok": complete and not problems and not mismatches and enough_hosts,
    }


def merge_job(job_dir: str | os.PathLike, output: str | os.PathLike, overwrite: bool = False) -> dict[str, Any]:
    """Verifies every shard, then concatenates their documents in manifest order into ``output``.

    ``output`` is gzip-compressed when its name ends in ``.gz``. The shards'
    stats are added up into ``<output>.stats.json``. Both are written in the
    staging folder of the folder that holds them and published together, as
    a run publishes its outputs (:mod:`beamtrove.execution.output`): with
    ``overwrite``, an existing ``output`` (a file or a folder) and its stats
    are replaced, and an interrupted merge leaves the old ones or the new
    ones, which the next merge into that folder finishes publishing.

    Returns:
        The verification report, with the output paths.

    Raises:
        ElasticError: Shards are not all done, an output fails its check,
            ``output`` exists and ``overwrite`` is off, or another merge or
            run is writing into the folder.
    """
    job = JobDir(job_dir)
    if is_staged(job.manifest()):
        from beamtrove.execution.staged.run import merge_staged_job  # noqa: PLC0415

        return merge_staged_job(job.path, str(output), overwrite=overwrite)
    target = pathlib.Path(output).absolute()
    stats_target = target.with_name(f"{target.name}.stats.json")
    report = verify_job(job_dir)
    if not report["complete"]:
        raise ElasticError(
            f"Not every shard is done (missing: {', '.join(report['missing']) or 'none'}; failed: "
            f"{', '.join(report['failed']) or 'none'}): run workers (and `retry` failed shards) first."
        )
    if report["problems"]:
        raise ElasticError(
            "Refusing to merge damaged shard outputs (`beamtrove elastic retry --all-damaged` redoes them):\n  "
            + "\n  ".join(report["problems"])
        )
    if report["mismatches"]:
        raise ElasticError(
            "Refusing to merge: the manifest and the done records disagree:\n  " + "\n  ".join(report["mismatches"])
        )
    manifest = job.manifest()
    dones = [read_json(job.done_path(shard["id"])) for shard in manifest["shards"]]
    folder = str(target.parent)
    try:
        lock = lock_output(folder)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    try:
        recover_output(folder)
        replaces = tuple(path.name for path in (target, stats_target) if path.exists())
        if replaces and not overwrite:
            raise ElasticError(f"{target} already exists: pass --overwrite to replace it.")
    except BaseException:
        lock.release()
        raise
    plan = OutputPlan(folder, os.path.join(folder, STAGING_DIR, uuid.uuid4().hex), replaces, lock=lock)
    try:
        plan.stage()
        staged = pathlib.Path(plan.write_to)
        with open(staged / target.name, "wb") as raw:
            out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if target.suffix == ".gz" else raw
            with out:
                for done in dones:
                    with gzip.open(job.path / done["output"], "rb") as source:
                        shutil.copyfileobj(source, out, 1 << 20)
        stats = merge_stats(json.loads((job.path / d["stats"]).read_text())["steps"] for d in dones if d["stats"])
        summary = {
            "pipeline": manifest["pipeline"]["name"],
            "shards": len(dones),
            "documents": report["documents"],
            "hosts": report["hosts"],
            "merged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "steps": stats,
        }
        (staged / stats_target.name).write_text(json.dumps(summary, indent=2) + "\n")
        plan.publish()
    except BaseException:
        plan.abandon()
        raise
    plan.release()
    return {**report, "output": str(target), "stats": str(stats_target)}


def format_verification(report: dict[str, Any], expect_hosts: int | None = None) -> str:
    """What ``verify`` prints about a :func:`verify_job` report."""
    hosts = ", ".join(f"{host} ({count})" for host, count in sorted(report["hosts"].items()))
    lines = [f"{report['documents']} documents in done shards, completed by {len(report['hosts'])} host(s): {hosts}"]
    lines += [f"damaged: {problem}" for problem in report["problems"]]
    lines += [f"mismatch: {mismatch}" for mismatch in report["mismatches"]]
    if report["missing"] or report["failed"]:
        lines.append(f"not done: {len(report['missing'])} pending or running, {len(report['failed'])} failed")
    if expect_hosts is not None and len(report["hosts"]) < expect_hosts:
        lines.append(f"expected shards completed by at least {expect_hosts} hosts")
    return "\n".join(lines)
