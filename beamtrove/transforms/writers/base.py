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
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

import apache_beam as beam
from apache_beam.transforms import window

from beamtrove.document import Document
from beamtrove.fs import filesystem, join, move, open_url
from beamtrove.layout import RUN_OUTPUT_NAMES, WRITER_TEMP_PREFIX
from beamtrove.metrics import StepMetrics

__all__ = [
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

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
_UNSAFE = re.compile(r"[^\w.=+-]")
# fsspec reads "scheme://" (and "::", which chains filesystems) anywhere in a path as a URL of its own.
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
SHARD = "shard"
MISSING_VALUE = "unknown"
#: The longest file or folder name common filesystems take (ext4, XFS, btrfs, ZFS), in bytes of UTF-8.
MAX_NAME_BYTES = 255
#: The longest a placeholder's value renders: a longer one keeps its start and ends in a hash of the whole value.
MAX_VALUE_BYTES = 100
_HASH_CHARS = 16
# Room a name keeps for ${shard}: five digits, more past 99,999 files in one destination.
_SHARD_BYTES = 10
# A shortened value keeps at least a few characters of its start before its hash.
_MIN_VALUE_BYTES = _HASH_CHARS + 8
_EXAMPLE = "'${language}/part-${shard}.jsonl.gz'"


class FilenameTemplate:
    """File names such as ``${dump}/${language}/part-${shard}.jsonl.gz``.

    ``${shard}`` is required and becomes the file's 5-digit sequence number
    within its destination. Every other ``${key}`` is filled from the element's
    fields (a document's metadata); a missing or empty value becomes
    ``unknown``, and characters that could escape the output directory become
    ``_``. A value too long for a file name (over :data:`MAX_VALUE_BYTES`, or
    less when one name holds several placeholders) keeps its start and ends in
    ``-`` and 16 hex digits of its SHA-256, so the same value always gives the
    same name and no name exceeds :data:`MAX_NAME_BYTES`.

    Rendered names stay visible data: a name a value would start with ``.``
    or ``_`` (names readers skip) starts with ``%`` or ``~`` instead, which
    no value renders to otherwise, and a first folder a value would name
    like one of a run's own outputs (``dead_letters``, ...) gets the hash
    ending too, so a document never lands among a run's dead letters.
    """

    def __init__(self, template: str):
        """Validates the template.

        Raises:
            ValueError: The template lacks ``${shard}``, holds a URL or ``::``,
                is absolute, has an empty, ``.`` or ``..`` folder name, or a
                name that could render longer than :data:`MAX_NAME_BYTES`.
        """
        if SHARD not in _PLACEHOLDER.findall(template):
            raise ValueError(
                f"Output file name template {template!r} needs a ${{{SHARD}}} placeholder so that several "
                f"files can share a destination, e.g. 'part-${{{SHARD}}}.jsonl.gz'."
            )
        problem = _placement_problem(template)
        if problem:
            raise ValueError(
                f"Output file name template {template!r} {problem}. A template is a path relative to the output "
                f"directory, e.g. {_EXAMPLE}."
            )
        self.template = template
        # Each folder or file name, and the bytes each of its values may render to.
        self._names = [(name, _value_room(name)) for name in template.split("/")]

    @property
    def suffix(self) -> str:
        """The file name ending after the shard placeholder, e.g. ``.jsonl.gz``."""
        return self.template.rsplit("${" + SHARD + "}", 1)[1].rsplit("/", 1)[-1]

    def destination(self, fields: Mapping[str, Any]) -> str:
        """The template with every placeholder but ``${shard}`` filled in."""
        rendered = [_data_name(_render(name, room, fields), name) for name, room in self._names]
        if rendered[0] in RUN_OUTPUT_NAMES and rendered[0] != self._names[0][0]:
            rendered[0] = _hashed(rendered[0], rendered[0])
        return "/".join(rendered)

    @staticmethod
    def with_shard(destination: str, shard: int) -> str:
        return destination.replace("${" + SHARD + "}", f"{shard:05d}")


def _placement_problem(template: str) -> str | None:
    """What keeps ``template`` from naming files inside the output directory, if anything."""
    if "::" in template:
        return "holds '::', which chains filesystems in an fsspec URL: every file would be written to one place"
    scheme = _URL_SCHEME.search(template)
    if scheme:
        return f"holds a URL ({scheme.group()}...): give the place to write to as the output directory"
    if template.startswith("/"):
        return "is an absolute path"
    for name in template.split("/"):
        if name == "..":
            return "climbs out of the output directory with '..'"
        if name in ("", "."):
            return "has an empty or '.' folder name"
        if name.startswith((".", "_")):
            return f"has the name {name!r}, which readers skip as bookkeeping (it starts with '.' or '_')"
        if _value_room(name) < _MIN_VALUE_BYTES:
            return (
                f"has the name {name!r}, which could render longer than {MAX_NAME_BYTES} bytes: shorten its text "
                "or spread its placeholders over folders"
            )
    return None


def _value_room(name: str) -> int:
    """The bytes each placeholder value of ``name`` may render to, for the name to fit in MAX_NAME_BYTES.

    At most MAX_VALUE_BYTES; negative when the name's own text leaves no room.
    """
    keys = _PLACEHOLDER.findall(name)
    values = sum(key != SHARD for key in keys)
    fixed = len(_PLACEHOLDER.sub("", name).encode("utf-8")) + _SHARD_BYTES * (len(keys) - values)
    if values == 0:
        return MAX_VALUE_BYTES if fixed <= MAX_NAME_BYTES else -1
    return min(MAX_VALUE_BYTES, (MAX_NAME_BYTES - fixed) // values)


def _data_name(rendered: str, name: str) -> str:
    """``rendered`` with a hidden start that a value gave it replaced: ``.`` by ``%``, ``_`` by ``~``."""
    if rendered == name or not rendered.startswith((".", "_")):
        return rendered
    return {".": "%", "_": "~"}[rendered[0]] + rendered[1:]


def _hashed(start: str, value: str) -> str:
    """``start``, ``-`` and 16 hex digits of the SHA-256 of the whole ``value``."""
    return f"{start}-{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:_HASH_CHARS]}"


def _render(name: str, room: int, fields: Mapping[str, Any]) -> str:
    """``name`` with its placeholders but ``${shard}`` filled from ``fields``, each value within ``room`` bytes."""

    def value(match: re.Match) -> str:
        key = match.group(1)
        return match.group(0) if key == SHARD else _name_part(fields.get(key), room)

    return _PLACEHOLDER.sub(value, name)


def _name_part(raw: Any, room: int) -> str:
    """``raw`` made safe for a file name and at most ``room`` bytes long."""
    text = "" if raw is None else str(raw)
    safe = _UNSAFE.sub("_", text)
    if safe.strip(".") == "":
        return MISSING_VALUE
    encoded = safe.encode("utf-8")
    if len(encoded) <= room:
        return safe
    # The hash is of the whole value, so two values that share their start still get different names;
    # "ignore" drops the bytes of a character the cut splits.
    return _hashed(encoded[: room - _HASH_CHARS - 1].decode("utf-8", "ignore"), text)


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
