"""Scanning an elastic job's input and cutting it into shards, and what a shard covers.

Plain ``.jsonl`` files are cut between records; WARC files and compressed
JSONL files are whole units. Each input is hashed and its records counted as
it is scanned; :func:`cut_shards` places the shard boundaries so shards hold
about equal bytes, and :func:`shard_sha256` lets a worker check a shard's
bytes before it runs it.
"""

from __future__ import annotations

import array
import hashlib
import io
import os
from collections.abc import Sequence
from typing import Any, BinaryIO

import fsspec.compression
import numpy as np
from warcio.archiveiterator import ArchiveIterator

from beamtrove.execution.jobs.jobdir import ElasticError
from beamtrove.execution.resume import changed_reads
from beamtrove.formats.jsonl import JsonlParser
from beamtrove.formats.warc import WarcParser
from beamtrove.fs import InputFile, compression_of, file_sha256, match_inputs

__all__ = [
    "check_shard_bytes",
    "check_unchanged",
    "cut_shards",
    "scan_inputs",
    "shard_inputs",
    "shard_sha256",
    "shards",
]

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
    """Hashes a plain JSONL file and adds one unit per record (one for a file of none); returns (sha256, records).

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
    if not ends:
        # A file without records is still read, as a run reads it: one unit of none.
        units.add(file_index, 0, size, 0, 0)
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


def _scan_whole_file(path: str, is_warc: bool) -> tuple[str, int, int, str | None]:
    """SHA-256, records (WARC records, or non-blank JSONL lines), their bytes once decompressed, and why counting
    stopped, of a whole-file unit."""
    count, content, error = 0, 0, None
    with open(path, "rb") as raw:
        hashing = _HashingReader(raw)
        stream = io.BufferedReader(hashing, _CHUNK)
        try:
            if is_warc:
                count = sum(1 for _ in ArchiveIterator(stream, arc2warc=True))
            else:
                with fsspec.compression.compr[compression_of(path)](stream, mode="rb") as lines:
                    for line in lines:
                        if line.strip():
                            count += 1
                            content += len(line)
        except Exception as exc:  # damaged files are the pipeline's to count as errors; the scan notes them
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        while stream.read(_CHUNK):  # the checksum covers the bytes no record was read from
            pass
    return hashing.digest.hexdigest(), count, content or os.path.getsize(path), error


def scan_inputs(patterns: list[str]) -> tuple[str, list[dict[str, Any]], dict[str, np.ndarray]]:
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
    if not files:
        raise ElasticError(
            f"The input ({', '.join(patterns)}) is the output of runs that kept no document, an empty input: "
            "an elastic job needs files to cut into shards, so there is nothing to prepare."
        )
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
            entry["sha256"], entry["records"], entry["content_bytes"], scan_error = _scan_whole_file(
                file.url, input_format == "warc"
            )
            if scan_error:
                entry["scan_error"] = scan_error
            units.add(index, 0, stat.st_size, 0, entry["records"])
        entry["splittable"] = splittable
        inputs.append(entry)
    return input_format, inputs, units.arrays()


def scan_whole_files(files: Sequence[InputFile]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Inputs of any format as whole-file units (token shards, Parquet): their entries and units.

    The records of such a file are not counted (0): its reader counts them.
    """
    inputs, units = [], _Units()
    for index, file in enumerate(files):
        stat = os.stat(file.url)
        entry = {"url": file.url, "name": file.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        entry.update(sha256=file_sha256(file.url), records=0, splittable=False)
        units.add(index, 0, stat.st_size, 0, 0)
        inputs.append(entry)
    return inputs, units.arrays()


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


def check_shard_bytes(manifest: dict[str, Any], shard: dict[str, Any], task: str) -> None:
    """Refuses to run ``task`` over ``shard`` when its bytes changed since prepare (sizes and times were checked
    when the worker started: :func:`check_unchanged`).

    Raises:
        ElasticError: They changed.
    """
    if shard_sha256(manifest, shard) != shard["sha256"]:
        raise ElasticError(
            f"The bytes of the input of {task} changed since the job was prepared although sizes and times did "
            "not: restore the input, or prepare a new job directory."
        )


def check_unchanged(manifest: dict[str, Any]) -> None:
    """Refuses a job whose input files, or the files its options name to read, changed since prepare.

    Inputs are compared by size and modification time (before a shard or
    read task, its bytes are also compared with the manifest's:
    :func:`shard_sha256`); a tokenizer, model, list or index by its contents
    (:func:`~beamtrove.execution.resume.changed_reads`). Workers check it
    when they start.

    Raises:
        ElasticError: Something changed or is gone; no task of the job may run.
    """
    for entry in manifest["inputs"]:
        try:
            stat = os.stat(entry["url"])
        except FileNotFoundError:
            raise ElasticError(f"Input {entry['url']} is gone since prepare: restore it.") from None
        if (stat.st_size, stat.st_mtime_ns) != (entry["size"], entry["mtime_ns"]):
            raise ElasticError(
                f"Input {entry['url']} changed since prepare (size or modification time): results would mix two "
                "inputs, so no shard is run. Restore it, or prepare a new job directory."
            )
    changed = changed_reads(manifest.get("reads", []))
    if changed:
        raise ElasticError(
            f"{', '.join(changed)} holds other contents than when the job was prepared: results would mix two of "
            "them, so no shard is run. Restore it, or prepare a new job directory."
        )


def shards(inputs: list[dict[str, Any]], units: dict[str, np.ndarray], num_shards: int) -> list[dict[str, Any]]:
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
