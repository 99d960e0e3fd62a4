"""The files of a staged run's datasets: framed records, partitioned by key, with their checksums.

A dataset file is a sequence of frames, each a 4-byte little-endian length
and one record in the byte form below. Its writer counts records, bytes and
a SHA-256 as it writes and leaves them in a ``.json`` beside it once the file
is complete, so a task's done record lists every file it made without reading
any back.

Whoever can write to a job directory (a shared file system) chooses what
every worker reads, so a record's byte form can only describe values, never
code: no pickles. Each value is a tag byte, then its content:

* ``None``, ``bool``, ``int`` (any size), ``float``, ``str`` (UTF-8, lone
  surrogates kept), ``bytes``; tuples, lists and dicts of values (a dict in
  its order, which writers show);
* numpy arrays of booleans and numbers, with their dtype and shape, and
  numpy scalars of the same dtypes;
* the project's records in :data:`RECORD_TYPES` (documents, dead letters,
  cluster members, ...), each as its fields in order; a document, most of a
  run's bytes, as one header and its parts, its metadata as JSON when JSON
  gives back the same dict.

A value of any other type fails its task as it is written, with a message
naming the type. Reading builds nothing else: a tag chooses among these
types, never a class or function named by the data, and a frame that is not
exactly one such value is a :class:`DamagedDataset`. The same value gives the
same bytes, however it was built (pickles depend on which objects it shares).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pathlib
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import orjson

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, Media, Origin
from beamtrove.transforms.dedup.components import Component
from beamtrove.transforms.dedup.index import IndexMatch
from beamtrove.transforms.dedup.keep import ClusterMember
from beamtrove.transforms.stages import KEYED, SLICED, SPREAD, key_slice
from beamtrove.transforms.tokens.format import TokenizedDocument
from beamtrove.transforms.writers.base import WrittenFile

__all__ = [
    "RECORD_TYPES",
    "DamagedDataset",
    "ReadDataset",
    "WriteDataset",
    "decode_record",
    "encode_record",
    "partition_of",
    "read_records",
    "written_files",
]

_LENGTH = struct.Struct("<I")
_NO_LENGTH = bytes(_LENGTH.size)
_SUFFIX = ".rec"
_SUMMARY_SUFFIX = ".rec.json"
_BUFFER = 1 << 20


class DamagedDataset(Exception):
    """A dataset file that ends inside a record, holds what is not a record, or is not the size its done record says."""


def partition_of(key: Any, partitions: int) -> int:
    """The partition of a key: the same for equal keys on every machine and Python."""
    return key_slice(key, partitions)


#: The project's record types a dataset holds, each with its fields in the order its constructor takes them.
#: A new step whose stages write another type registers it here.
RECORD_TYPES: tuple[tuple[type, tuple[str, ...]], ...] = (
    (Document, tuple(field.name for field in dataclasses.fields(Document))),
    (Media, tuple(field.name for field in dataclasses.fields(Media))),
    (Origin, Origin._fields),
    (DeadLetter, tuple(field.name for field in dataclasses.fields(DeadLetter))),
    (ClusterMember, ClusterMember._fields),
    (IndexMatch, IndexMatch._fields),
    (WrittenFile, tuple(field.name for field in dataclasses.fields(WrittenFile))),
    (TokenizedDocument, ("id", "tokens", "loss_mask")),
    (Component, Component._fields),
)

# The tag before each value; sizes below 256 take one byte (the ...8 tags), others four (the ...32 tags).
_NONE, _FALSE, _TRUE, _INT8, _INT64, _BIG_INT, _FLOAT = range(7)
_STR8, _STR32, _BYTES8, _BYTES32, _TUPLE8, _TUPLE32, _LIST8, _LIST32, _DICT8, _DICT32 = range(7, 17)
_ARRAY, _SCALAR, _DOCUMENT = 17, 18, 19
# Then RECORD_TYPES, in order, each as its fields.
_RECORD = 32

_TAG_SIZE8 = struct.Struct("<BB")
_TAG_SIZE32 = struct.Struct("<BI")
_TAG_INT64 = struct.Struct("<Bq")
_TAG_FLOAT = struct.Struct("<Bd")
_SIZE32 = struct.Struct("<I")
_INT64_VALUE = struct.Struct("<q")
_FLOAT_VALUE = struct.Struct("<d")
_DIMENSION = struct.Struct("<Q")
# A document's flags, then the sizes of its text, id, JSON metadata and origin file, and its origin record.
_DOCUMENT_HEADER = struct.Struct("<BBIIIIq")
_HAS_ORIGIN, _JSON_METADATA = 1, 2
# What orjson writes only when it reads back the same: other types fail rather than turn into JSON's.
_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
# Booleans and numbers: what an array's bytes hold whole (no objects, no fields).
_ARRAY_KINDS = frozenset("biufc")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The first bytes of the most frequent values, made once: a tag and a one-byte size or number.
_STR8_HEADERS, _BYTES8_HEADERS, _TUPLE8_HEADERS, _LIST8_HEADERS, _DICT8_HEADERS = (
    [bytes((tag, size)) for size in range(256)] for tag in (_STR8, _BYTES8, _TUPLE8, _LIST8, _DICT8)
)
_INT8_BYTES = {number: bytes((_INT8, number & 0xFF)) for number in range(-128, 128)}
_INT8_VALUES = [byte - 256 if byte > 127 else byte for byte in range(256)]


def _unregistered(value: Any, out: bytearray) -> None:
    kind = type(value)
    raise TypeError(
        f"A staged dataset cannot hold a {kind.__module__}.{kind.__qualname__}: its files hold only plain values, "
        "numpy arrays and the record types of RECORD_TYPES in beamtrove/execution/jobs/staged/datasets.py, never "
        "pickles; register the type there (its fields in the order its constructor takes them), or emit plain values."
    )


def _encode(value: Any, out: bytearray) -> None:
    """Appends the byte form of ``value`` to ``out``; the most frequent types first, without a call."""
    kind = type(value)
    if kind is str:
        data = value.encode("utf-8", "surrogatepass")
        size = len(data)
        out += _STR8_HEADERS[size] if size < 256 else _TAG_SIZE32.pack(_STR32, size)
        out += data
    elif kind is tuple or kind is list:
        size = len(value)
        if size < 256:
            out += (_TUPLE8_HEADERS if kind is tuple else _LIST8_HEADERS)[size]
        else:
            out += _TAG_SIZE32.pack(_TUPLE32 if kind is tuple else _LIST32, size)
        for item in value:
            _encode(item, out)
    elif kind is int:
        if -128 <= value < 128:
            out += _INT8_BYTES[value]
        elif _INT64_MIN <= value <= _INT64_MAX:
            out += _TAG_INT64.pack(_INT64, value)
        else:
            size = (value.bit_length() + 8) // 8
            out += _TAG_SIZE32.pack(_BIG_INT, size)
            out += value.to_bytes(size, "little", signed=True)
    elif kind is bytes:
        size = len(value)
        out += _BYTES8_HEADERS[size] if size < 256 else _TAG_SIZE32.pack(_BYTES32, size)
        out += value
    elif value is None:
        out.append(_NONE)
    elif kind is bool:
        out.append(_TRUE if value else _FALSE)
    elif kind is float:
        out += _TAG_FLOAT.pack(_FLOAT, value)
    elif kind is dict:
        size = len(value)
        out += _DICT8_HEADERS[size] if size < 256 else _TAG_SIZE32.pack(_DICT32, size)
        # In its order, which writers show: the dict read back is the dict written.
        for key, item in value.items():
            _encode(key, out)
            _encode(item, out)
    else:
        _ENCODERS.get(kind, _unregistered)(value, out)


def _dtype_bytes(value: np.ndarray | np.generic) -> bytes:
    dtype = value.dtype
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise TypeError(
            f"A staged dataset cannot hold a numpy {type(value).__name__} of dtype {dtype}: only booleans and "
            "numbers (beamtrove/execution/jobs/staged/datasets.py)."
        )
    return dtype.str.encode("ascii")


def _encode_array(value: np.ndarray, out: bytearray) -> None:
    dtype = _dtype_bytes(value)
    out += _TAG_SIZE8.pack(_ARRAY, len(dtype))
    out += dtype
    out.append(value.ndim)
    for dimension in value.shape:
        out += _DIMENSION.pack(dimension)
    # C order, whatever the array's layout in memory; a C-ordered array is copied once, from its own buffer.
    out += value.data if value.flags.c_contiguous else value.tobytes()


def _encode_scalar(value: np.generic, out: bytearray) -> None:
    dtype = _dtype_bytes(value)
    out += _TAG_SIZE8.pack(_SCALAR, len(dtype))
    out += dtype
    out += value.tobytes()


def _as_json(value: dict) -> bytes | None:
    """``value`` as JSON when JSON gives back a dict equal to it (tuples, NaN and bytes do not come back); else None."""
    try:
        data = orjson.dumps(value, option=_JSON_OPTIONS)
    except TypeError:
        return None
    return data if orjson.loads(data) == value else None


def _encode_document(document: Document, out: bytearray) -> None:
    """A document as one header and its parts: most of a staged run's bytes, so the fewest steps."""
    text, document_id, origin = document.text, document.id, document.origin
    if not (
        type(text) is str
        and type(document_id) is str
        and type(document.media) is list
        and type(document.metadata) is dict
        and (
            origin is None
            or (
                type(origin) is Origin
                and type(origin.file) is str
                and type(origin.record) is int
                and _INT64_MIN <= origin.record <= _INT64_MAX
            )
        )
    ):
        _encode_document_fields(document, out)
        return
    text_bytes = text.encode("utf-8", "surrogatepass")
    id_bytes = document_id.encode("utf-8", "surrogatepass")
    metadata = _as_json(document.metadata)
    file = b"" if origin is None else origin.file.encode("utf-8", "surrogatepass")
    flags = (0 if origin is None else _HAS_ORIGIN) | (0 if metadata is None else _JSON_METADATA)
    out += _DOCUMENT_HEADER.pack(
        _DOCUMENT,
        flags,
        len(text_bytes),
        len(id_bytes),
        0 if metadata is None else len(metadata),
        len(file),
        0 if origin is None else origin.record,
    )
    out += text_bytes
    out += id_bytes
    if metadata is not None:
        out += metadata
    out += file
    _encode(document.media, out)
    if metadata is None:
        _encode(document.metadata, out)


def _record_encoder(tag: int, fields: tuple[str, ...]) -> Callable[[Any, bytearray], None]:
    def encode(value: Any, out: bytearray) -> None:
        out.append(tag)
        for field in fields:
            _encode(getattr(value, field), out)

    return encode


# The types _encode does not test for itself.
_ENCODERS: dict[type, Callable[[Any, bytearray], None]] = {
    np.ndarray: _encode_array,
    **{np.dtype(code).type: _encode_scalar for code in "?bBhHiIlLqQefdgFDG"},
    **{kind: _record_encoder(_RECORD + number, fields) for number, (kind, fields) in enumerate(RECORD_TYPES)},
}
# A document whose parts are not of the usual types goes field by field.
_encode_document_fields = _ENCODERS[Document]
_ENCODERS[Document] = _encode_document


def encode_record(record: Any) -> bytes:
    """The byte form of one record.

    Raises:
        TypeError: The record is or holds a value of a type the byte form does not have.
    """
    out = bytearray()
    _encode(record, out)
    return bytes(out)


class _Malformed(ValueError):
    """What a frame holds is not one value of the byte form."""


def _decode(data: bytes, at: int) -> tuple[Any, int]:
    """The value whose byte form starts at ``data[at]``, and where the next one starts.

    Sizes are not checked against the frame here: a value that runs past its end
    leaves ``at`` past it, or fails to read, and :func:`_decode_frame` checks where
    the record ends. ``data`` may hold more frames: no value reads past its end.
    """
    tag = data[at]
    if tag == _STR8:
        end = at + 2 + data[at + 1]
        return data[at + 2 : end].decode("utf-8", "surrogatepass"), end
    if tag == _TUPLE8:
        count = data[at + 1]
        at += 2
        if count == 2:
            first, at = _decode(data, at)
            second, at = _decode(data, at)
            return (first, second), at
        items = []
        for _ in range(count):
            item, at = _decode(data, at)
            items.append(item)
        return tuple(items), at
    if tag == _INT8:
        return _INT8_VALUES[data[at + 1]], at + 2
    if tag == _BYTES8:
        end = at + 2 + data[at + 1]
        return data[at + 2 : end], end
    if tag == _INT64:
        return _INT64_VALUE.unpack_from(data, at + 1)[0], at + 9
    if tag == _NONE:
        return None, at + 1
    return _DECODERS[tag](data, at)


def _unknown_tag(data: bytes, at: int) -> tuple[Any, int]:
    raise _Malformed(f"unknown tag {data[at]}")


def _constant(value: Any) -> Callable[[bytes, int], tuple[Any, int]]:
    def decode(data: bytes, at: int) -> tuple[Any, int]:
        return value, at + 1

    return decode


def _decode_float(data: bytes, at: int) -> tuple[float, int]:
    return _FLOAT_VALUE.unpack_from(data, at + 1)[0], at + 9


def _decode_big_int(data: bytes, at: int) -> tuple[int, int]:
    end = at + 5 + _SIZE32.unpack_from(data, at + 1)[0]
    return int.from_bytes(data[at + 5 : end], "little", signed=True), end


def _decode_long_str(data: bytes, at: int) -> tuple[str, int]:
    end = at + 5 + _SIZE32.unpack_from(data, at + 1)[0]
    # A view: long texts are decoded from the frame, not from a copy of it.
    return str(memoryview(data)[at + 5 : end], "utf-8", "surrogatepass"), end


def _decode_long_bytes(data: bytes, at: int) -> tuple[bytes, int]:
    end = at + 5 + _SIZE32.unpack_from(data, at + 1)[0]
    return data[at + 5 : end], end


def _items(data: bytes, at: int, count: int) -> tuple[list, int]:
    # Every value takes a byte at least, so a count the frame cannot hold fails within its bytes.
    items = []
    for _ in range(count):
        item, at = _decode(data, at)
        items.append(item)
    return items, at


def _decode_long_tuple(data: bytes, at: int) -> tuple[tuple, int]:
    items, end = _items(data, at + 5, _SIZE32.unpack_from(data, at + 1)[0])
    return tuple(items), end


def _decode_list(data: bytes, at: int) -> tuple[list, int]:
    return _items(data, at + 2, data[at + 1])


def _decode_long_list(data: bytes, at: int) -> tuple[list, int]:
    return _items(data, at + 5, _SIZE32.unpack_from(data, at + 1)[0])


def _dict_of(items: list) -> dict:
    return dict(zip(items[::2], items[1::2], strict=True))


def _decode_dict(data: bytes, at: int) -> tuple[dict, int]:
    items, end = _items(data, at + 2, 2 * data[at + 1])
    return _dict_of(items), end


def _decode_long_dict(data: bytes, at: int) -> tuple[dict, int]:
    items, end = _items(data, at + 5, 2 * _SIZE32.unpack_from(data, at + 1)[0])
    return _dict_of(items), end


_DTYPES: dict[bytes, np.dtype] = {}


def _dtype(data: bytes, at: int) -> tuple[np.dtype, int]:
    """The dtype of the array or number whose tag is at ``at``, and where its content starts."""
    end = at + 2 + data[at + 1]
    name = data[at + 2 : end]
    dtype = _DTYPES.get(name)
    if dtype is None:
        try:
            dtype = np.dtype(name.decode("ascii"))
        except TypeError:  # numpy's word for a dtype it does not know
            raise _Malformed(f"no dtype {name!r}") from None
        if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise _Malformed(f"an array of dtype {dtype}")
        _DTYPES[name] = dtype
    return dtype, end


def _decode_array(data: bytes, at: int) -> tuple[np.ndarray, int]:
    dtype, at = _dtype(data, at)
    ndim = data[at]
    shape = tuple(_DIMENSION.unpack_from(data, at + 1 + 8 * axis)[0] for axis in range(ndim))
    begin = at + 1 + 8 * ndim
    count = math.prod(shape)
    if count == 0:
        return np.empty(shape, dtype), begin
    # A copy, aligned and writable as the array written was (numpy refuses a count past the frame's end).
    array = np.frombuffer(data, dtype=dtype, count=count, offset=begin).copy()
    return array.reshape(shape), begin + dtype.itemsize * count


def _decode_scalar(data: bytes, at: int) -> tuple[np.generic, int]:
    dtype, begin = _dtype(data, at)
    return np.frombuffer(data, dtype=dtype, count=1, offset=begin)[0], begin + dtype.itemsize


def _decode_document(data: bytes, at: int) -> tuple[Document, int]:
    _, flags, text_size, id_size, metadata_size, file_size, record = _DOCUMENT_HEADER.unpack_from(data, at)
    view = memoryview(data)
    text_start = at + _DOCUMENT_HEADER.size
    id_start = text_start + text_size
    metadata_start = id_start + id_size
    file_start = metadata_start + metadata_size
    end = file_start + file_size
    if end > len(data):
        raise _Malformed("a document runs past the end of its record")
    text = str(view[text_start:id_start], "utf-8", "surrogatepass")
    document_id = str(view[id_start:metadata_start], "utf-8", "surrogatepass")
    origin = Origin(str(view[file_start:end], "utf-8", "surrogatepass"), record) if flags & _HAS_ORIGIN else None
    media, end = _decode(data, end)
    if flags & _JSON_METADATA:
        try:
            metadata = orjson.loads(view[metadata_start:file_start])
        except orjson.JSONDecodeError as exc:
            raise _Malformed(f"a document's metadata is not JSON: {exc}") from None
    else:
        metadata, end = _decode(data, end)
    if type(metadata) is not dict or type(media) is not list:
        raise _Malformed("a document's metadata is not a dict or its media not a list")
    return Document(text, document_id, media, metadata, origin), end


def _record_decoder(kind: type, fields: tuple[str, ...]) -> Callable[[bytes, int], tuple[Any, int]]:
    count = len(fields)

    def decode(data: bytes, at: int) -> tuple[Any, int]:
        values, end = _items(data, at + 1, count)
        return kind(*values), end

    return decode


# The decoders of the tags _decode does not read itself; other tags are no value.
_DECODERS: list[Callable[[bytes, int], tuple[Any, int]]] = [_unknown_tag] * 256
for _tag, _decoder in {
    _FALSE: _constant(False),
    _TRUE: _constant(True),
    _BIG_INT: _decode_big_int,
    _FLOAT: _decode_float,
    _STR32: _decode_long_str,
    _BYTES32: _decode_long_bytes,
    _TUPLE32: _decode_long_tuple,
    _LIST8: _decode_list,
    _LIST32: _decode_long_list,
    _DICT8: _decode_dict,
    _DICT32: _decode_long_dict,
    _ARRAY: _decode_array,
    _SCALAR: _decode_scalar,
    _DOCUMENT: _decode_document,
    **{_RECORD + number: _record_decoder(kind, fields) for number, (kind, fields) in enumerate(RECORD_TYPES)},
}.items():
    _DECODERS[_tag] = _decoder


def _decode_frame(data: bytes, start: int, end: int) -> Any:
    """The record whose byte form is ``data[start:end]``, all of it.

    Raises:
        ValueError: That is not exactly the byte form of one record; the message says what is wrong.
    """
    if start == end:
        raise ValueError("an empty frame")
    try:
        record, last = _decode(data, start)
    except (struct.error, IndexError):
        raise ValueError("the record ends inside a value") from None
    except RecursionError:
        raise ValueError("nested too deep") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # Ours, UTF-8's, numpy's (an array past the end), dict keys that cannot be keys, a record's own checks.
        raise ValueError(str(exc)) from None
    if last > end:
        raise ValueError("the record ends inside a value")
    if last < end:
        raise ValueError(f"{end - last} bytes after the record")
    return record


def decode_record(data: bytes) -> Any:
    """The record whose byte form is ``data``, all of it.

    Raises:
        ValueError: ``data`` is not exactly the byte form of one record; the message says what is wrong.
    """
    return _decode_frame(data, 0, len(data))


class _RecordFile:
    def __init__(self, path: pathlib.Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Frames are gathered here and written, and hashed, a megabyte at a time.
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._frames = bytearray()
        self._digest = hashlib.sha256()
        self.records = 0
        self.bytes = 0

    def write(self, record: Any) -> None:
        frames = self._frames
        start = len(frames)
        frames += _NO_LENGTH
        try:
            _encode(record, frames)
        except BaseException:
            del frames[start:]
            raise
        _LENGTH.pack_into(frames, start, len(frames) - start - _LENGTH.size)
        self.records += 1
        if len(frames) >= _BUFFER:
            self._flush()

    def _flush(self) -> None:
        self._file.write(self._frames)
        self._digest.update(self._frames)
        self.bytes += len(self._frames)
        self._frames.clear()

    def close(self) -> None:
        self._flush()
        os.fsync(self._file.fileno())
        self._file.close()
        summary = {"records": self.records, "bytes": self.bytes, "sha256": self._digest.hexdigest()}
        # The summary appears last: a file without one was cut short by a killed task.
        self.path.with_name(self.path.name[: -len(_SUFFIX)] + _SUMMARY_SUFFIX).write_text(json.dumps(summary))


def read_records(path: str | os.PathLike) -> Iterator[Any]:
    """The records of one dataset file, in the order they were written.

    Raises:
        DamagedDataset: The file ends inside a record, or a frame is not exactly one record.
    """
    # Buffered: its reads give as many bytes as asked for, short only at the end of the file.
    with open(path, "rb") as source:
        # The file is read a megabyte at a time, and each frame decoded where it lies: data[at] starts the next
        # frame, the byte ``offset + at`` of the file.
        data, at, offset = b"", 0, 0
        while True:
            if len(data) - at < _LENGTH.size:
                more = source.read(_BUFFER)
                if not more:
                    if at < len(data):
                        raise DamagedDataset(
                            f"{path} ends inside a record's length: the file was cut short or changed."
                        )
                    return
                data, at, offset = data[at:] + more, 0, offset + at
                continue
            end = at + _LENGTH.size + _LENGTH.unpack_from(data, at)[0]
            if end > len(data):
                data, end, offset = data[at:], end - at, offset + at
                at = 0
                data += source.read(max(end - len(data), _BUFFER))
                if end > len(data):
                    raise DamagedDataset(f"{path} ends inside a record: the file was cut short or changed.")
            try:
                record = _decode_frame(data, at + _LENGTH.size, end)
            except ValueError as exc:
                raise DamagedDataset(
                    f"{path} holds no record at byte {offset + at} ({exc}): the file was changed or damaged."
                ) from None
            yield record
            at = end


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
        elif self._placement == SLICED:
            partition = record[0] % self._partitions
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
        placement: ``KEYED`` (each ``(key, value)`` to its key's partition), ``SLICED`` (each ``(slice, value)``
            to partition ``slice % partitions``), ``SAME`` or ``SPREAD``.
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
