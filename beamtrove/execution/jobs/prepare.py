"""``beamtrove elastic prepare``: check the pipeline and its options, scan the input, create the job directory.

A job is prepared once: the pipeline must be shard-safe and its options fit
for shards (no ``--skip``/``--limit``, a local runner), the pipeline is built
over the first shard so bad options fail now rather than on every shard, and
the job directory appears whole, with one rename.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Sequence
from typing import Any

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from beamtrove import __version__
from beamtrove.configuration import ConfigurationError
from beamtrove.execution.build import build
from beamtrove.execution.jobs.jobdir import (
    FORMAT_VERSION,
    MANIFEST,
    SHARDS_KIND,
    ElasticError,
    JobDir,
    config_sha256,
    job_identity,
)
from beamtrove.execution.jobs.scan import scan_inputs, shard_inputs, shards
from beamtrove.execution.jobs.staged.plan import refuse_unstaged
from beamtrove.execution.jobs.staged.prepare import prepare_staged_job
from beamtrove.execution.output_checks import input_folders
from beamtrove.execution.resume import read_digests
from beamtrove.input_ranges import write_input_ranges
from beamtrove.option_parsing import parse, split_beam_options
from beamtrove.options import BeamtroveOptions, ResumeOptions
from beamtrove.pipelines import pipeline_spec
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.progress import utc_timestamp

__all__ = ["prepare_job", "refuse_for_tasks"]


def _split_arguments(spec: PipelineSpec, pipeline_args: Sequence[str]) -> tuple[list[str], list[str], list[dict]]:
    """The pipeline's configuration and the runner's options among the arguments, and what the files they name
    hold (:func:`~beamtrove.execution.resume.read_digests`); refuses what shards cannot do."""
    try:
        options = parse(spec, pipeline_args)
        config, runner = split_beam_options(spec, pipeline_args)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    common = options.view_as(BeamtroveOptions)
    set_by_workers = {"--input": common.input, "--input_ranges": common.input_ranges, "--output": common.output}
    for flag, value in set_by_workers.items():
        if value is not None:
            raise ElasticError(
                f"{flag} is set by the workers: give the input to prepare with --input, "
                "and merge the shards' outputs with `beamtrove elastic merge --output`."
            )
    try:
        refuse_for_tasks(options, "elastic jobs")
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    if options.view_as(ResumeOptions).resumable:
        raise ElasticError("Elastic jobs resume by shard on their own: drop --resumable.")
    return config, runner, read_digests(options, spec.option_classes)


def refuse_for_tasks(options: PipelineOptions, runs: str, instead: str = "") -> None:
    """Refuses the options that the tasks of a job cannot honour: counts across the whole input, another runner.

    Args:
        options: The pipeline's options.
        runs: What runs the tasks, as the messages name it: ``--staged runs``, ``elastic jobs``.
        instead: What a message about another runner offers besides dropping ``--runner``.

    Raises:
        ConfigurationError: One is given; the message says which and what to do.
    """
    common = options.view_as(BeamtroveOptions)
    for flag, given in (("--skip", bool(common.skip)), ("--limit", common.limit is not None)):
        if given:
            raise ConfigurationError(
                f"{flag} counts documents across the whole input, of which each task of {runs} sees a part: drop it."
            )
    if common.input_ranges:
        raise ConfigurationError(f"--input_ranges is set for each task of {runs}: drop it.")
    runner = options.view_as(StandardOptions).runner
    if runner not in ("DirectRunner", None):
        raise ConfigurationError(
            f"The tasks of {runs} run on local DirectRunners, not {runner}: drop --runner{instead}."
        )
    if options.view_as(DirectOptions).direct_running_mode == "multi_threading":
        raise ConfigurationError("--direct_running_mode multi_threading loses elements on this Beam: use in_memory.")


def _known_pipeline(name: str) -> PipelineSpec:
    try:
        return pipeline_spec(name)
    except ValueError as exc:
        raise ElasticError(str(exc)) from None


def _prepare_staged(
    job: JobDir,
    spec: PipelineSpec,
    inputs: list[str],
    partitions: int,
    config: list[str],
    lock_timeout: float,
    max_retries: int,
) -> tuple[dict[str, Any], bool]:
    """Prepares a staged job: the pipeline's global steps as tasks over ``partitions`` partitions."""
    try:
        options = parse(spec, [*config, *(f"--input={pattern}" for pattern in inputs), "--output", str(job.path)])
        flow = spec.flow(options)
    except (ConfigurationError, ValueError, OSError) as exc:
        raise ElasticError(f"The {spec.name} pipeline cannot run with these options: {exc}") from None
    try:
        refuse_unstaged(flow, spec.name)
    except ConfigurationError as exc:
        raise ElasticError(str(exc)) from None
    manifest, resumed = prepare_staged_job(
        job.path,
        spec,
        inputs,
        flow.reader.files,
        config,
        str(job.path),
        read_digests(options, spec.option_classes),
        partitions=partitions,
        replace_other=False,
        lock_timeout=lock_timeout,
        max_retries=max_retries,
    )
    return manifest, not resumed


def _check_configuration(spec: PipelineSpec, args: list[str], runner_args: list[str], manifest: dict) -> None:
    """Builds the pipeline over the first shard without running it, so bad options fail now, not on every shard."""
    with tempfile.TemporaryDirectory(prefix="beamtrove-prepare-") as scratch:
        ranges = os.path.join(scratch, "inputs.json")
        write_input_ranges(shard_inputs(manifest, manifest["shards"][0]), ranges)
        try:
            options = parse(
                spec, [*args, *runner_args, "--input_ranges", ranges, "--output", os.path.join(scratch, "output")]
            )
            # Built offline: a check that inspected its scratch output would lock it, its heartbeat left beating.
            built = build(spec, options, inspect_output=False)
        except ConfigurationError as exc:
            raise ElasticError(f"The {spec.name} pipeline cannot run with these options: {exc}") from None
    if built.flow.sink.documents_dir is None:
        raise ElasticError(
            f"Shard outputs are merged as JSONL part files, which the {spec.name} pipeline does not write with these "
            "options: drop the options that change its output format or file names."
        )


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    old, new = job_identity(old), job_identity(new)
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))


def prepare_job(
    job_dir: str | os.PathLike,
    pipeline: str,
    inputs: Sequence[str],
    num_shards: int,
    pipeline_args: Sequence[str] = (),
    *,
    lock_timeout: float = 300.0,
    max_retries: int = 2,
    attempt_timeout: float | None = None,
) -> tuple[dict[str, Any], bool]:
    """Scans the input, cuts it into shards and creates the job directory atomically.

    Input files are taken in sorted path order. Plain ``.jsonl`` files are cut
    between records; WARC and compressed JSONL files are whole units. The
    ``num_shards`` shards are contiguous runs of units with about equal bytes.

    Args:
        job_dir: The job directory to create (on storage every worker sees).
        pipeline: A shard-safe pipeline (``fineweb``, ``extract``, ``filter``, ``convert``), or one whose global
            steps all have staged forms (``dedup``, ``dedup_index``, ``tokenize``, ``merge_tokens``).
        inputs: Input files, directories or glob patterns (local paths).
        num_shards: How many shards to cut; at most the number of units.
        pipeline_args: The pipeline's options (``--lid_model ...``) and local
            runner options (``--direct_num_workers 2 ...``), as ``beamtrove run``
            takes them, without ``--input`` and ``--output``.
        lock_timeout: Seconds without a heartbeat after which a shard's lock is
            stale and another worker takes the shard over.
        max_retries: Failed attempts of a shard retried before it is failed.
        attempt_timeout: Seconds an attempt may run before it is stopped and
            counted as failed (a hung pipeline keeps its heartbeat, so only
            this frees its shard); None for no limit.

    Returns:
        ``(manifest, created)``; ``created`` is False when an identical job
        was already prepared there (a no-op).

    Raises:
        ElasticError: Bad options, a pipeline that is not shard-safe, unusable
            input, or a different job already in ``job_dir``.
    """
    if num_shards < 1:
        raise ElasticError(f"--num-shards must be at least 1 (got {num_shards}).")
    if lock_timeout <= 0 or max_retries < 0 or (attempt_timeout is not None and attempt_timeout <= 0):
        raise ElasticError("--lock-timeout and --attempt-timeout must be positive, --max-retries at least 0.")
    job = JobDir(job_dir)
    if job.path.exists() and any(job.path.iterdir()) and not (job.path / MANIFEST).exists():
        raise ElasticError(f"{job.path} exists and is not a job directory: choose a new --job-dir.")
    spec = _known_pipeline(pipeline)
    config, runner_args, reads = _split_arguments(spec, pipeline_args)
    if not spec.shard_safe:
        if not spec.runs_staged:
            raise ElasticError(
                f"The {pipeline} pipeline needs its whole input at once ({spec.global_steps}) and has no staged "
                f"form, so elastic workers cannot run it: run it once, with `beamtrove run {pipeline}`."
            )
        if attempt_timeout is not None:
            raise ElasticError(
                f"The {pipeline} pipeline runs as a staged job, whose tasks run inside their worker's process: "
                "--attempt-timeout cannot stop one, drop it (a frozen worker's tasks are taken over after "
                "--lock-timeout)."
            )
        return _prepare_staged(job, spec, list(inputs), num_shards, config, lock_timeout, max_retries)
    input_format, input_entries, units = scan_inputs(list(inputs))
    manifest = {
        "format": FORMAT_VERSION,
        "kind": SHARDS_KIND,
        "beamtrove_version": __version__,
        "created_at": utc_timestamp(),
        "created_by": socket.gethostname(),
        "pipeline": {"name": pipeline, "args": config, "sha256": config_sha256(pipeline, config)},
        "runner_args": runner_args,
        "lock_timeout": float(lock_timeout),
        "max_retries": int(max_retries),
        "attempt_timeout": None if attempt_timeout is None else float(attempt_timeout),
        "input_format": input_format,
        "input_folders": input_folders(inputs),
        "inputs": input_entries,
        "reads": reads,
        "shards": shards(input_entries, units, num_shards),
    }
    _check_configuration(spec, config, runner_args, manifest)
    if job.create(manifest):
        return manifest, True
    existing = job.manifest()
    if job_identity(existing) == job_identity(manifest):
        return existing, False
    raise ElasticError(
        f"{job.path} holds a different job (differs in: {', '.join(_differences(existing, manifest))}): "
        "use a new --job-dir for a new configuration or changed input."
    )
