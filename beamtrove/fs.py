"""File matching and atomic file placement over fsspec URLs and local paths.

Every beamtrove reader and writer goes through these helpers, so local paths,
``gs://`` (gcsfs), ``s3://`` (s3fs, when installed) and ``memory://`` behave
the same way. A file is placed whole by :func:`write_url_atomically` at any
URL, and by :func:`write_local_atomically` on a local or shared POSIX file
system, where the data is also synced to disk before it takes its name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import os
import pathlib
import posixpath
import re
import shutil
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from beamtrove.layout import RUN_MARKS, SET_ASIDE_NAMES
from beamtrove.network import Opened, ResumingStream, RetryPolicy, with_retries

if TYPE_CHECKING:
    import fsspec

__all__ = [
    "FileListing",
    "InputFile",
    "compression_of",
    "file_damage",
    "file_sha256",
    "filesystem",
    "has_glob",
    "input_folder",
    "is_glob",
    "is_hidden",
    "is_local",
    "is_temporary",
    "join",
    "match_inputs",
    "move",
    "open_at",
    "open_resuming",
    "open_url",
    "path_sha256",
    "put_file",
    "read_json",
    "read_json_record",
    "read_lines",
    "replace_directory",
    "staging_directory",
    "staging_file",
    "write_json",
    "write_local_atomically",
    "write_url_atomically",
]

_GLOB_CHARS = "*?["
_HTTP = ("http", "https")
# Bytes an object store is asked for at once when a file is read in order.
_STORE_READ_AHEAD = 8 << 20
# The extras of beamtrove that install a protocol's file system.
_EXTRAS = {"s3": "s3", "s3a": "s3"}
_LOGGER = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, order=True)
class InputFile:
    """One matched input file.

    Attributes:
        url: Where to open the file (a local path or a URL with its protocol).
        name: The path relative to the directory the pattern started from, with
            ``/`` separators. Ids derived from it survive moving a dataset
            between buckets or machines.
        size: Bytes to read: the file's size when matched, or the length of
            its byte range.
        start: Where the byte range starts, when ``end`` is set.
        end: When set, only the bytes ``[start, end)`` of the (uncompressed)
            file are read: the records that elastic shard workers were given.
        first_index: The 0-based index, in the whole file, of the first line
            or row the range holds, so row numbers and the ids derived from
            them are those of a read of the whole file.
    """

    url: str
    name: str
    size: int
    start: int = 0
    end: int | None = None
    first_index: int = 0


@runtime_checkable
class FileListing(Protocol):
    """Input named by a list of files rather than a pattern (a Common Crawl dump's paths file).

    An input pattern of its own: readers hold it, not its files, and list
    them when they are built and when the run starts.
    """

    def list_files(self, storage_options: Mapping[str, Any] | None = None) -> list[InputFile]:
        """The files listed, in their list's order."""
        ...


def file_sha256(path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> str:
    """The SHA-256 (hex) of a file's bytes: a local path or an fsspec URL."""
    fs, fs_path = filesystem(os.fspath(path), storage_options)
    with fs.open(fs_path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def file_damage(
    path: str | os.PathLike,
    size: int | None,
    sha256: str | None,
    storage_options: Mapping[str, Any] | None = None,
    *,
    read: bool = True,
) -> str | None:
    """What is wrong with a file a record describes by its size and SHA-256; None when it is that file.

    The one check of a file against its record: a job's task outputs, a resumable run's outputs.

    Args:
        path: The file: a local path or an fsspec URL.
        size: Its size in bytes, as recorded.
        sha256: Its SHA-256, as recorded.
        storage_options: For an fsspec URL.
        read: Compare the SHA-256 too, reading the file; otherwise only its size.

    Returns:
        ``"<path> is missing"``, ``"<path> is N B, its record says M B"``,
        ``"<path> does not have the SHA-256 its record gives"``, or None.
    """
    fs, fs_path = filesystem(os.fspath(path), storage_options)
    try:
        found = fs.size(fs_path)
    except FileNotFoundError:
        return f"{path} is missing"
    if found is None or fs.isdir(fs_path):
        return f"{path} is missing"
    if found != size:
        return f"{path} is {found} B, its record says {size} B"
    if read and file_sha256(path, storage_options) != sha256:
        return f"{path} does not have the SHA-256 its record gives"
    return None


def path_sha256(path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> str | None:
    """The SHA-256 (hex) of what a path holds, None when nothing is there.

    A file's is that of its bytes (:func:`file_sha256`); a folder's, that of
    the relative name, size and SHA-256 of every file below it, in name
    order, so a file added, removed, renamed or edited changes it.
    """
    fs, fs_path = filesystem(os.fspath(path), storage_options)
    if not fs.exists(fs_path):
        return None
    if not fs.isdir(fs_path):
        return file_sha256(path, storage_options)
    root = fs_path.rstrip("/") + "/"
    digest = hashlib.sha256()
    for file in sorted(found for found in fs.find(fs_path) if found.startswith(root)):
        with fs.open(file, "rb") as source:
            content = hashlib.file_digest(source, "sha256").hexdigest()
        digest.update(f"{file[len(root) :]}\0{fs.size(file)}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


@contextlib.contextmanager
def staging_directory(root: pathlib.Path, name: str) -> Iterator[pathlib.Path]:
    """A hidden local directory ``root/.name-*`` to build ``root/name`` in, removed unless renamed into place."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def staging_file(path: str | os.PathLike, data: bytes) -> Iterator[pathlib.Path]:
    """A hidden local file beside ``path`` holding ``data``, synced to disk, to rename or link to ``path``.

    It is removed on exit unless it was renamed. ``data`` is on disk before the file can take its name, so after a
    crash a shared file system (NFS, Lustre) shows the whole file under its name or nothing.
    """
    path = pathlib.Path(path)
    staging = path.with_name(_temporary_name(path.name))
    with open(staging, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    try:
        yield staging
    finally:
        staging.unlink(missing_ok=True)


def replace_directory(staging: pathlib.Path, final: pathlib.Path) -> None:
    """Renames the finished local directory ``staging`` to ``final``, replacing an older ``final``.

    ``final`` is never partial: it is the old directory or the new one.
    """
    # mkdtemp makes the directory private; the result should read like one made by mkdir.
    staging.chmod(0o755)
    if final.exists():
        replaced = staging.with_name(f"{staging.name}-replaced")
        final.rename(replaced)
        staging.rename(final)
        shutil.rmtree(replaced, ignore_errors=True)
    else:
        staging.rename(final)


def filesystem(url: str, storage_options: Mapping[str, Any] | None = None):
    """Returns ``(filesystem, path)`` for ``url``.

    Raises:
        ImportError: The file system of ``url`` is not installed; the message names it (and beamtrove's extra
            that installs it).
    """
    # fsspec is imported when a file is first reached: commands that reach none (--help, a local job's status)
    # start without its tenth of a second.
    from fsspec.core import url_to_fs  # noqa: PLC0415
    from fsspec.utils import get_protocol  # noqa: PLC0415

    _skip_gcs_bucket_probe_on_emulator()
    try:
        return url_to_fs(url, **dict(storage_options or {}))
    except ImportError as missing:
        extra = _EXTRAS.get(get_protocol(str(url)))
        install = f": pip install 'beamtrove[{extra}]'" if extra else ""
        raise ImportError(f"Reading {url} needs a file system that is not installed ({missing}){install}.") from None


def _skip_gcs_bucket_probe_on_emulator() -> None:
    """Reads ``gs://`` with gcsfs's plain JSON-API file system when a GCS emulator is the endpoint.

    gcsfs's default file system (2026.x: ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT``, on unless set to false) first asks
    each bucket's type over gRPC with TLS; an emulator such as fake-gcs-server (``STORAGE_EMULATOR_HOST``) speaks
    plain HTTP, so every ask waits 60 s for its TLS handshake before gcsfs falls back to the JSON API, and the
    failed answer is not cached: minutes per run. Real GCS serves that gRPC API, so only emulated endpoints are
    sent to the plain class, the one the fallback uses.
    """
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Imported only for an emulator, when its URLs are first reached (as fsspec does in filesystem).
        from fsspec import register_implementation  # noqa: PLC0415
        from gcsfs.core import GCSFileSystem  # noqa: PLC0415

        # The class itself, not its name: it replaces the default class if that was imported already.
        for protocol in ("gs", "gcs"):
            register_implementation(protocol, GCSFileSystem, clobber=True)


def is_local(url: str) -> bool:
    """Whether ``url`` names a file on this machine's file system, told by its protocol alone (no file system is
    made: a remote one may start threads)."""
    from fsspec.utils import get_protocol  # noqa: PLC0415 (imported when first needed, as in filesystem)

    return get_protocol(str(url)) in ("file", "local")


def compression_of(url: str) -> str | None:
    """The compression fsspec reads ``url`` with, told by its name (``"gzip"``, ``"zstd"``, ...); None for none."""
    from fsspec.utils import infer_compression  # noqa: PLC0415 (imported when first needed, as in filesystem)

    return infer_compression(url)


def join(base: str, *parts: str) -> str:
    """Joins URL path segments with ``/`` whatever the protocol."""
    return posixpath.join(base.rstrip("/") or "/", *parts)


def _full_url(fs, path: str) -> str:
    from fsspec.implementations.local import LocalFileSystem  # noqa: PLC0415 (imported when first needed, as in filesystem)

    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


def has_glob(path: str) -> bool:
    """Whether ``path`` holds glob characters (``*``, ``?``, ``[``); see :func:`is_glob`."""
    return any(char in path for char in _GLOB_CHARS)


def is_glob(fs, path: str) -> bool:
    """Whether ``path`` is read as a glob pattern on ``fs``: it holds glob characters and names nothing as it is.

    A file or folder named outright, such as ``crawl[1].jsonl`` or ``run [old]/``, is read as that file or folder.
    """
    return has_glob(path) and not fs.exists(path)


def _glob_base(path: str) -> str:
    first_glob = min((i for i in (path.find(c) for c in _GLOB_CHARS) if i >= 0), default=len(path))
    return path[: path.rfind("/", 0, first_glob) + 1]


def input_folder(pattern: str, storage_options: Mapping[str, Any] | None = None) -> str | None:
    """The folder an input reads files from: a folder itself, a glob's fixed start; None for one file.

    Returned as the filesystem's path, without protocol or trailing ``/``.
    """
    fs, path = filesystem(pattern, storage_options)
    if is_glob(fs, path):
        return _glob_base(path).rstrip("/") or "/"
    return path.rstrip("/") if fs.isdir(path) else None


def _relative(path: str, base: str) -> str:
    return path[len(base) :].lstrip("/") if base and path.startswith(base) else posixpath.basename(path)


def is_hidden(relative_path: str) -> bool:
    """Whether a path inside a folder is bookkeeping rather than data: a part of it starts with ``.`` or ``_``.

    The convention Hadoop and Spark follow: ``_SUCCESS``, ``.tmp`` folders,
    beamtrove's ``_completed/`` markers and ``.beamtrove-staging/``.
    """
    return any(part.startswith((".", "_")) for part in relative_path.split("/") if part)


def _set_aside_by_runs(names: Iterable[str]) -> tuple[set[str], dict[str, str]]:
    """The beamtrove runs' output folders among ``names``, paths inside a folder, and what they set aside.

    An output folder (one holding a :data:`~beamtrove.layout.RUN_MARKS` file) stands for the documents its run
    kept, never for what it excluded, its dead letters or its statistics (:data:`~beamtrove.layout.SET_ASIDE_NAMES`).

    Returns:
        The runs' folders (``""`` for the folder itself), and each name set aside, with the run's output it is in
        (``excluded``, ``CC-MAIN-2024-22/dead_letters``).
    """
    names = list(names)
    runs = {posixpath.dirname(name) for name in names if posixpath.basename(name) in RUN_MARKS}
    set_aside = {}
    for name in names:
        parts = name.split("/")
        for depth, part in enumerate(parts):
            if part in SET_ASIDE_NAMES and "/".join(parts[:depth]) in runs:
                set_aside[name] = "/".join(parts[: depth + 1])
                break
    return runs, set_aside


def _folder_files(fs, path: str, pattern: str, suffixes: tuple[str, ...], warn: bool) -> list[dict]:
    """The data files under the folder ``path`` whose names end in ``suffixes``: not hidden, not set aside by a run.

    Empty for a folder holding nothing but the outputs of runs that kept no document: an empty input, as a run's
    output folder stands for the documents its run kept; said in a warning when ``warn``.

    Raises:
        FileNotFoundError: The folder holds no such file, and is not the output of runs that kept nothing.
    """
    base = path.rstrip("/") + "/"
    listing = {_relative(name, base): entry for name, entry in fs.find(path, detail=True).items()}
    runs, set_aside = _set_aside_by_runs(listing)
    unset = [name for name in listing if name not in set_aside and not is_hidden(name)]
    if runs and not unset:
        if not warn:
            return []
        folders = sorted({folder for name, folder in set_aside.items() if name != folder})
        unread = (
            f": what it set aside ({', '.join(folder + '/' for folder in folders)}) is not read; name such a folder "
            f"({join(pattern, folders[0])}) to read it"
            if folders
            else ""
        )
        _LOGGER.warning(
            "Input %r %s that kept no document, so it is an empty input%s.",
            pattern,
            "is the output of a beamtrove run" if "" in runs else "holds only the outputs of beamtrove runs",
            unread,
        )
        return []
    kept = [listing[name] for name in unset if name.endswith(suffixes)]
    if not kept:
        raise FileNotFoundError(
            f"No files ending in {', '.join(suffixes)} are under the directory {pattern!r}: check the path and the "
            "pattern."
        )
    return kept


def _match_one(pattern: str, suffixes: tuple[str, ...], storage_options, warn: bool) -> list[InputFile]:
    """The files ``pattern`` names; none for the output folder of a run that kept no document.

    Raises:
        FileNotFoundError: As :func:`match_inputs`.
    """
    if not pattern.strip():
        raise FileNotFoundError(
            f"An input path is empty ({pattern!r}), which would read the current directory: pass a file, directory "
            "or glob (an empty --input is often an unset shell variable)."
        )
    fs, path = filesystem(pattern, storage_options)
    try:
        if is_local(pattern):
            base, entries = _listed(fs, path, pattern, suffixes, warn)
        else:
            base, entries = with_retries(lambda: _listed(fs, path, pattern, suffixes, warn), f"list {pattern}")
    except OSError:
        raise
    except Exception as failure:  # a remote file system's own: no credentials, no connection, ...
        raise OSError(f"Cannot list {pattern}: {type(failure).__name__}: {' '.join(str(failure).split())}") from None
    return [InputFile(_full_url(fs, e["name"]), _relative(e["name"], base), int(e.get("size") or 0)) for e in entries]


def _listed(fs, path: str, pattern: str, suffixes: tuple[str, ...], warn: bool) -> tuple[str, list[dict]]:
    """The folder the names of ``pattern``'s files are relative to, and their entries (see :func:`_match_one`)."""
    if is_glob(fs, path):
        base = _glob_base(path)
        entries = [
            entry
            for entry in fs.glob(path, detail=True).values()
            if entry.get("type", "file") == "file" and not is_hidden(_relative(entry["name"], base))
        ]
        if not entries:
            root = path.split("/", maxsplit=1)[0]
            if not is_local(pattern) and not fs.exists(root):
                raise FileNotFoundError(
                    f"No files match {pattern!r}: {_full_url(fs, root)} itself is not found; check the path, and the "
                    "endpoint and credentials its file system uses."
                )
            raise FileNotFoundError(f"No files match {pattern!r}: check the path and the pattern.")
        return base, entries
    if fs.isdir(path):
        return path.rstrip("/") + "/", _folder_files(fs, path, pattern, suffixes, warn)
    if fs.exists(path):
        # A file named outright is read even when hidden; one found in a folder or by a pattern is not.
        return posixpath.dirname(path) + "/", [fs.info(path)]
    raise FileNotFoundError(f"Input {pattern!r} does not exist: pass an existing file, directory or glob.")


def match_inputs(
    patterns: str | Iterable[str],
    suffixes: tuple[str, ...] = (),
    storage_options: Mapping[str, Any] | None = None,
    *,
    warn_empty_runs: bool = True,
) -> list[InputFile]:
    """Expands input patterns into a sorted, de-duplicated list of files.

    Args:
        patterns: One or more files, directories (searched recursively for
            names ending in ``suffixes``) or glob patterns (:func:`is_glob`),
            as paths or URLs, or lists of files (:class:`FileListing`, such
            as a Common Crawl dump's); entries found in directories or by patterns
            are skipped when :func:`is_hidden`, and so is what a beamtrove
            run's output folder found in a directory holds besides the
            documents it kept; or already matched :class:`InputFile`
            entries, taken as they are.
        suffixes: File name endings accepted when a pattern is a directory.
        storage_options: Passed to the fsspec filesystem (credentials, ...).
        warn_empty_runs: Log a warning for each pattern that is the output
            folder of a run that kept no document; False to match again
            what a warning was given for.

    Returns:
        The files; none when every pattern is the output folder of a run
        that kept no document (an empty input, with a warning).

    Raises:
        FileNotFoundError: No pattern is given, one is empty or matches
            nothing, or a path does not exist; raised at pipeline
            construction, before any work starts.
    """
    patterns = [patterns] if isinstance(patterns, (str, InputFile, FileListing)) else list(patterns)
    if not patterns:
        raise FileNotFoundError("No input patterns were given.")
    found: dict[tuple[str, int], InputFile] = {}
    for pattern in patterns:
        if isinstance(pattern, InputFile):
            matched = [pattern]
        elif isinstance(pattern, FileListing):
            matched = pattern.list_files(storage_options)
        else:
            matched = _match_one(pattern, suffixes, storage_options, warn_empty_runs)
        for file in matched:
            found.setdefault((file.url, file.start), file)
    return sorted(found.values())


def move(source: str, destination: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Moves a finished file into place, replacing what was there.

    On local disks this is an atomic rename; on object stores the object only
    appears under its final name once complete.
    """
    fs, source_path = filesystem(source, storage_options)
    _, destination_path = filesystem(destination, storage_options)
    fs.makedirs(posixpath.dirname(destination_path), exist_ok=True)
    fs.mv(source_path, destination_path)


def put_file(source: str | os.PathLike, destination: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Copies the local file ``source`` to ``destination``, a local path or a URL, making the folders it needs.

    On an object store the object appears under its name once whole.
    """
    fs, path = filesystem(destination, storage_options)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    fs.put_file(os.fspath(source), path)


def _temporary_name(name: str) -> str:
    """A unique hidden name to write the file ``name`` under: readers skip it (:func:`is_hidden`)."""
    return f".{name}.{uuid.uuid4().hex}.tmp"


_TEMPORARY_NAME = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")


def is_temporary(name: str) -> bool:
    """Whether the file name ``name`` is one an atomic write of this module writes under before its move."""
    return _TEMPORARY_NAME.fullmatch(name) is not None


def write_url_atomically(url: str, data: bytes, storage_options: Mapping[str, Any] | None = None) -> None:
    """Writes ``data`` under a temporary name beside ``url``, then moves it there.

    Readers see the old file or the whole new one, never a half-written one;
    the temporary name is hidden, so a write cut short is never read as data.
    """
    folder, name = posixpath.split(url)
    temporary = posixpath.join(folder, _temporary_name(name))
    with open_url(temporary, "wb", storage_options) as out:
        out.write(data)
    move(temporary, url, storage_options)


def write_local_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to the local ``path`` (its folder exists), replacing it by a rename once synced to disk.

    Readers see the old file or the whole new one, on a shared file system too (:func:`staging_file`).
    """
    with staging_file(path, data) as staging:
        os.replace(staging, path)


def write_json(record: Mapping[str, Any], url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Writes ``record`` as JSON, atomically (:func:`write_url_atomically`)."""
    write_url_atomically(url, json.dumps(record, indent=1, sort_keys=True).encode(), storage_options)


def read_json(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON object in ``url``.

    Raises:
        FileNotFoundError: ``url`` does not exist.
        ValueError: The file holds no JSON object; the message names the file and what it holds.
    """
    url = os.fspath(url)
    with open_url(url, "rb", storage_options) as source:
        data = source.read()
    try:
        content = json.loads(data)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ValueError(f"{url} is damaged (not JSON: {exc})") from None
    if not isinstance(content, dict):
        raise ValueError(f"{url} is damaged (a JSON {type(content).__name__} where an object belongs)")
    return content


def read_json_record(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The JSON object in ``url``, a record another process writes; None when it is missing or not (yet) whole."""
    try:
        return read_json(url, storage_options)
    except (FileNotFoundError, ValueError):
        return None


def open_url(
    url: str, mode: str = "rb", storage_options: Mapping[str, Any] | None = None, compression: str | None = None
) -> fsspec.core.OpenFile:
    """Returns an fsspec ``OpenFile`` for ``url``; use it as a context manager.

    Args:
        url: Path or URL to open.
        mode: File mode.
        storage_options: Passed to the fsspec filesystem.
        compression: ``"infer"`` to (de)compress by file name, a codec name, or
            None for raw bytes.
    """
    import fsspec  # noqa: PLC0415 (imported when first needed, as in filesystem)

    _skip_gcs_bucket_probe_on_emulator()
    return fsspec.open(url, mode, compression=compression, **dict(storage_options or {}))


def read_lines(url: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The lines of a UTF-8 text file (undecodable bytes replaced), without line ends."""
    with open_url(url, "rb", storage_options) as raw:
        return raw.read().decode("utf-8", "replace").splitlines()


def open_at(url: str, offset: int, storage_options: Mapping[str, Any] | None = None, timeout: float = 60.0) -> Opened:
    """Opens the file ``url`` for reading from byte ``offset`` on, streamed: never held whole in memory.

    HTTP(S) is read as one ``GET`` (a ``Range: bytes=offset-`` request past
    the start) whose body is the stream; a server that ignores the range
    sends the file from its start (``Opened.start`` is 0). Other files are
    opened through their fsspec file system, which on an object store asks
    for 8 MiB ranges ahead of the reader.

    Args:
        url: The file.
        offset: The byte to start at.
        storage_options: fsspec options; over HTTP(S), its ``headers`` are sent.
        timeout: Seconds an HTTP(S) connection may stay silent before the read fails.

    Raises:
        FileNotFoundError: The file does not exist (HTTP 404, 410).
        PermissionError: The server refuses it (HTTP 401, 403).
    """
    from fsspec.utils import get_protocol  # noqa: PLC0415 (imported when first needed, as in filesystem)

    if get_protocol(url) not in _HTTP:
        fs, path = filesystem(url, storage_options)
        # On a store, a request per _STORE_READ_AHEAD bytes read in order: gcsfs's default cache asks for each
        # 8-16 KiB read on its own (1,285 requests for 20 MB), s3fs's for 50 MiB at once.
        ahead = {} if is_local(url) else {"block_size": _STORE_READ_AHEAD, "cache_type": "readahead"}
        stream = fs.open(path, "rb", **ahead)
        size = getattr(stream, "size", None)
        if offset:
            stream.seek(offset)
        return Opened(stream, offset, size)
    headers = dict((storage_options or {}).get("headers") or {})
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as answer:
        if answer.code == 416:  # the range starts at the end of the file: nothing is left to read
            return Opened(io.BytesIO(), offset, offset)
        if answer.code in (404, 410):
            raise FileNotFoundError(f"{url} is not found (HTTP {answer.code})") from None
        if answer.code in (401, 403):
            raise PermissionError(f"{url} is refused (HTTP {answer.code} {answer.reason})") from None
        raise
    if response.status == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        return Opened(response, offset, int(total) if total.isdigit() else None)
    length = response.headers.get("Content-Length")
    return Opened(response, 0, int(length) if length and length.isdigit() else None)


def open_resuming(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    policy: RetryPolicy | None = None,
    on_retry: Callable[[str], None] | None = None,
    *,
    wait_out_refusals: bool = True,
) -> ResumingStream:
    """The file ``url`` as a :class:`~beamtrove.network.ResumingStream`: read through transient faults.

    Args:
        url: The file (any URL :func:`open_at` opens).
        storage_options: fsspec options.
        policy: How faults are waited out; the default policy when None.
        on_retry: Called with each fault's name before the file is reopened.
        wait_out_refusals: Whether a connection refused is waited out (see
            :class:`~beamtrove.network.ResumingStream`).
    """
    policy = policy or RetryPolicy()
    return ResumingStream(
        url,
        lambda offset: open_at(url, offset, storage_options, policy.read_timeout),
        policy,
        on_retry,
        wait_out_refusals=wait_out_refusals,
    )
