"""The file sink shared by all writers: templated names, rollover, atomic finalize.

Writing happens in two steps, the way Beam's own file sinks work:

1. Each bundle writes its elements to temporary files under
   ``<output>/.beamtrove-tmp-<run id>/``, one open file per destination (the
   file name template rendered with the element's fields), starting a new file
   when one reaches ``max_file_size`` bytes or when the format asks for it
   (a Parquet schema change).
2. Once every bundle is done, a single finalize step numbers the files of each
   destination (``${shard}``) in a deterministic order, moves them to their
   final names and deletes the temporary directory. Files from failed or
   retried bundles never reach a final name.

File names come from templates (:mod:`beamtrove.transforms.writers.filenames`).
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

import apache_beam as beam
from apache_beam.transforms import window

from beamtrove.document import Document
from beamtrove.fs import filesystem, join, move, open_url
from beamtrove.layout import WRITER_TEMP_PREFIX
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers.filenames import SHARD, FilenameTemplate

__all__ = [
    "SHARD",
    "FileFormat",
    "FilenameTemplate",
    "RecordWriter",
    "RolloverNeeded",
    "TempFile",
    "WriteFiles",
    "WrittenFile",
    "document_fields",
    "document_key",
]


class RolloverNeeded(Exception):
    """Raised by a :class:`RecordWriter` whose file cannot take more elements.

    Attributes:
        pending: Elements accepted but not written; they go to a new file.
    """

    def __init__(self, pending: list[Any]):
        super().__init__(f"{len(pending)} elements need a new file")
        self.pending = pending


class RecordWriter:
    """Writes elements into one open file.

    ``write`` and ``close`` may raise :class:`RolloverNeeded`; after that,
    ``close`` must finish the file without the pending elements.
    """

    records: int = 0

    def write(self, element: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Flushes buffered elements and ends the format (not the stream)."""
        raise NotImplementedError


class FileFormat:
    """Opens :class:`RecordWriter` s over raw output streams."""

    def open(self, stream: BinaryIO, suffix: str, metrics: StepMetrics) -> RecordWriter:
        """A writer for a new file named ``...suffix``; it may count into ``metrics``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class WrittenFile:
    """A file a writer produced.

    Attributes:
        path: Final path or URL (temporary until finalize).
        records: Elements it holds.
        size: Bytes on storage.
        destination: The rendered template, ``${shard}`` still unfilled.
        first_key: Sort key of its first element; orders a destination's files.
    """

    path: str
    records: int
    size: int
    destination: str = ""
    first_key: str = ""


@dataclasses.dataclass(frozen=True)
class _SinkSpec:
    """What the sink's DoFns need; kept apart from the PTransform to pickle small."""

    step: str
    output_dir: str
    temp_dir: str
    template: FilenameTemplate
    file_format: FileFormat
    fields_of: Callable[[Any], Mapping[str, Any]]
    key_of: Callable[[Any], str]
    max_file_size: int | None
    storage_options: Mapping[str, Any]


@dataclasses.dataclass
class TempFile:
    """A file that a :class:`FileFormat` writes under a temporary name, to be moved in place once complete."""

    path: str
    opener: Any
    stream: BinaryIO
    writer: RecordWriter

    @classmethod
    def open(
        cls,
        temp_dir: str,
        suffix: str,
        file_format: FileFormat,
        metrics: StepMetrics,
        storage_options: Mapping[str, Any] | None = None,
    ) -> TempFile:
        """Opens a new uniquely named file ending in ``suffix`` under ``temp_dir``."""
        path = join(temp_dir, uuid.uuid4().hex + suffix)
        opener = open_url(path, "wb", storage_options)
        stream = opener.open()
        return cls(path, opener, stream, file_format.open(stream, suffix, metrics))

    def close(self) -> tuple[list[Any], int]:
        """Closes the writer and the file; returns the elements the format handed back and the file's size."""
        try:
            self.writer.close()
            leftover = []
        except RolloverNeeded as rollover:
            self.writer.close()
            leftover = rollover.pending
        size = self.stream.tell()
        self.opener.close()
        return leftover, size


class _WriteTempFiles(beam.DoFn):
    def __init__(self, spec: _SinkSpec):
        self._spec = spec

    def setup(self):
        self._metrics = StepMetrics(self._spec.step)

    def start_bundle(self):
        # destination -> (its open file, sort key of the file's first element)
        self._files: dict[str, tuple[TempFile, str]] = {}

    def process(self, element):
        self._metrics.received()
        destination = self._spec.template.destination(self._spec.fields_of(element))
        yield from self._write(destination, [element])

    def finish_bundle(self):
        while self._files:
            for written in self._finish(next(iter(self._files))):
                yield window.GlobalWindows.windowed_value(written)

    def _write(self, destination: str, elements: list[Any]) -> Iterator[WrittenFile]:
        while elements:
            open_file = (self._files.get(destination) or self._open(destination, elements[0]))[0]
            for position, element in enumerate(elements):
                try:
                    open_file.writer.write(element)
                except RolloverNeeded as rollover:
                    elements = rollover.pending + elements[position + 1 :]
                    yield from self._finish(destination)
                    break
            else:
                elements = []
                max_size = self._spec.max_file_size
                if max_size and open_file.stream.tell() >= max_size:
                    yield from self._finish(destination)

    def _open(self, destination: str, first: Any) -> tuple[TempFile, str]:
        spec = self._spec
        temp = TempFile.open(spec.temp_dir, spec.template.suffix, spec.file_format, self._metrics, spec.storage_options)
        self._files[destination] = (temp, spec.key_of(first))
        return self._files[destination]

    def _finish(self, destination: str) -> Iterator[WrittenFile]:
        open_file, first_key = self._files.pop(destination)
        leftover, size = open_file.close()
        records = open_file.writer.records
        if records:
            self._metrics.emitted(records)
            yield WrittenFile(open_file.path, records, size, destination, first_key)
        else:
            fs, path = filesystem(open_file.path, self._spec.storage_options)
            fs.rm(path)
        if leftover:
            yield from self._write(destination, leftover)


class _Finalize(beam.DoFn):
    """Numbers the temporary files of each destination and moves them in place."""

    def __init__(self, spec: _SinkSpec):
        self._spec = spec

    def process(self, temp_files: list[WrittenFile]):
        spec = self._spec
        metrics = StepMetrics(spec.step)
        fs, _ = filesystem(spec.output_dir, spec.storage_options)
        by_destination = collections.defaultdict(list)
        for temp in temp_files:
            by_destination[temp.destination].append(temp)
        for destination in sorted(by_destination):
            ordered = sorted(by_destination[destination], key=lambda t: (t.first_key, t.path))
            for shard, temp in enumerate(ordered):
                final = join(spec.output_dir, FilenameTemplate.with_shard(destination, shard))
                if fs.exists(filesystem(temp.path, spec.storage_options)[1]):
                    move(temp.path, final, spec.storage_options)
                elif not fs.exists(filesystem(final, spec.storage_options)[1]):
                    # A retried finalize finds the files it moved before in place.
                    raise FileNotFoundError(f"Temporary file {temp.path} vanished before it was moved to {final}.")
                metrics.inc("files")
                metrics.inc("bytes", temp.size)
                yield WrittenFile(final, temp.records, temp.size, destination, temp.first_key)
        temp_path = filesystem(spec.temp_dir, spec.storage_options)[1]
        if fs.exists(temp_path):
            fs.rm(temp_path, recursive=True)


class WriteFiles(beam.PTransform):
    """Writes a ``PCollection`` to files named by a template, finalized atomically.

    The concrete writers (:class:`~beamtrove.transforms.writers.WriteJsonl`,
    :class:`~beamtrove.transforms.writers.WriteParquet`, ...) configure it with a
    :class:`FileFormat`. The output is a ``PCollection`` of
    :class:`WrittenFile` with final paths, available once all files are in
    place. Stats: ``in`` and ``out`` elements, ``files`` and ``bytes`` written.
    """

    def __init__(
        self,
        output_dir: str,
        filename_template: str,
        file_format: FileFormat,
        *,
        fields_of: Callable[[Any], Mapping[str, Any]],
        key_of: Callable[[Any], str],
        max_file_size: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ):
        """Validates the configuration.

        Args:
            output_dir: Directory (path or URL) the template is relative to.
            filename_template: See :class:`FilenameTemplate`.
            file_format: How elements are laid out in a file.
            fields_of: The fields an element offers to the template.
            key_of: A stable sort key of an element; orders the files of a
                destination so that the same input gives the same numbering.
            max_file_size: Start a new file once one holds this many bytes
                (the file can overshoot by one element or row group).
            storage_options: fsspec filesystem options.

        Raises:
            ValueError: A bad template or a non-positive ``max_file_size``.
        """
        super().__init__()
        if max_file_size is not None and max_file_size <= 0:
            raise ValueError(f"max_file_size must be positive (got {max_file_size}).")
        self._output_dir = output_dir.rstrip("/")
        self._template = FilenameTemplate(filename_template)
        self._file_format = file_format
        self._fields_of = fields_of
        self._key_of = key_of
        self._max_file_size = max_file_size
        self._storage_options = dict(storage_options or {})

    def _spec(self) -> _SinkSpec:
        return _SinkSpec(
            step=self.label,
            output_dir=self._output_dir,
            temp_dir=join(self._output_dir, f"{WRITER_TEMP_PREFIX}{uuid.uuid4().hex}"),
            template=self._template,
            file_format=self._file_format,
            fields_of=self._fields_of,
            key_of=self._key_of,
            max_file_size=self._max_file_size,
            storage_options=self._storage_options,
        )

    def expand(self, pcoll):
        spec = self._spec()
        return (
            pcoll
            | "WriteTempFiles" >> beam.ParDo(_WriteTempFiles(spec))
            | "CollectTempFiles" >> beam.combiners.ToList()
            | "Finalize" >> beam.ParDo(_Finalize(spec))
        )


def document_fields(document: Document) -> Mapping[str, Any]:
    """Template fields of a document: its metadata."""
    return document.metadata


def document_key(document: Document) -> str:
    """Sort key of a document: its id."""
    return document.id
