"""Verifying a job's outputs and merging them into one run folder: ``elastic verify`` and ``merge``, for every kind."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.jobs.jobdir import ElasticError, JobDir
from beamtrove.execution.jobs.kinds import JobKind, job_kind
from beamtrove.execution.jobs.status import damage_line, task_states
from beamtrove.execution.output import check_auxiliary_inputs, check_separate, plan_output
from beamtrove.execution.output_merge import publish_merged
from beamtrove.execution.run_result import run_stats
from beamtrove.fs import InputFile, join
from beamtrove.layout import STATS_FILE
from beamtrove.option_parsing import parse
from beamtrove.progress import utc_timestamp
from beamtrove.stats import merge_stats, order_steps

__all__ = ["format_verification", "merge_job", "verify_job"]

# The names of the one file merge wrote before it wrote a run folder: JSONL, gzip when named .gz.
_FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".zst")


def verify(job: JobDir, kind: JobKind, expect_hosts: int | None = None) -> dict[str, Any]:
    """Re-checks every done task's files by size and SHA-256 (and, for shards, their counts against the manifest).

    Returns:
        ``{"complete", "missing", "failed", "problems", "mismatches", "hosts",
        "documents", "ok"}``: ``problems`` are damaged files or records,
        ``mismatches`` shards whose done record disagrees with the manifest
        (the records its run read, its input checksum); ``ok`` is True when
        every task is done, every file checks out, nothing disagrees and at
        least ``expect_hosts`` distinct hosts completed tasks.
    """
    states = task_states(job.path, kind, read=True)
    missing = [entry["id"] for entry in states if entry["state"] in ("pending", "running", "stale")]
    failed = [entry["id"] for entry in states if entry["state"] == "failed"]
    problems = [damage_line(job.path, entry) for entry in states if entry["state"] == "damaged"]
    hosts: dict[str, int] = {}
    mismatches, documents = [], 0
    for entry in states:
        if entry["state"] != "done":
            continue
        host = entry["owner"].rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + 1
        documents += entry["documents"]
        mismatch = kind.mismatches(entry["id"], job.read_done(entry["id"]))
        if mismatch:
            mismatches.append(mismatch)
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


def verify_job(job_dir: str | os.PathLike, expect_hosts: int | None = None) -> dict[str, Any]:
    """:func:`verify` of the job in ``job_dir``."""
    job = JobDir(job_dir)
    return verify(job, job_kind(job), expect_hosts)


def _refuse_a_file(output: str) -> None:
    """Refuses the form ``merge`` took when it wrote one file: an ``--output`` named as a JSONL file.

    Raises:
        ElasticError: ``output`` is named as a file and is not a folder.
    """
    name = posixpath.basename(posixpath.normpath(output))
    if name.endswith(_FILE_SUFFIXES) and not os.path.isdir(output):
        folder = posixpath.join(posixpath.dirname(posixpath.normpath(output)), name.split(".", 1)[0] or "merged")
        raise ElasticError(
            f"--output {output} names a file, but `beamtrove elastic merge` writes a run folder as `beamtrove run` "
            f"does (documents/, excluded/, dead_letters/, stats.json, report.html): pass a folder, e.g. --output "
            f"{folder}"
        )


def _check_separate(job: JobDir, manifest: dict[str, Any], output: str) -> None:
    """Makes the checks ``beamtrove run`` makes of its input and output, the job directory being an input.

    Raises:
        ElasticError: An input of the job, or the job directory, is inside
            ``output``, or ``output`` inside one of them or inside a folder
            the job's input was read from.
    """
    files = [InputFile(entry["url"], entry["name"], entry["size"]) for entry in manifest["inputs"]]
    try:
        check_separate(manifest["input_folders"], files, output)
        check_auxiliary_inputs([("--job-dir", str(job.path))], output)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None


def merged_stats(
    kind: JobKind, output: str, state: str = "DONE", options: PipelineOptions | None = None, **details: Any
) -> dict[str, Any]:
    """What ``stats.json`` holds for a job's run folder: its options, its funnel and every task's counters added up.

    Args:
        kind: The job's kind.
        output: The run folder.
        state: The run's final state.
        options: The options the run was given (a ``--staged`` run's); default: the job's, writing into ``output``.
        details: More sections of ``stats.json`` (see :func:`~beamtrove.execution.run_result.run_stats`).
    """
    flow = kind.flow(output)
    if options is None:
        options = parse(kind.spec, [*kind.manifest["pipeline"]["args"], "--output", output])
    steps = order_steps(merge_stats(kind.steps()), flow.funnel, flow.writers)
    return run_stats(kind.spec, options, state, flow.funnel, steps, **details)


def merge_job(job_dir: str | os.PathLike, output: str | os.PathLike, overwrite: bool = False) -> dict[str, Any]:
    """Verifies every task, then publishes the job's outputs as the run folder ``output``.

    The folder is laid out as ``beamtrove run`` lays out its output (by the
    job's kind: a shard job's shards as the parts of one run, in manifest
    order; a staged job's run folder as its write task laid it out);
    ``stats.json`` adds up the tasks' counters, and ``report.html`` is drawn
    from it. Everything is staged and published as a run publishes its
    outputs (:mod:`beamtrove.execution.output`): with ``overwrite``, what
    ``output`` held is replaced once the merge succeeds, and a merge stopped
    while publishing is finished by the next one.

    Returns:
        The verification report, with ``output`` and ``stats`` (the path of ``stats.json``).

    Raises:
        ElasticError: ``output`` is named as a file, or overlaps the job's
            input or its job directory (:func:`_check_separate`); tasks are
            not all done, a file fails its check; ``output`` holds
            something and ``overwrite`` is off, or another merge or run is
            writing into it.
    """
    output = str(output)
    _refuse_a_file(output)
    job = JobDir(job_dir)
    kind = job_kind(job)
    _check_separate(job, kind.manifest, output)
    report = verify(job, kind)
    if not report["complete"]:
        raise ElasticError(
            f"Not every {kind.noun} is done (missing: {', '.join(report['missing']) or 'none'}; failed: "
            f"{', '.join(report['failed']) or 'none'}): run workers (and `retry` what failed) first."
        )
    if report["problems"]:
        raise ElasticError(
            f"Refusing to merge damaged {kind.noun} outputs (`beamtrove elastic retry --all-damaged` redoes them):\n  "
            + "\n  ".join(report["problems"])
        )
    if report["mismatches"]:
        raise ElasticError(
            "Refusing to merge: the manifest and the done records disagree:\n  " + "\n  ".join(report["mismatches"])
        )
    merged = {
        "job_dir": str(job.path),
        "tasks": sum(1 for _ in kind.task_ids()),
        "documents": report["documents"],
        "hosts": report["hosts"],
        "merged_at": utc_timestamp(),
    }
    stats = merged_stats(kind, output, elastic=merged, **kind.stats_details())
    try:
        plan = plan_output(output, overwrite=overwrite)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    publish_merged(plan, lambda folder: kind.lay_out(folder, link=False), stats)
    return {**report, "output": output, "stats": join(output, STATS_FILE)}


def format_verification(report: dict[str, Any], expect_hosts: int | None = None) -> str:
    """What ``verify`` prints about a :func:`verify_job` report."""
    hosts = ", ".join(f"{host} ({count})" for host, count in sorted(report["hosts"].items()))
    lines = [f"{report['documents']} documents in done tasks, completed by {len(report['hosts'])} host(s): {hosts}"]
    lines += [f"damaged: {problem}" for problem in report["problems"]]
    lines += [f"mismatch: {mismatch}" for mismatch in report["mismatches"]]
    if report["missing"] or report["failed"]:
        lines.append(f"not done: {len(report['missing'])} pending or running, {len(report['failed'])} failed")
    if expect_hosts is not None and len(report["hosts"]) < expect_hosts:
        lines.append(f"expected tasks completed by at least {expect_hosts} hosts")
    return "\n".join(lines)
