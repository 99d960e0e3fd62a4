"""``beamtrove run PIPELINE --staged``: the pipeline as staged tasks on local worker processes.

The input is cut into partitions, as many as it takes for one task to hold
at most ``--memory`` bytes, and the job directory goes into the output
folder (``.beamtrove-job/``, which only this run uses). ``--workers``
processes, forked from this one with Beam and the pipeline's modules
imported, claim the tasks stage after stage; then the run's outputs, laid
out by the write task, are published with ``stats.json`` and
``report.html`` as ``beamtrove run`` publishes them, and the job directory
goes. A run that is killed leaves the job directory: the same command
again goes on from the tasks already done; another configuration or input
starts it over.
"""

from __future__ import annotations

import logging
import pathlib
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.jobs.jobdir import ElasticError, JobDir, check_job_dir_is_posix
from beamtrove.execution.jobs.merge import merged_stats
from beamtrove.execution.jobs.prepare import refuse_for_tasks
from beamtrove.execution.jobs.staged.kind import StagedJob
from beamtrove.execution.jobs.staged.plan import held_per_input_byte, refuse_unstaged
from beamtrove.execution.jobs.staged.prepare import prepare_staged_job
from beamtrove.execution.jobs.status import retry_tasks, task_states
from beamtrove.execution.jobs.worker import run_workers
from beamtrove.execution.output import check_auxiliary_inputs, check_separate, plan_output
from beamtrove.execution.output_merge import publish_merged
from beamtrove.execution.resume import read_digests
from beamtrove.execution.run_result import RunInterrupted, RunResult
from beamtrove.fs import join
from beamtrove.layout import FORMER_JOB_DIR, JOB_DIR, STATS_FILE
from beamtrove.options import BeamtroveOptions, StagedOptions, SummaryStatsOptions, format_bytes, paths_read
from beamtrove.pipelines.common import input_files
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.processes import machine_workers

__all__ = ["DEFAULT_MEMORY", "WORKER_OVERHEAD", "run_staged"]

_LOGGER = logging.getLogger(__name__)

# Arguments that say how to run, not what: the workers take their input and output from the job.
_RUN_FLAGS = ("--input", "--output", "--overwrite", "--staged", "--workers", "--memory", "--progress_interval")
_VALUED_RUN_FLAGS = ("--input", "--output", "--workers", "--memory", "--progress_interval")
#: The data one task holds at most when --memory is not given.
DEFAULT_MEMORY = 1 << 30
#: What a worker process holds besides its task's data: Python, Beam and a task's pipeline (about 160 MiB idle).
WORKER_OVERHEAD = 512 << 20
# Below this much input per partition, starting a task costs more than its work.
_SMALL_PARTITION = 1 << 20
# Failed tasks a failed run names.
_FAILURES_SHOWN = 3
# Free space below which a failed run names a full disk among its causes.
_LOW_DISK = 64 << 20
# Runs of the workers: a file found damaged before publishing is redone once.
_ROUNDS = 2


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


def _check_options(spec: PipelineSpec, options: PipelineOptions) -> None:
    refuse_for_tasks(options, "--staged runs", ", or drop --staged to run the pipeline on that runner in one piece")
    if spec.summary_stats and options.view_as(SummaryStatsOptions).summary_stats:
        raise ConfigurationError(
            "--staged runs do not compute --summary_stats yet: drop it, and compute them afterwards with "
            "`beamtrove run stats --input OUTPUT --output STATS`."
        )


def _worker_count(requested: int | None, memory: int, tasks_at_once: int) -> int:
    """The workers to start: ``requested`` (default: as many as fit), within the cores, memory and tasks there are.

    A worker holds a task's partition (up to ``memory`` bytes) beside its own Python and Beam; more workers than
    a stage has tasks would only wait.
    """
    fitting, bound = machine_workers(memory + WORKER_OVERHEAD)
    limits = {
        f"the most tasks a stage of this job runs at once ({tasks_at_once})": tasks_at_once,
        f"this machine's {bound}"
        + (
            f" ({fitting} workers of --memory {format_bytes(memory)} and {format_bytes(WORKER_OVERHEAD)} each)"
            if bound == "memory"
            else f" ({fitting})"
        ): fitting,
    }
    reason, limit = min(limits.items(), key=lambda item: item[1])
    count = min(requested or limit, limit)
    if requested is not None and count < requested:
        _LOGGER.warning("--workers %d: starting %d, %s", requested, count, reason)
    return max(1, count)


def _warn_small_partitions(manifest: Mapping[str, Any], job_plan, memory: int) -> None:
    """Warns when tasks would hold so little that starting them costs more than their work (a tiny --memory)."""
    input_bytes = sum(entry.get("content_bytes", entry["size"]) for entry in manifest["inputs"])
    partitions = manifest["partitions"]
    if partitions > 1 and input_bytes / partitions < _SMALL_PARTITION:
        tasks = sum(job_plan.tasks(stage) for stage in job_plan.stages)
        _LOGGER.warning(
            "--memory %s cuts %s of documents into %d partitions of %s each, in %d tasks: a task takes about half a "
            "second to start, more than its work; a larger --memory runs this job faster",
            format_bytes(memory),
            format_bytes(input_bytes),
            partitions,
            format_bytes(input_bytes // partitions),
            tasks,
        )


def _why_failed(job_path: pathlib.Path, kind: StagedJob, codes: Sequence[int]) -> str:
    """What ended a run whose workers did not all finish, and how to go on."""
    causes = []
    killed = sorted({-code for code in codes if code < 0})
    for signum in killed:
        name = signal.Signals(signum).name
        hint = (
            " (the kernel's OOM killer does this when memory runs out: give a smaller --memory or fewer --workers)"
            if signum == signal.SIGKILL
            else ""
        )
        causes.append(f"{sum(code == -signum for code in codes)} worker(s) were killed by {name}{hint}")
    states = task_states(kind.job.path, kind)
    failed = [entry for entry in states if entry["state"] == "failed"]
    for entry in failed[:_FAILURES_SHOWN]:
        error = (entry["error"].strip().splitlines() or [""])[-1]
        causes.append(f"{entry['id']} failed for good: {error}")
    if len(failed) > _FAILURES_SHOWN:
        causes.append(f"{len(failed) - _FAILURES_SHOWN} more task(s) failed for good")
    free = shutil.disk_usage(job_path).free
    if free < _LOW_DISK:
        causes.append(f"the file system of {job_path} has {format_bytes(free)} free")
    if not causes:
        causes.append("a worker stopped with an error (its line above says which)")
    done = sum(entry["state"] == "done" for entry in states)
    return (
        f"{'; '.join(causes)}. {job_path} keeps the {done} of {len(states)} tasks done: "
        + ("fix the cause, then " if failed or not killed else "")
        + "rerun the same command to go on from them"
    )


def run_staged(spec: PipelineSpec, options: PipelineOptions) -> RunResult:
    """Runs the pipeline as a staged job on ``--workers`` local processes and publishes its outputs.

    Raises:
        ConfigurationError: The pipeline or its options cannot run staged (nothing ran).
        RunInterrupted: The run was interrupted; its job directory keeps the tasks done.
    """
    _check_options(spec, options)
    staged = options.view_as(StagedOptions)
    memory = staged.memory or DEFAULT_MEMORY
    started = time.monotonic()
    output = spec.run_output(options)
    try:
        check_job_dir_is_posix(
            join(output, JOB_DIR),
            f"--output {output}, where --staged keeps its job directory,",
            "give an --output on one, or drop --staged to run the pipeline in one piece, which writes to the object "
            "store",
        )
    except ElasticError as exc:
        raise ConfigurationError(str(exc)) from None
    plan = plan_output(output, overwrite=options.view_as(BeamtroveOptions).overwrite)
    job_path = pathlib.Path(join(output, JOB_DIR))
    try:
        former = pathlib.Path(join(output, FORMER_JOB_DIR))
        if former.exists():
            _LOGGER.warning(
                "%s: removing %s, a --staged job of beamtrove 0.15 or earlier, whose layout this one does not "
                "read: the run starts over",
                output,
                former,
            )
            shutil.rmtree(former)
        try:
            flow = spec.flow(options, plan.write_to)
        except (ValueError, OSError) as exc:
            raise ConfigurationError(str(exc)) from exc
        check_separate(flow.reader.patterns, flow.reader.files, flow.output)
        check_auxiliary_inputs(paths_read(options, spec.option_classes), flow.output)
        refuse_unstaged(flow, spec.name)
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
                read_digests(options, spec.option_classes),
                memory=memory,
                held_per_input_byte=held_per_input_byte(flow),
            )
        except ElasticError as exc:
            raise ConfigurationError(str(exc)) from None
        kind = StagedJob(JobDir(job_path), manifest)
        job_plan = kind.plan
        _warn_small_partitions(manifest, job_plan, memory)
        workers = _worker_count(staged.workers, memory, max(job_plan.tasks(stage) for stage in job_plan.stages))
        if resumed:
            _LOGGER.warning("%s: going on with the staged job of an earlier run of this command", output)
        # Tasks that failed, or whose records or files are damaged, run again, as do those whose files for the run
        # are found damaged before it is published.
        for _ in range(_ROUNDS):
            _retry_unfinished(kind, output)
            codes = _run_interruptibly(job_path, workers, output)
            # A worker lost (killed) is no failure of the run when the others did every task.
            if any(codes) and not all(entry["state"] == "done" for entry in task_states(kind.job.path, kind)):
                details = {**kind.stats_details()["staged"], "workers": workers, "resumed": resumed}
                wall = round(time.monotonic() - started, 3)
                stats = merged_stats(kind, output, "FAILED", options, wall_seconds=wall, staged=details)
                plan.abandon()
                return RunResult("FAILED", stats, "", detail=_why_failed(job_path, kind, codes))
            if any(codes):
                _LOGGER.warning(
                    "%s: %d worker(s) ended early (exit codes %s); the others did every task",
                    output,
                    sum(code != 0 for code in codes),
                    ", ".join(str(code) for code in codes if code),
                )
            damaged = kind.damaged_run_outputs()
            if not damaged:
                break
            _LOGGER.warning("%s: files of %s are damaged: running them again", output, ", ".join(damaged))
            retry_tasks(kind.job.path, damaged, kind=kind)
        else:
            raise ConfigurationError(
                f"Files in {job_path} were damaged again while the run redid them: check the disk, then rerun the "
                "same command."
            )
        details = {**kind.stats_details()["staged"], "workers": workers, "resumed": resumed}
        wall = round(time.monotonic() - started, 3)
        stats = merged_stats(kind, output, "DONE", options, wall_seconds=wall, staged=details)
        report = publish_merged(plan, lambda folder: kind.lay_out(folder, link=True), stats)
    except BaseException:
        plan.abandon()
        raise
    return RunResult("DONE", stats, join(output, STATS_FILE), report)


def _retry_unfinished(kind: StagedJob, output: str) -> None:
    """Requeues the tasks that failed for good or whose records or files are damaged, saying which."""
    unfinished = [entry["id"] for entry in task_states(kind.job.path, kind) if entry["state"] in ("failed", "damaged")]
    if unfinished:
        retry_tasks(kind.job.path, unfinished, kind=kind)
        _LOGGER.warning("%s: trying again the tasks that failed or were damaged: %s", output, ", ".join(unfinished))


def _run_interruptibly(job_path: pathlib.Path, workers: int, output: str) -> list[int]:
    """Runs the workers; an interrupt (Ctrl-C, SIGTERM) stops them and ends the run in one line.

    Raises:
        RunInterrupted: The run was interrupted.
    """
    codes, interrupted = run_workers(job_path, workers, started_by_run=True)
    if interrupted:
        raise RunInterrupted(
            f"interrupted: nothing was written to {output}; {job_path} keeps the tasks done, and the same command "
            "again goes on from them."
        )
    return codes
