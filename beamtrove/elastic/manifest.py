"""``beamtrove elastic prepare``: scan the input, cut shards, publish the job directory."""

from __future__ import annotations

import array
import hashlib
import io
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any, BinaryIO

import apache_beam as beam
import fsspec.compression
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions
from fsspec.utils import infer_compression
from warcio.archiveiterator import ArchiveIterator

from beamtrove import __version__
from beamtrove.elastic.jobdir import (
    FORMAT_VERSION,
    MANIFEST,
    MANIFEST_CHECKSUM,
    SUBDIRS,
    ElasticError,
    JobDir,
    config_sha256,
    sha256_of,
)
from beamtrove.fs import InputFile, match_inputs, write_input_ranges
from beamtrove.options import option_owners
from beamtrove.pipelines import load_pipeline
from beamtrove.transforms.readers import JsonlParser, WarcParser

__all__ = ["cut_shards", "prepare_job", "shard_inputs", "shard_sha256"]

_SET_BY_ELASTIC = ("--input", "--input_ranges", "--input-ranges", "--output")
_WHOLE_INPUT_OPTIONS = ("--skip", "--limit")
# Keys that may differ between two otherwise identical prepares.
_PROVENANCE_KEYS = ("created_at", "created_by")
_CHUNK = 1 << 20


def cut_shards(unit_sizes: Sequence[int], num_shards: int) -> list[int]:
    """Cuts a sequence of units into ``num_shards`` contiguous, non-empty, byte-balanced runs.

    Each cut is placed at the unit boundary nearest to its ideal share of the
    bytes (ties go to the earlier boundary), while leaving at least one unit
    for every shard still to come.

    Returns:
        ``num_shards + 1`` boundaries: shard ``k`` holds units
        ``[bounds[k], bounds[k + 1])``.
    """
    count = len(unit_sizes)
    if not 1 <= num_shards <= count:
        raise ValueError(f"Cannot cut {count} units into {num_shards} non-empty shards.")
    ends = np.cumsum(np.asarray(unit_sizes, dtype=np.int64))
    total = int(ends[-1])
    bounds = [0]
    for k in range(1, num_shards):
        # Compare ends[c - 1] / total with k / num_shards in integers.
        low, high = bounds[-1] + 1, count - (num_shards - k)
        nearest = int(np.searchsorted(ends * num_shards, total * k))
        candidates = sorted({min(max(c, low), high) for c in (nearest, nearest + 1)})
        bounds.append(min(candidates, key=lambda c: abs(int(ends[c - 1]) * num_shards - total * k)))
    bounds.append(count)
    return bounds


class _Units:
    """The shard units of the whole input, in input order: (file, start, end, first_index, records)."""

    def __init__(self):
        self.columns = {name: array.array("q") for name in ("file", "start", "end", "first_index", "records")}

    def add(self, file: int, start: int, end: int, first_index: int, records: int) -> None:
        for name, value in zip(self.columns, (file, start, end, first_index, records), strict=True):
            self.columns[name].append(value)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: np.frombuffer(column, dtype=np.int64) for name, column in self.columns.items()}


def _scan_plain_jsonl(path: str, file_index: int, size: int, units: _Units) -> tuple[str, int]:
    """Hashes a plain JSONL file and adds one unit per record; returns (sha256, records).

    A unit runs from the end of the previous record's line to the end of its
    own, so blank lines travel with the record after them (and trailing ones
    with the last record).
    """
    digest = hashlib.sha256()
    ends, lines = array.array("q"), array.array("q")
    offset = 0
    with open(path, "rb") as source:
        for index, line in enumerate(source):
            digest.update(line)
            offset += len(line)
            if line.strip():
                ends.append(offset)
                lines.append(index)
    for k in range(len(ends)):
        start, first_index = (ends[k - 1], lines[k - 1] + 1) if k else (0, 0)
        units.add(file_index, start, ends[k] if k < len(ends) - 1 else size, first_index, 1)
    return digest.hexdigest(), len(ends)


class _HashingReader(io.RawIOBase):
    """Hashes every byte read through it, so a file is counted and hashed in one read."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        read = self._raw.readinto(buffer)
        self.digest.update(memoryview(buffer)[:read])
        return read


def _scan_whole_file(path: str, is_warc: bool) -> tuple[str, int, str | None]:
    """SHA-256 and records (WARC records, or non-blank JSONL lines) of a whole-file unit, and why counting stopped."""
    count, error = 0, None
    with open(path, "rb") as raw:
        hashing = _HashingReader(raw)
        stream = io.BufferedReader(hashing, _CHUNK)
        try:
            if is_warc:
                count = sum(1 for _ in ArchiveIterator(stream, arc2warc=True))
            else:
                with fsspec.compression.compr[infer_compression(path)](stream, mode="rb") as lines:
                    count = sum(1 for line in lines if line.strip())
        except Exception as exc:  # damaged files are the pipeline's to count as errors; the scan notes them
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        while stream.read(_CHUNK):  # the checksum covers the bytes no record was read from
            pass
    return hashing.digest.hexdigest(), count, error


def _scan_inputs(patterns: list[str]) -> tuple[str, list[dict[str, Any]], dict[str, np.ndarray]]:
    for pattern in patterns:
        if "://" in pattern and not pattern.startswith("file://"):
            raise ElasticError(
                f"Elastic inputs must be paths on storage every worker mounts; {pattern!r} is a URL. "
                "Copy the data to the shared file system, or run the pipeline on Flink or Dataflow."
            )
    try:
        files = match_inputs(patterns, WarcParser.suffixes + JsonlParser.suffixes)
    except FileNotFoundError as exc:
        raise ElasticError(str(exc)) from None
    kinds = {
        "warc" if f.url.endswith(WarcParser.suffixes) else "jsonl" if f.url.endswith(JsonlParser.suffixes) else None
        for f in files
    }
    if None in kinds or len(kinds) != 1:
        raise ElasticError(
            "Elastic jobs read WARC/ARC/WET files (one shard unit per file) or JSONL files (one unit per record "
            f"in plain .jsonl, per file when compressed), all of one kind; got {sorted(f.name for f in files)[:5]}."
        )
    input_format = kinds.pop()
    inputs, units = [], _Units()
    for index, file in enumerate(files):
        stat = os.stat(file.url)
        splittable = input_format == "jsonl" and file.url.endswith(".jsonl")
        entry = {"url": file.url, "name": file.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if splittable:
            entry["sha256"], entry["records"] = _scan_plain_jsonl(file.url, index, stat.st_size, units)
        else:
            entry["sha256"], entry["records"], scan_error = _scan_whole_file(file.url, input_format == "warc")
            if scan_error:
                entry["scan_error"] = scan_error
            units.add(index, 0, stat.st_size, 0, entry["records"])
        entry["splittable"] = splittable
        inputs.append(entry)
    return input_format, inputs, units.arrays()


def shard_inputs(manifest: dict[str, Any], shard: dict[str, Any]) -> list[InputFile]:
    """The input files, and byte ranges of plain JSONL files, that ``shard`` covers."""
    files = []
    for segment in shard["segments"]:
        source = manifest["inputs"][segment["input"]]
        if source["splittable"]:
            start, end = segment["start"], segment["end"]
            files.append(InputFile(source["url"], source["name"], end - start, start, end, segment["first_index"]))
        else:
            files.append(InputFile(source["url"], source["name"], source["size"]))
    return files


def _range_sha256(path: str, start: int, end: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        source.seek(start)
        left = end - start
        while left > 0 and (chunk := source.read(min(_CHUNK, left))):
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def shard_sha256(manifest: dict[str, Any], shard: dict[str, Any], *, trust_file_hashes: bool = False) -> str:
    """The SHA-256 of the SHA-256s of the byte ranges ``shard`` covers, read now from its input files.

    Args:
        manifest: The job's manifest.
        shard: One of its shards.
        trust_file_hashes: Take a range covering a whole file from the
            manifest's file checksum instead of reading it (prepare has just
            computed those; workers must read).
    """
    digest = hashlib.sha256()
    for segment in shard["segments"]:
        source = manifest["inputs"][segment["input"]]
        if trust_file_hashes and (segment["start"], segment["end"]) == (0, source["size"]):
            digest.update(bytes.fromhex(source["sha256"]))
        else:
            digest.update(bytes.fromhex(_range_sha256(source["url"], segment["start"], segment["end"])))
    return digest.hexdigest()


def _shards(inputs: list[dict[str, Any]], units: dict[str, np.ndarray], num_shards: int) -> list[dict[str, Any]]:
    count = len(units["file"])
    if num_shards > count:
        raise ElasticError(
            f"The input has {count} shard units (records of plain JSONL files, whole WARC or compressed files), "
            f"too few for {num_shards} non-empty shards: pass --num-shards {count} or less."
        )
    bounds = cut_shards(units["end"] - units["start"], num_shards)
    width = max(5, len(str(num_shards - 1)))
    shards = []
    for k in range(num_shards):
        first, last = bounds[k], bounds[k + 1]
        segments = []
        for u in range(first, last):
            file = int(units["file"][u])
            if segments and segments[-1]["input"] == file:
                segments[-1]["end"] = int(units["end"][u])
            else:
                segments.append(
                    {
                        "input": file,
                        "start": int(units["start"][u]),
                        "end": int(units["end"][u]),
                        "first_index": int(units["first_index"][u]),
                    }
                )
        shard = {
            "id": f"shard-{k:0{width}d}",
            "bytes": int((units["end"][first:last] - units["start"][first:last]).sum()),
            "records": int(units["records"][first:last].sum()),
            "segments": segments,
        }
        shard["sha256"] = shard_sha256({"inputs": inputs}, shard, trust_file_hashes=True)
        shards.append(shard)
    return shards


def _split_arguments(pipeline_args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Splits arguments into the pipeline's configuration and the runner's options."""
    owners = option_owners()
    groups: list[list[str]] = []
    for token in pipeline_args:
        if token.startswith("--"):
            groups.append([token])
        elif groups:
            groups[-1].append(token)
        else:
            raise ElasticError(f"Pipeline arguments are options (--name value); {token!r} is not one.")
    config, runner = [], []
    for group in groups:
        flag = group[0].split("=", 1)[0]
        value = group[0].split("=", 1)[1] if "=" in group[0] else (group[1] if len(group) > 1 else None)
        if flag in _SET_BY_ELASTIC:
            raise ElasticError(
                f"{flag} is set by the workers: give the input to prepare with --input, "
                "and merge the shards' outputs with `beamtrove elastic merge --output`."
            )
        if flag in _WHOLE_INPUT_OPTIONS:
            raise ElasticError(f"{flag} counts documents across the whole input, which shards cannot do: drop it.")
        if flag == "--resumable":
            raise ElasticError("Elastic jobs resume by shard on their own: drop --resumable.")
        if flag == "--runner" and value not in ("DirectRunner", None):
            raise ElasticError(f"Elastic workers run the pipeline with a local DirectRunner, not {value}.")
        if flag == "--direct_running_mode" and value == "multi_threading":
            raise ElasticError("--direct_running_mode multi_threading loses elements on this Beam: use in_memory.")
        owner = owners.get(flag)
        if owner is None:
            raise ElasticError(f"Unknown pipeline option {flag} (see beamtrove run PIPELINE --help).")
        (config if owner.__module__.startswith("beamtrove.") else runner).extend(group)
    return config, runner


def _shard_safe_pipeline(name: str) -> ModuleType:
    """The pipeline's module; refuses pipelines with steps that need the whole input."""
    try:
        module = load_pipeline(name)
    except ValueError as exc:
        raise ElasticError(str(exc)) from None
    if not hasattr(module, "documents_path"):
        reason = getattr(module, "GLOBAL_STEPS", "it has steps that need the whole input")
        raise ElasticError(
            f"The {name} pipeline is not shard-safe: {reason}. Run it once, with `beamtrove run {name}`, "
            "over the merged output of a shard-safe pipeline."
        )
    return module


def _check_configuration(module: ModuleType, args: list[str], runner_args: list[str], manifest: dict) -> None:
    """Builds the pipeline over the first shard without running it, so bad options fail now, not on every shard."""
    with tempfile.TemporaryDirectory(prefix="beamtrove-prepare-") as scratch:
        ranges = os.path.join(scratch, "inputs.json")
        write_input_ranges(shard_inputs(manifest, manifest["shards"][0]), ranges)
        options = PipelineOptions([*args, *runner_args, "--input_ranges", ranges, "--output", scratch])
        try:
            module.documents_path(options)
            module.build(beam.Pipeline(options=options), options)
        except (ValueError, FileNotFoundError, FileExistsError) as exc:
            name = manifest["pipeline"]["name"]
            raise ElasticError(f"The {name} pipeline cannot run with these options: {exc}") from None


def _identity(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in _PROVENANCE_KEYS}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(old) | set(new) if k not in _PROVENANCE_KEYS and old.get(k) != new.get(k))


def _publish(job: JobDir, manifest: dict[str, Any]) -> bool:
    """Builds the job directory beside its final place and renames it there; False if one appeared first."""
    job.path.parent.mkdir(parents=True, exist_ok=True)
    staging = job.path.with_name(f".{job.path.name}.staging-{uuid.uuid4().hex}")
    staging.mkdir()
    try:
        data = json.dumps(manifest, indent=1).encode()
        (staging / MANIFEST).write_bytes(data)
        (staging / MANIFEST_CHECKSUM).write_text(f"{sha256_of(data)}  {MANIFEST}\n")
        for subdir in SUBDIRS:
            (staging / subdir).mkdir()
        try:
            os.rename(staging, job.path)  # replaces nothing but an empty directory
        except OSError:
            return False
        return True
    finally:
        if staging.exists():
            shutil.rmtree(staging)


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
    """Scans the input, cuts it into shards and publishes the job directory atomically.

    Input files are taken in sorted path order. Plain ``.jsonl`` files are cut
    between records; WARC and compressed JSONL files are whole units. The
    ``num_shards`` shards are contiguous runs of units with about equal bytes.

    Args:
        job_dir: The job directory to create (on storage every worker sees).
        pipeline: A shard-safe pipeline: ``fineweb``, ``extract`` or ``convert``.
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
        raise ElasticError(f"{job.path} exists and is not an elastic job directory: choose a new --job-dir.")
    module = _shard_safe_pipeline(pipeline)
    # After the pipeline's import, which registers its options.
    config, runner_args = _split_arguments(pipeline_args)
    input_format, input_entries, units = _scan_inputs(list(inputs))
    manifest = {
        "format": FORMAT_VERSION,
        "beamtrove_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "created_by": socket.gethostname(),
        "pipeline": {"name": pipeline, "args": config, "sha256": config_sha256(pipeline, config)},
        "runner_args": runner_args,
        "lock_timeout": float(lock_timeout),
        "max_retries": int(max_retries),
        "attempt_timeout": None if attempt_timeout is None else float(attempt_timeout),
        "input_format": input_format,
        "inputs": input_entries,
        "shards": _shards(input_entries, units, num_shards),
    }
    _check_configuration(module, config, runner_args, manifest)
    if _publish(job, manifest):
        return manifest, True
    existing = job.manifest()
    if _identity(existing) == _identity(manifest):
        return existing, False
    raise ElasticError(
        f"{job.path} holds a different job (differs in: {', '.join(_differences(existing, manifest))}): "
        "use a new --job-dir for a new configuration or changed input."
    )
