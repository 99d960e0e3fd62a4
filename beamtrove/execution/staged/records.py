"""The files of a staged run's datasets: framed records, partitioned by key, with their checksums.

A dataset file is a sequence of frames, each a 4-byte little-endian length
and a pickled record. Its writer counts records, bytes and a SHA-256 as it
writes and leaves them in a ``.json`` beside it once the file is complete,
so a task's done record lists every file it made without reading any back.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pickle
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import coders

from beamtrove.transforms.stages import KEYED, SPREAD

__all__ = ["DamagedDataset", "ReadDataset", "WriteDataset", "partition_of", "read_records", "written_files"]

_LENGTH = struct.Struct("<I")
_SUFFIX = ".rec"
_SUMMARY_SUFFIX = ".rec.json"
# Keys are bytes, strings, numbers and tuples of them; Beam's deterministic coder gives equal keys equal bytes
# (pickle does not: it shares repeated objects, so equal tuples can pickle apart).
_KEY_CODER = coders.FastPrimitivesCoder().as_deterministic_coder("staged partition keys")
_BUFFER = 1 << 20


class DamagedDataset(Exception):
    """A dataset file that ends inside a record, or is not the size its done record says."""


def partition_of(key: Any, partitions: int) -> int:
    """The partition of a key: the same for equal keys on every machine and Python."""
    digest = hashlib.blake2b(_KEY_CODER.encode(key), digest_size=8).digest()
    return int.from_bytes(digest, "little") % partitions


class _RecordFile:
    def __init__(self, path: pathlib.Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "wb", buffering=_BUFFER)  # noqa: SIM115 - closed by close()
        self._digest = hashlib.sha256()
        self.records = 0
        self.bytes = 0

    def write(self, record: Any) -> None:
        data = pickle.dumps(record, protocol=5)
        frame = _LENGTH.pack(len(data)) + data
        self._file.write(frame)
        self._digest.update(frame)
        self.records += 1
        self.bytes += len(frame)

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        summary = {"records": self.records, "bytes": self.bytes, "sha256": self._digest.hexdigest()}
        # The summary appears last: a file without one was cut short by a killed task.
        self.path.with_name(self.path.name[: -len(_SUFFIX)] + _SUMMARY_SUFFIX).write_text(json.dumps(summary))


def read_records(path: str | os.PathLike) -> Iterator[Any]:
    """The records of one dataset file, in the order they were written.

    Raises:
        DamagedDataset: The file ends inside a record.
    """
    with open(path, "rb", buffering=_BUFFER) as source:
        while header := source.read(_LENGTH.size):
            if len(header) < _LENGTH.size:
                raise DamagedDataset(f"{path} ends inside a record's length: the file was cut short or changed.")
            (length,) = _LENGTH.unpack(header)
            data = source.read(length)
            if len(data) < length:
                raise DamagedDataset(f"{path} ends inside a record: the file was cut short or changed.")
            yield pickle.loads(data)


def written_files(directory: pathlib.Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{dataset: {partition: [file entries]}}`` of what a task wrote under ``directory``.

    Each entry holds the file's ``path`` (relative to ``directory``), ``records``, ``bytes`` and ``sha256``.
    """
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for summary in sorted(directory.rglob(f"*{_SUMMARY_SUFFIX}")):
        data = summary.with_name(summary.name[: -len(_SUMMARY_SUFFIX)] + _SUFFIX)
        relative = data.relative_to(directory)
        dataset, partition = str(relative.parent.parent), relative.parent.name
        entry = {"path": str(relative), **json.loads(summary.read_text())}
        found.setdefault(dataset, {}).setdefault(str(int(partition)), []).append(entry)
    return found


class _WriteDatasetFn(beam.DoFn):
    def __init__(self, directory: str, placement: str, partitions: int, own_partition: int):
        self._directory = pathlib.Path(directory)
        self._placement = placement
        self._partitions = partitions
        self._own_partition = own_partition

    def setup(self):
        # Where the next SPREAD record goes: each task starts at its own partition, so small tasks do not all
        # fill partition 0.
        self._next = self._own_partition

    def start_bundle(self):
        self._files: dict[int, _RecordFile] = {}

    def process(self, record):
        if self._placement == KEYED:
            partition = partition_of(record[0], self._partitions)
        elif self._placement == SPREAD:
            partition, self._next = self._next, (self._next + 1) % self._partitions
        else:
            partition = self._own_partition
        file = self._files.get(partition)
        if file is None:
            path = self._directory / f"{partition:05d}" / f"{uuid.uuid4().hex}{_SUFFIX}"
            file = self._files[partition] = _RecordFile(path)
        file.write(record)

    def finish_bundle(self):
        for file in self._files.values():
            file.close()
        self._files = {}


class WriteDataset(beam.PTransform):
    """Writes a PCollection as one dataset's files under ``directory/<partition>/``.

    Args:
        directory: The dataset's folder in the task's attempt.
        placement: ``KEYED`` (each ``(key, value)`` to its key's partition), ``SAME`` or ``SPREAD``.
        partitions: The job's number of partitions.
        own_partition: The partition of the task, where ``SAME`` records go.
    """

    def __init__(self, directory: str, placement: str, partitions: int, own_partition: int):
        super().__init__()
        self._fn = _WriteDatasetFn(directory, placement, partitions, own_partition)

    def expand(self, records):
        return records | "Write" >> beam.ParDo(self._fn)


class ReadDataset(beam.PTransform):
    """Reads dataset files (a PBegin transform), one element per record."""

    def __init__(self, paths: list[str]):
        super().__init__()
        self._paths = sorted(paths)

    def expand(self, pipeline):
        # No reshuffle: it would be a shuffle of its own, of nothing but file names.
        paths = pipeline | "Paths" >> beam.Create(self._paths, reshuffle=False)
        return paths | "Records" >> beam.FlatMap(read_records)
