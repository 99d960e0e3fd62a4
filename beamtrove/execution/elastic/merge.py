"""Verifying an elastic job's shard outputs, and merging them into one run folder: ``elastic verify`` and ``merge``."""

from __future__ import annotations

import gzip
import json
import os
import posixpath
import time
from typing import Any

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.elastic.jobdir import ElasticError, JobDir, is_staged
from beamtrove.execution.elastic.status import DamagedRecord, output_damage, read_done
from beamtrove.execution.output import check_auxiliary_inputs, check_separate, plan_output
from beamtrove.execution.output_merge import publish_merged
from beamtrove.execution.resume import configuration
from beamtrove.fs import InputFile, join, put_file, read_json_record
from beamtrove.layout import (
    CLUSTERS_DIR,
    DEAD_LETTERS_DIR,
    DOCUMENTS_DIR,
    EXCLUDED_DIR,
    STATS_FILE,
    SUMMARY_STATS_DIR,
)
from beamtrove.options import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.run_output import RunOutput
from beamtrove.stats import merge_stats
from beamtrove.transforms.summary.merge import merge_summary_stats
from beamtrove.transforms.writers.base import SHARD, FilenameTemplate

__all__ = ["format_verification", "merge_job", "verify_job"]

# The names of the one file merge wrote before it wrote a run folder: JSONL, gzip when named .gz.
_FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".zst")


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
        # Jobs prepared before 0.15.0 record no input folders: their input files are checked.
        check_separate(manifest.get("input_folders", ()), files, output)
        check_auxiliary_inputs([("--job-dir", str(job.path))], output)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None


def merge_job(job_dir: str | os.PathLike, output: str | os.PathLike, overwrite: bool = False) -> dict[str, Any]:
    """Verifies every shard, then publishes their outputs in manifest order as the run folder ``output``.

    The folder is laid out as ``beamtrove run`` lays out its output: the
    documents of each shard that kept any (sorted by id within it, as its
    worker published them) are one ``documents/part-NNNNN.jsonl.gz``, in
    manifest order, so reading the parts in name order gives the shards
    one after the other; what the shards' steps excluded, their cluster maps
    and their dead letters are the parts of ``excluded/<step>/``,
    ``clusters/<step>/`` and ``dead_letters/``, shard after shard; their
    summary statistics are added up into ``summary_stats/``; ``stats.json``
    adds up their counters, and ``report.html`` is drawn from it. Everything
    is staged and published as a run publishes its outputs
    (:mod:`beamtrove.execution.output`): with ``overwrite``, what ``output``
    held is replaced once the merge succeeds, and a merge stopped while
    publishing is finished by the next one.

    Returns:
        The verification report, with ``output`` and ``stats`` (the path of ``stats.json``).

    Raises:
        ElasticError: ``output`` is named as a file, or overlaps the job's
            input or its job directory (:func:`_check_separate`); shards are
            not all done, an output fails its check; ``output`` holds
            something and ``overwrite`` is off, or another merge or run is
            writing into it.
    """
    output = str(output)
    _refuse_a_file(output)
    job = JobDir(job_dir)
    _check_separate(job, job.manifest(), output)
    if is_staged(job.manifest()):
        from beamtrove.execution.staged.run import merge_staged_job  # noqa: PLC0415

        return merge_staged_job(job.path, output, overwrite=overwrite)
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
    dones = [read_json_record(job.done_path(shard["id"])) for shard in manifest["shards"]]
    stats = _merged_stats(job, manifest, dones, report, output)
    try:
        plan = plan_output(output, overwrite=overwrite)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    publish_merged(plan, lambda folder: _lay_out(job, dones, folder), stats)
    return {**report, "output": output, "stats": join(output, STATS_FILE)}


def _shard_runs(job: JobDir, dones: list[dict[str, Any]]) -> list[RunOutput]:
    """The output folders of the shards' runs, in manifest order: where their ``stats.json`` is."""
    return [RunOutput(str((job.path / done["stats"]).parent)) for done in dones if done["stats"]]


def _lay_out(job: JobDir, dones: list[dict[str, Any]], folder: str) -> None:
    """Puts the shards' outputs into ``folder`` (a run's staging folder) as the parts of one run, in manifest order."""
    documents = [job.path / done["output"] for done in dones if done["records"]]
    parts: dict[str, list[str]] = {DOCUMENTS_DIR: [str(path) for path in documents]}
    runs = _shard_runs(job, dones)
    for run in runs:
        for step in run.excluded_steps():
            parts.setdefault(join(EXCLUDED_DIR, step), []).extend(file.url for file in run.excluded(step).files)
        for step in run.cluster_steps():
            parts.setdefault(join(CLUSTERS_DIR, step), []).extend(file.url for file in run.clusters(step).files)
        parts.setdefault(DEAD_LETTERS_DIR, []).extend(file.url for file in run.dead_letters().files)
    for where, files in parts.items():
        for number, source in enumerate(files):
            # The parts of a shard's run end as its writer named them (.jsonl.gz, .jsonl, ...).
            extension = posixpath.basename(source).split(".", 1)[1]
            name = FilenameTemplate.with_shard(f"part-${{{SHARD}}}.{extension}", number)
            # The output may be on an object store; the job directory is on a POSIX file system.
            put_file(source, join(folder, where, name))
    summaries = [run.path(SUMMARY_STATS_DIR) for run in runs if run.holds(SUMMARY_STATS_DIR)]
    if summaries:
        merge_summary_stats(summaries, join(folder, SUMMARY_STATS_DIR))


def _merged_stats(
    job: JobDir, manifest: dict[str, Any], dones: list[dict[str, Any]], report: dict[str, Any], output: str
) -> dict[str, Any]:
    """What ``stats.json`` holds for a merged job: its options, its funnel and the shards' counters added up."""
    runs = [json.loads((job.path / done["stats"]).read_text()) for done in dones if done["stats"]]
    first = runs[0] if runs else {}
    spec = pipeline_spec(manifest["pipeline"]["name"])
    options = parse(spec, [*manifest["pipeline"]["args"], "--output", output])
    return {
        "beamtrove_version": manifest["beamtrove_version"],
        "pipeline": spec.name,
        "runner": first.get("runner", "DirectRunner"),
        "state": "DONE",
        "options": configuration(spec.name, options, spec.option_classes)["options"],
        "funnel": first.get("funnel", []),
        "steps": merge_stats(run["steps"] for run in runs),
        "elastic": {
            "job_dir": str(job.path),
            "shards": len(dones),
            "documents": report["documents"],
            "hosts": report["hosts"],
            "merged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }


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
