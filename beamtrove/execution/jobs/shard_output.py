"""Publishing a shard's documents: one gzip file sorted by id, the same bytes whoever wrote it, within a memory budget.

A worker (:mod:`beamtrove.execution.jobs.worker`) collects the document
parts of a shard's run into the file its done record describes; a shard
larger than the budget is sorted in runs spilled to disk, then merged.
"""

from __future__ import annotations

import contextlib
import gzip
import heapq
import io
import os
import pathlib
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import orjson

from beamtrove.fs import file_sha256

__all__ = ["DEFAULT_SORT_MEMORY", "collect_documents"]

#: Bytes of documents a worker holds while sorting a shard's output, unless told otherwise.
DEFAULT_SORT_MEMORY = 256 << 20

# Runs merged at once: each is an open file with its own read buffer.
_MERGE_FAN_IN = 64
# What a held line costs beside its bytes: the bytes object, its list slot and its sort key (tracemalloc, short ids).
_LINE_OVERHEAD = 160
_SCRATCH_PREFIX = ".publishing-"


def _document_order(line: bytes) -> tuple[str, bytes]:
    """Where a line goes in a published shard: by its document's id as a string, then by its bytes."""
    return str(orjson.loads(line).get("id")), line


def _part_lines(documents_dir: str) -> Iterator[bytes]:
    """The non-blank lines of the run's document parts, each ending in one newline."""
    for part in sorted(pathlib.Path(documents_dir).glob("*.jsonl.gz")):
        with gzip.open(part, "rb") as source:
            yield from (line.rstrip(b"\n") + b"\n" for line in source if line.strip())


class _ExternalSort:
    """Writes lines in document order while holding at most about ``memory`` bytes of them.

    Lines that fit are sorted in memory. Otherwise each run of lines that fits
    (or a single longer line) is sorted and spilled to a file in ``scratch``,
    and the runs are merged, at most :data:`_MERGE_FAN_IN` at a time, so a
    shard's size is bounded by disk.

    Attributes:
        runs: How many sorted runs were spilled (0 when every line fit).
    """

    def __init__(self, scratch: pathlib.Path, memory: int):
        self.scratch = scratch
        self.memory = memory
        self.runs = 0
        # The merge reads every open run through its own buffer: together about half the budget, 8 KiB each at least.
        self.buffer_size = max(io.DEFAULT_BUFFER_SIZE, memory // (2 * _MERGE_FAN_IN))
        self._files = 0

    def write(self, lines: Iterable[bytes], out: BinaryIO) -> int:
        """Writes ``lines`` to ``out`` in document order; returns how many there were."""
        held, size, count, runs = [], 0, 0, []
        for line in lines:
            cost = len(line) + _LINE_OVERHEAD
            if held and size + cost > self.memory:
                runs.append(self._spill(held))
                held, size = [], 0
            held.append(line)
            size += cost
            count += 1
        if not runs:
            held.sort(key=_document_order)
            out.writelines(held)
            return count
        if held:
            runs.append(self._spill(held))
        del held  # the merge gets its memory back
        while len(runs) > _MERGE_FAN_IN:
            groups = [runs[start : start + _MERGE_FAN_IN] for start in range(0, len(runs), _MERGE_FAN_IN)]
            runs = [group[0] if len(group) == 1 else self._merge_into_run(group) for group in groups]
        self._merge(runs, out)
        return count

    def _new_file(self) -> pathlib.Path:
        self._files += 1
        return self.scratch / f"run-{self._files:06d}"

    def _spill(self, lines: list[bytes]) -> pathlib.Path:
        lines.sort(key=_document_order)
        path = self._new_file()
        with open(path, "wb", buffering=self.buffer_size) as run:
            run.writelines(lines)
        self.runs += 1
        return path

    def _merge_into_run(self, runs: list[pathlib.Path]) -> pathlib.Path:
        path = self._new_file()
        with open(path, "wb", buffering=self.buffer_size) as merged:
            self._merge(runs, merged)
        return path

    def _merge(self, runs: list[pathlib.Path], out: BinaryIO) -> None:
        """Merges sorted runs into ``out``, deleting them."""
        with contextlib.ExitStack() as files:
            sources = [files.enter_context(open(run, "rb", buffering=self.buffer_size)) for run in runs]
            out.writelines(heapq.merge(*sources, key=_document_order))
        for run in runs:
            run.unlink()


def collect_documents(documents_dir: str, target: pathlib.Path, sort_memory: int) -> tuple[dict[str, Any], int]:
    """Writes the shard's documents, sorted by id, as one reproducible gzip file.

    Sorting makes the output of a shard the same bytes whichever worker, bundle
    order or attempt produced it. Spilled runs and the file being written live
    in a scratch folder beside ``target``, removed however this ends; the file
    appears under its name by one rename, complete.

    Args:
        documents_dir: The run's documents folder (``*.jsonl.gz`` parts).
        target: The file to publish.
        sort_memory: About how many bytes of documents to hold while sorting.

    Returns:
        The done record's fields of the file (``records``, ``bytes``,
        ``mtime_ns``, ``sha256``), and how many sorted runs were spilled.
    """
    # Once the file is in place, a scratch file that cannot be removed must not fail the attempt.
    with tempfile.TemporaryDirectory(prefix=_SCRATCH_PREFIX, dir=target.parent, ignore_cleanup_errors=True) as scratch:
        sort = _ExternalSort(pathlib.Path(scratch), sort_memory)
        written = pathlib.Path(scratch) / target.name
        with open(written, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            records = sort.write(_part_lines(documents_dir), out)
        os.replace(written, target)
    stat = target.stat()
    # The modification time lets status skip re-hashing an output nobody touched since.
    fields = {"records": records, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(target)}
    return fields, sort.runs
