"""Preparing a staged job: the input scanned and cut into partitions, the job directory created whole."""

from __future__ import annotations

import logging
import math
import pathlib
import shutil
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from beamtrove import __version__
from beamtrove.execution.jobs.jobdir import (
    FORMAT_VERSION,
    STAGED_KIND,
    ElasticError,
    JobDir,
    config_sha256,
    job_identity,
)
from beamtrove.execution.jobs.scan import scan_inputs, scan_whole_files, shard_inputs, shards
from beamtrove.execution.jobs.staged.plan import input_ranges_file
from beamtrove.execution.output_checks import input_folders
from beamtrove.formats.jsonl import JsonlParser
from beamtrove.formats.warc import WarcParser
from beamtrove.fs import InputFile, read_json_record
from beamtrove.input_ranges import input_ranges_json
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.progress import utc_timestamp

__all__ = ["DEFAULT_LOCK_TIMEOUT", "partitions_for", "prepare_staged_job"]

_LOGGER = logging.getLogger(__name__)
#: Workers of a local run are on this machine: a dead one's lock is taken over at once; this bounds a frozen one.
DEFAULT_LOCK_TIMEOUT = 120.0


def partitions_for(input_bytes: int, memory: int, held_per_input_byte: float) -> int:
    """Partitions that keep one task within ``memory`` bytes for an input of ``input_bytes``."""
    return max(1, math.ceil(input_bytes * held_per_input_byte / memory))


def prepare_staged_job(
    job_path: pathlib.Path,
    spec: PipelineSpec,
    patterns: Sequence[str],
    files: Sequence[InputFile],
    args: Sequence[str],
    output: str,
    reads: Sequence[Mapping[str, Any]],
    *,
    memory: int | None = None,
    held_per_input_byte: float | None = None,
    partitions: int | None = None,
    replace_other: bool = True,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    max_retries: int = 2,
) -> tuple[dict[str, Any], bool]:
    """Scans the input, cuts it into partitions and creates the job directory, or finds the same job there.

    Args:
        job_path: The job directory.
        spec: The pipeline.
        patterns: Its input.
        files: The files its reader matched: WARC and JSONL inputs are cut
            as elastic jobs cut them (plain JSONL between records), any
            other format into whole files. No files (an empty input, or the
            folder of a run that kept nothing) make a job without read
            tasks, whose output is that of a run over nothing.
        args: Its options, without input and output.
        output: The run's output folder (workers write only into the job directory).
        reads: What every file its options name holds (:func:`~beamtrove.execution.resume.read_digests`): a job
            reading another tokenizer, model or index under the same name is another job.
        memory: Bytes one task may hold: sets the partitions (unless ``partitions`` is given).
        held_per_input_byte: What a task holds per byte of its documents (see ``StagedForm``).
        partitions: How many partitions to cut.
        replace_other: Start over when the job directory holds another job; otherwise refuse it.
        lock_timeout: Seconds without a heartbeat after which a task's lock is stale.
        max_retries: Failed attempts of a task retried before it fails.

    Returns:
        ``(manifest, resumed)``: ``resumed`` when the job was already there, with the same pipeline, options, input
        and files read.

    Raises:
        ElasticError: Unusable input, or another job in ``job_path`` and not ``replace_other``.
    """
    if files and all(file.url.endswith(WarcParser.suffixes + JsonlParser.suffixes) for file in files):
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
        "created_at": utc_timestamp(),
        "created_by": socket.gethostname(),
        "pipeline": {"name": spec.name, "args": list(args), "sha256": config_sha256(spec.name, list(args))},
        "output": output,
        "partitions": partitions,
        "lock_timeout": float(lock_timeout),
        "max_retries": int(max_retries),
        "patterns": list(patterns),
        "input_folders": input_folders(patterns),
        "inputs": entries,
        "reads": [dict(entry) for entry in reads],
        "shards": shards(entries, units, read_shards) if read_shards else [],
    }
    job = JobDir(job_path)
    existing = read_json_record(job_path / "manifest.json")
    if existing is not None:
        if job_identity(existing) == job_identity(manifest):
            return job.manifest(), True
        if not replace_other:
            raise ElasticError(
                f"{job_path} holds a different staged job: use a new --job-dir for another configuration or input."
            )
        _LOGGER.warning("%s holds a staged job of another configuration, input or files read: starting over", job_path)
        shutil.rmtree(job_path)
    elif job_path.exists():
        shutil.rmtree(job_path)  # a job directory whose prepare was cut short
    ranges = {}
    for partition, shard in enumerate(manifest["shards"]):
        name = str(input_ranges_file(pathlib.Path(), partition))
        ranges[name] = input_ranges_json(shard_inputs(manifest, shard))
    if not job.create(manifest, ranges):
        raise ElasticError(f"Another run prepared {job_path} at the same time.")
    return job.manifest(), False
