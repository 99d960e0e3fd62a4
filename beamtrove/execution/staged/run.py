"""``beamtrove run PIPELINE --staged``: the pipeline as staged tasks on local worker processes.

The input is cut into partitions, as many as it takes for one task to hold
at most ``--memory`` bytes, and the job directory goes into the output
folder (``.beamtrove-staged/``, which only this run uses). ``--workers``
processes claim the tasks stage after stage; then the run's outputs, laid
out by the write task, are published with ``stats.json`` and
``report.html`` as ``beamtrove run`` publishes them, and the job directory
goes. A run that is killed leaves the job directory: the same command
again goes on from the tasks already done; another configuration or input
starts it over.
"""

from __future__ import annotations

import logging
import math
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beamtrove import __version__
from beamtrove.configuration import ConfigurationError
from beamtrove.execution.elastic.jobdir import (
    FORMAT_VERSION,
    STAGED_KIND,
    ElasticError,
    JobDir,
    config_sha256,
)
from beamtrove.execution.elastic.prepare import publish_job
from beamtrove.execution.elastic.scan import scan_inputs, scan_whole_files, shard_inputs, shards
from beamtrove.execution.elastic.status import retry_shards, shard_states
from beamtrove.execution.output import check_auxiliary_inputs, check_separate, plan_output
from beamtrove.execution.output_merge import publish_merged
from beamtrove.execution.resume import configuration
from beamtrove.execution.run import RunInterrupted, RunResult
from beamtrove.execution.staged.plan import JobPlan, held_per_input_byte, input_ranges_file, not_staged
from beamtrove.execution.staged.status import copy_run_outputs, staged_stats, verify_staged
from beamtrove.formats.jsonl import JsonlParser
from beamtrove.formats.warc import WarcParser
from beamtrove.fs import InputFile, join, read_json_record
from beamtrove.input_ranges import input_ranges_json
from beamtrove.layout import STAGED_JOB_DIR, STATS_FILE
from beamtrove.options import BeamtroveOptions, StagedOptions, paths_read
from beamtrove.pipelines.common import input_files
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.pipelines.summary_stats import SummaryStatsOptions
from beamtrove.processes import die_with_parent, stops_interrupt

__all__ = ["merge_staged_job", "partitions_for", "prepare_staged_job", "run_staged"]

_LOGGER = logging.getLogger(__name__)

# Arguments that say how to run, not what: the workers take their input and output from the job.
_RUN_FLAGS = ("--input", "--output", "--overwrite", "--staged", "--workers", "--memory", "--progress_interval")
_VALUED_RUN_FLAGS = ("--input", "--output", "--workers", "--memory", "--progress_interval")
# Workers of a local run are on this machine: a dead one's lock is taken over at once; this bounds a frozen one.
_LOCAL_LOCK_TIMEOUT = 120.0


def _job_args(argv: Sequence[str]) -> list[str]:
    """The pipeline arguments that say what the job computes: ``argv`` without input, output and how to run."""
    kept, skip_value = [], False
    for argument in argv:
        if skip_value:
            skip_value = False
            continue
        flag = argument.split("=", 1)[0]
        if flag in _RUN_FLAGS:
            skip_value = flag in _VALUED_RUN_FLAGS and "=" not in argument
            continue
        kept.append(argument)
    return kept


def partitions_for(input_bytes: int, memory: int, held_per_input_byte: float) -> int:
    """Partitions that keep one task within ``memory`` bytes for an input of ``input_bytes``."""
    return max(1, math.ceil(input_bytes * held_per_input_byte / memory))


def _identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {key: manifest[key] for key in ("pipeline", "partitions", "inputs", "beamtrove_version")}


def prepare_staged_job(
    job_path: pathlib.Path,
    spec: PipelineSpec,
    patterns: Sequence[str],
    files: Sequence[InputFile],
    args: Sequence[str],
    output: str,
    *,
    memory: int | None = None,
    held_per_input_byte: float | None = None,
    partitions: int | None = None,
    replace_other: bool = True,
    lock_timeout: float = _LOCAL_LOCK_TIMEOUT,
    max_retries: int = 2,
) -> tuple[dict[str, Any], bool]:
    """Scans the input, cuts it into partitions and publishes the job directory, or finds the same job there.

    Args:
        job_path: The job directory.
        spec: The pipeline.
        patterns: Its input.
        files: The files its reader matched: WARC and JSONL inputs are cut
            as elastic jobs cut them (plain JSONL between records), any
            other format into whole files.
        args: Its options, without input and output.
        output: The run's output folder (workers write only into the job directory).
        memory: Bytes one task may hold: sets the partitions (unless ``partitions`` is given).
        held_per_input_byte: What a task holds per byte of its documents (see ``StagedForm``).
        partitions: How many partitions to cut.
        replace_other: Start over when the job directory holds another job; otherwise refuse it.
        lock_timeout: Seconds without a heartbeat after which a task's lock is stale.
        max_retries: Failed attempts of a task retried before it fails.

    Returns:
        ``(manifest, resumed)``: ``resumed`` when the job was already there, with the same pipeline, options and input.

    Raises:
        ElasticError: Unusable input, or another job in ``job_path`` and not ``replace_other``.
    """
    if all(file.url.endswith(WarcParser.suffixes + JsonlParser.suffixes) for file in files):
        _, entries, units = scan_inputs(list(patterns))
    else:
        entries, units = scan_whole_files(files)
    if partitions is None:
        input_bytes = sum(entry.get("content_bytes", entry["size"]) for entry in entries)
        partitions = partitions_for(input_bytes, memory, held_per_input_byte)
    # A read task only streams its shard to the partitions' files, so an input of few files is read in few tasks.
    read_shards = min(partitions, len(units["file"]))
    manifest = {
        "format": FORMAT_VERSION,
        "kind": STAGED_KIND,
        "beamtrove_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "created_by": socket.gethostname(),
        "pipeline": {"name": spec.name, "args": list(args), "sha256": config_sha256(spec.name, list(args))},
        "output": output,
        "partitions": partitions,
        "lock_timeout": float(lock_timeout),
        "max_retries": int(max_retries),
        "inputs": entries,
        "shards": shards(entries, units, read_shards),
    }
    job = JobDir(job_path)
    existing = read_json_record(job_path / "manifest.json")
    if existing is not None:
        if _identity(existing) == _identity(manifest):
            return job.manifest(), True
        if not replace_other:
            raise ElasticError(
                f"{job_path} holds a different staged job: use a new --job-dir for another configuration or input."
            )
        _LOGGER.warning("%s holds a staged job of another configuration or input: starting over", job_path)
        shutil.rmtree(job_path)
    elif job_path.exists():
        shutil.rmtree(job_path)  # a job directory whose prepare was cut short
    ranges = {}
    for partition, shard in enumerate(manifest["shards"]):
        name = str(input_ranges_file(pathlib.Path(), partition))
        ranges[name] = input_ranges_json(shard_inputs(manifest, shard))
    if not publish_job(job, manifest, ranges):
        raise ElasticError(f"Another run prepared {job_path} at the same time.")
    return job.manifest(), False


def _check_options(spec: PipelineSpec, options: PipelineOptions) -> None:
    common = options.view_as(BeamtroveOptions)
    refused = {
        "--skip": bool(common.skip),
        "--limit": common.limit is not None,
        "--input_ranges": bool(common.input_ranges),
    }
    for flag, given in refused.items():
        if given:
            raise ConfigurationError(f"--staged runs cut the input into partitions themselves: drop {flag}.")
    runner = options.view_as(StandardOptions).runner
    if runner not in (None, "DirectRunner"):
        raise ConfigurationError(
            f"--staged runs its tasks on local DirectRunners, not {runner}: drop --runner, or drop --staged to run "
            "the pipeline on that runner in one piece."
        )
    if spec.shard_safe:
        raise ConfigurationError(f"The {spec.name} pipeline has no global step to stage: drop --staged.")
    if spec.summary_stats and options.view_as(SummaryStatsOptions).summary_stats:
        raise ConfigurationError(
            "--staged runs do not compute --summary_stats yet: drop it, and compute them afterwards with "
            "`beamtrove run stats --input OUTPUT --output STATS`."
        )


def _run_workers(job_path: pathlib.Path, workers: int) -> int:
    """Runs ``workers`` worker processes over the job until they end; 0 when every task is done."""
    command = [sys.executable, "-m", "beamtrove.execution.staged", str(job_path)]
    children = [subprocess.Popen(command, preexec_fn=die_with_parent) for _ in range(workers)]  # noqa: PLW1509
    try:
        codes = [child.wait() for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return max(codes)


def run_staged(spec: PipelineSpec, options: PipelineOptions) -> RunResult:
    """Runs the pipeline as a staged job on ``--workers`` local processes and publishes its outputs.

    Raises:
        ConfigurationError: The pipeline or its options cannot run staged (nothing ran).
        RunInterrupted: The run was interrupted; its job directory keeps the tasks done.
    """
    _check_options(spec, options)
    staged = options.view_as(StagedOptions)
    started = time.monotonic()
    output = spec.run_output(options)
    plan = plan_output(output, overwrite=options.view_as(BeamtroveOptions).overwrite)
    job_path = pathlib.Path(join(output, STAGED_JOB_DIR))
    try:
        try:
            flow = spec.flow(options, plan.write_to)
        except (ValueError, OSError) as exc:
            raise ConfigurationError(str(exc)) from exc
        check_separate(flow.reader.patterns, flow.reader.files, flow.output)
        check_auxiliary_inputs(paths_read(options, spec.option_classes), flow.output)
        missing = not_staged(flow)
        if missing:
            raise ConfigurationError(
                f"--staged runs the global steps as tasks, and {', '.join(missing)} has no staged form yet: run it "
                "without --staged."
            )
        patterns = [str(pattern) for pattern in input_files(options)]
        try:
            # The arguments as given (Beam keeps them): what the workers parse, less where and how the run goes.
            args = _job_args(options._flags)
            manifest, resumed = prepare_staged_job(
                job_path,
                spec,
                patterns,
                flow.reader.files,
                args,
                output,
                memory=staged.memory,
                held_per_input_byte=held_per_input_byte(flow),
            )
        except ElasticError as exc:
            raise ConfigurationError(str(exc)) from None
        job = JobDir(job_path)
        job_plan = JobPlan(job_path, manifest)
        if resumed:
            _LOGGER.warning("%s: going on with the staged job of an earlier run of this command", output)
            failed = [entry["id"] for entry in shard_states(job_path) if entry["state"] in ("failed", "damaged")]
            if failed:
                retry_shards(job_path, failed)
                _LOGGER.warning("%s: trying again the tasks that failed or were damaged: %s", output, ", ".join(failed))
        with stops_interrupt() as interrupted:
            try:
                code = _run_workers(job_path, staged.workers)
            except KeyboardInterrupt:
                raise RunInterrupted(
                    f"interrupted: nothing was written to {output}; {job_path} keeps the tasks done, and the same "
                    "command again goes on from them."
                ) from None
        if interrupted:
            raise RunInterrupted(f"interrupted: rerun the same command to go on from the tasks done in {job_path}.")
        stats = _run_stats(job, job_plan, options, "DONE" if code == 0 else "FAILED")
        stats["wall_seconds"] = round(time.monotonic() - started, 3)
        stats["staged"] |= {"workers": staged.workers, "resumed": resumed}
        if code != 0:
            plan.abandon()
            return RunResult("FAILED", stats, "")
        report = publish_merged(plan, lambda folder: copy_run_outputs(job, job_plan, folder, move=True), stats)
    except BaseException:
        plan.abandon()
        raise
    return RunResult("DONE", stats, join(output, STATS_FILE), report)


def _run_stats(job: JobDir, job_plan: JobPlan, options: PipelineOptions, state: str) -> dict[str, Any]:
    """What ``stats.json`` holds for a staged run: its options, funnel and every done task's counters added up."""
    spec = job_plan.spec
    return {
        "beamtrove_version": __version__,
        "pipeline": spec.name,
        "runner": "DirectRunner",
        "state": state,
        "options": configuration(spec.name, options, spec.option_classes)["options"],
        "funnel": list(job_plan.flow.funnel),
        "steps": staged_stats(job, job_plan),
        "staged": {"partitions": job_plan.partitions},
    }


def merge_staged_job(job_dir: str | os.PathLike, output: str, *, overwrite: bool = False) -> dict[str, Any]:
    """``beamtrove elastic merge`` of a staged job: its run folder published into ``output``, as a run publishes it.

    Returns:
        The verification report, with ``output`` and ``stats`` (the path of ``stats.json``).

    Raises:
        ElasticError: A task is not done or a file is damaged, or ``output`` may not be written.
    """
    job = JobDir(job_dir)
    job_plan = JobPlan(job.path, job.manifest())
    report = verify_staged(job, job_plan)
    if not report["complete"]:
        raise ElasticError(
            f"The job is not complete (tasks not done: {len(report['missing'])}; failed: "
            f"{', '.join(report['failed']) or 'none'}; damaged: {'; '.join(report['problems']) or 'none'}): run "
            "workers, or `retry` the tasks named, first."
        )
    stats = _run_stats(job, job_plan, job_plan.options(0), "DONE")
    stats["staged"]["hosts"] = report["hosts"]
    try:
        plan = plan_output(output, overwrite=overwrite)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    publish_merged(plan, lambda folder: copy_run_outputs(job, job_plan, folder, move=False), stats)
    return {**report, "output": output, "stats": join(output, STATS_FILE)}
