"""The decontamination index: the hashed n-grams of benchmark items, per task, on storage.

An index is a folder::

    index.json                        the manifest (below)
    <task>/part-<shard>.index.hashes  the task's n-gram hashes with hash % shards == shard
    stats.json                        the counters of the run that built it (beamtrove run decont_index)

Each ``.index.hashes`` file is DataTrove's format: the distinct 64-bit
xxHashes of n-grams as raw little-endian ``uint64`` (``numpy.dtype("<u8")``),
here in ascending order, no header. The manifest records what the hashes
mean, so the filter applies an index exactly as it was built::

    {"format": "beamtrove-decont-index", "version": 1,
     "n_grams": 12, "find_query_ngrams": false, "find_overlap_ngrams": true,
     "word_splitter": "beamtrove", "normalization": "datatrove-simplify-text", "hash": "xxh64",
     "tasks": {"<task>": {"items": 100, "hashes": 4210,
                          "files": ["<task>/part-00000.index.hashes", ...]}},
     "shards": {"<task>/part-00000.index.hashes": {"hashes": 4210, "blake2b": "<hex>"}, ...}}

A damaged index is refused, naming the file: before the run, when a file the
manifest lists is missing or holds other than its hashes' 8 bytes each; as
the filter loads it, when a file's BLAKE2b digest is not the one recorded or
its hashes are not in ascending order. An index written before ``shards``
was recorded has its files' sizes checked against each task's ``hashes``,
and their order.

A folder of DataTrove's ``NGramsDecontIndexer`` (``<task>.index.hashes``
files, no manifest) reads as an index of DataTrove's defaults: 12-grams,
spaCy's words. DataTrove's ``NGramsDecontFilter`` reads a beamtrove index
folder too (it loads every ``*.index.hashes`` under it), naming each task by
its file, ``<task>/part-<shard>``; its hashes match only when the index was
built with ``word_splitter="spacy"`` and DataTrove's defaults. With no
manifest, DataTrove's files can only be checked to hold whole hashes, at
least one: a file cut at a multiple of 8 bytes, changed in place or deleted
cannot be told from an intact one.

This module reads an index (:func:`read_manifest`, :class:`DecontIndex`);
:mod:`beamtrove.transforms.decont.index_build` writes one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import filesystem, join, open_url
from beamtrove.transforms.decont.ngrams import DecontConfig
from beamtrove.transforms.manifests import file_sizes, is_count, load_manifest

__all__ = [
    "HASHES_SUFFIX",
    "HASH_DTYPE",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "MANIFEST_FILE",
    "DecontIndex",
    "IndexManifest",
    "file_digest",
    "read_manifest",
]

MANIFEST_FILE = "index.json"
HASHES_SUFFIX = ".index.hashes"
INDEX_FORMAT = "beamtrove-decont-index"
INDEX_VERSION = 1
HASH_DTYPE = np.dtype("<u8")
_REBUILD = "rebuild the index with `beamtrove run decont_index`"


@dataclasses.dataclass(frozen=True)
class IndexManifest:
    """What an index folder holds: how its n-grams were made, and each task's hash files.

    Attributes:
        path: The index folder.
        config: The n-gram settings the index was built with.
        files: Task name -> its ``.index.hashes`` files, relative to ``path``.
        shards: File (relative to ``path``) -> the ``hashes`` it holds and
            their ``blake2b`` digest; empty for DataTrove's indexes and
            beamtrove's written before they were recorded.
        ascending: Each file holds distinct hashes in ascending order (beamtrove's do; DataTrove's need not).
    """

    path: str
    config: DecontConfig
    files: Mapping[str, tuple[str, ...]]
    shards: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    ascending: bool = False


def read_manifest(path: str, storage_options: Mapping[str, Any] | None = None) -> IndexManifest:
    """The manifest of the index at ``path`` (beamtrove's ``index.json``, or a DataTrove index's file names), checked.

    Every file must be in the folder holding whole 8-byte hashes, at least
    one; in a beamtrove index, as many as its manifest records. This lists
    the folder and reads no hash file: what the files hold is checked as they
    are loaded (:class:`DecontIndex`).

    Raises:
        FileNotFoundError: ``path`` holds neither.
        ValueError: A manifest naming an unknown word splitter.
        ConfigurationError: A manifest this version cannot read, or a damaged
            index (a manifest that is not JSON or lacks a field, a file
            missing, empty, cut short or of other hashes than recorded); the
            message names the file.
    """
    fs, folder = filesystem(path, storage_options)
    manifest_path = posixpath.join(folder, MANIFEST_FILE)
    if fs.exists(manifest_path):
        return _checked_manifest(path, fs, folder)
    found = fs.glob(posixpath.join(folder, f"**/*{HASHES_SUFFIX}"), detail=True)
    if not found:
        raise FileNotFoundError(
            f"No decontamination index at {path}: it holds neither {MANIFEST_FILE} nor *{HASHES_SUFFIX} files. "
            "Build one with `beamtrove run decont_index`."
        )
    # DataTrove's indexer: one file per task, named after it, built with its default n-gram settings.
    sizes = {posixpath.relpath(file, folder): info["size"] for file, info in sorted(found.items())}
    for name, size in sizes.items():
        _check_size(join(path, name), size)
    files = {name.removesuffix(HASHES_SUFFIX): (name,) for name in sizes}
    return IndexManifest(path, DecontConfig(word_splitter="spacy"), files)


def _checked_manifest(path: str, fs, folder: str) -> IndexManifest:
    """A beamtrove index's manifest, its files checked against the folder's."""
    manifest = load_manifest(
        join(path, MANIFEST_FILE),
        fs,
        posixpath.join(folder, MANIFEST_FILE),
        format_name=INDEX_FORMAT,
        version=INDEX_VERSION,
        index="decontamination index",
        rebuild=_REBUILD,
        problem=_manifest_problem,
    )
    config = DecontConfig(
        n_grams=manifest["n_grams"],
        find_query_ngrams=manifest["find_query_ngrams"],
        find_overlap_ngrams=manifest["find_overlap_ngrams"],
        word_splitter=manifest["word_splitter"],
    )
    files = {task: tuple(entry["files"]) for task, entry in manifest["tasks"].items()}
    index = IndexManifest(path, config, files, manifest.get("shards", {}), ascending=True)
    sizes = file_sizes(fs, folder)
    for task, entry in manifest["tasks"].items():
        for file in entry["files"]:
            url = join(path, file)
            if file not in sizes:
                raise ConfigurationError(
                    f"Decontamination index file {url} is missing ({MANIFEST_FILE} lists it): {_REBUILD}, or copy "
                    "the whole index folder."
                )
            _check_size(url, sizes[file])
            if index.shards and sizes[file] != index.shards[file]["hashes"] * HASH_DTYPE.itemsize:
                raise ConfigurationError(
                    f"Decontamination index file {url} holds {sizes[file] // HASH_DTYPE.itemsize} hashes, not the "
                    f"{index.shards[file]['hashes']} {MANIFEST_FILE} records: it was changed or cut short; {_REBUILD}."
                )
        held = sum(sizes[file] for file in entry["files"]) // HASH_DTYPE.itemsize
        if held != entry["hashes"]:
            raise ConfigurationError(
                f"Decontamination index {path}: the files of task {task} ({', '.join(entry['files'])}) hold {held} "
                f"hashes, not the {entry['hashes']} {MANIFEST_FILE} records: one was changed or cut short; {_REBUILD}."
            )
    return index


def _manifest_problem(manifest: Mapping[str, Any]) -> str | None:
    """What makes a manifest's fields unusable, or None."""
    if not (is_count(manifest.get("n_grams")) and isinstance(manifest.get("word_splitter"), str)):
        return "its n_grams or word_splitter is missing"
    if not all(isinstance(manifest.get(field), bool) for field in ("find_query_ngrams", "find_overlap_ngrams")):
        return "its find_query_ngrams or find_overlap_ngrams is missing"
    tasks, shards = manifest.get("tasks"), manifest.get("shards", {})
    if not isinstance(tasks, dict) or not isinstance(shards, dict):
        return "its tasks or shards are not an object"
    for task, entry in tasks.items():
        files = entry.get("files") if isinstance(entry, dict) else None
        if not (isinstance(files, list) and files and all(isinstance(file, str) for file in files)):
            return f"task {task} lists no files"
        if not (is_count(entry.get("items")) and is_count(entry.get("hashes"))):
            return f"task {task} lacks its items or hashes"
        if not shards:
            continue
        held = [shards.get(file) for file in files]
        if not all(isinstance(shard, dict) and is_count(shard.get("hashes")) for shard in held):
            return f"its shards lack the hashes of a file of task {task}"
        if not all(isinstance(shard.get("blake2b"), str) for shard in held):
            return f"its shards lack the digest of a file of task {task}"
        total = sum(shard["hashes"] for shard in held)
        if total != entry["hashes"]:
            return f"the files of task {task} hold {total} hashes, not {entry['hashes']}"
    return None


def _check_size(url: str, size: int) -> None:
    """Raises ConfigurationError unless a hash file of ``size`` bytes holds whole hashes, at least one."""
    if not size:
        raise ConfigurationError(f"Decontamination index file {url} is empty: {_REBUILD}.")
    if size % HASH_DTYPE.itemsize:
        raise ConfigurationError(
            f"Decontamination index file {url} holds {size} bytes, not a whole number of {HASH_DTYPE.itemsize}-byte "
            f"hashes: it was cut short or is no index file; {_REBUILD}."
        )


def file_digest(data: bytes) -> str:
    """The digest the manifest records of a hash file's bytes: 16 bytes of BLAKE2b, in hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _load_hashes(manifest: IndexManifest, file: str, storage_options: Mapping[str, Any] | None) -> np.ndarray:
    """A hash file's hashes, checked against what its manifest records.

    Raises:
        ConfigurationError: The file is damaged; the message names it.
    """
    url = join(manifest.path, file)
    with open_url(url, "rb", storage_options) as stream:
        data = stream.read()
    _check_size(url, len(data))
    recorded = manifest.shards.get(file)
    if recorded is not None and file_digest(data) != recorded["blake2b"]:
        raise ConfigurationError(
            f"Decontamination index file {url} is damaged: its digest is not the one {MANIFEST_FILE} records; "
            f"{_REBUILD}."
        )
    hashes = np.frombuffer(data, dtype=HASH_DTYPE)
    if manifest.ascending and not np.all(hashes[1:] > hashes[:-1]):
        raise ConfigurationError(
            f"Decontamination index file {url} is damaged: its hashes are not in ascending order; {_REBUILD}."
        )
    return hashes


class DecontIndex:
    """The hashes of one or more index folders of the same n-gram settings, ready for lookups.

    Hashes are held as one sorted ``uint64`` array (8 bytes each) with the
    task of each beside it; a hash several tasks share keeps the first task
    in the order the manifests list them.

    Raises:
        ConfigurationError: A hash file is damaged (see :func:`read_manifest`); the message names it.
    """

    def __init__(self, manifests: Iterable[IndexManifest], storage_options: Mapping[str, Any] | None = None):
        self.tasks: list[str] = []
        hashes, task_ids = [], []
        for manifest in manifests:
            for task, files in manifest.files.items():
                task_id = len(self.tasks)
                self.tasks.append(task)
                for file in files:
                    loaded = _load_hashes(manifest, file, storage_options)
                    hashes.append(loaded)
                    task_ids.append(np.full(len(loaded), task_id, dtype=np.int32))
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, dtype=HASH_DTYPE)
        all_ids = np.concatenate(task_ids) if task_ids else np.empty(0, dtype=np.int32)
        # A stable sort keeps, among equal hashes, the task listed first in front.
        order = np.argsort(all_hashes, kind="stable")
        self._hashes, first = np.unique(all_hashes[order], return_index=True)
        self._task_ids = all_ids[order][first]

    def __len__(self) -> int:
        return len(self._hashes)

    def first_match(self, hashes: np.ndarray) -> tuple[int, str] | None:
        """The position in ``hashes`` of the first one the index holds, and its task; None if there is none."""
        if not len(hashes) or not len(self._hashes):
            return None
        slots = np.searchsorted(self._hashes, hashes)
        inside = slots < len(self._hashes)
        found = np.zeros(len(hashes), dtype=bool)
        found[inside] = self._hashes[slots[inside]] == hashes[inside]
        if not found.any():
            return None
        position = int(np.argmax(found))
        return position, self.tasks[self._task_ids[slots[position]]]
