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
                          "files": ["<task>/part-00000.index.hashes", ...]}}}

A folder of DataTrove's ``NGramsDecontIndexer`` (``<task>.index.hashes``
files, no manifest) reads as an index of DataTrove's defaults: 12-grams,
spaCy's words. DataTrove's ``NGramsDecontFilter`` reads a beamtrove index
folder too (it loads every ``*.index.hashes`` under it), naming each task by
its file, ``<task>/part-<shard>``; its hashes match only when the index was
built with ``word_splitter="spacy"`` and DataTrove's defaults.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

import apache_beam as beam
import numpy as np
import orjson

from beamtrove.document import Document
from beamtrove.fs import filesystem, join, open_url, write_atomically, write_json
from beamtrove.metrics import StepMetrics
from beamtrove.text import word_splitter
from beamtrove.transforms.decont.ngrams import DecontConfig, benchmark_ngrams, hash_ngram
from beamtrove.transforms.writers import WrittenFile

__all__ = [
    "HASHES_SUFFIX",
    "MANIFEST_FILE",
    "BuildDecontIndex",
    "DecontIndex",
    "IndexManifest",
    "read_manifest",
    "task_name",
]

MANIFEST_FILE = "index.json"
HASHES_SUFFIX = ".index.hashes"
_FORMAT = "beamtrove-decont-index"
_VERSION = 1
_NORMALIZATION = "datatrove-simplify-text"
_HASH = "xxh64"
_DTYPE = np.dtype("<u8")
_TASKS = "tasks"
# Task names become folder names: anything but letters, digits and . _ - : | + = turns into _.
_UNSAFE_IN_TASK = re.compile(r"[^\w.:|+=-]")


def task_name(name: str) -> str:
    """``name`` made safe as a folder name (DataTrove turns spaces into ``_`` too)."""
    safe = _UNSAFE_IN_TASK.sub("_", name.strip())
    return safe.lstrip(".") or "_"


@dataclasses.dataclass(frozen=True)
class IndexManifest:
    """What an index folder holds: how its n-grams were made, and each task's hash files.

    Attributes:
        path: The index folder.
        config: The n-gram settings the index was built with.
        files: Task name -> its ``.index.hashes`` files, relative to ``path``.
    """

    path: str
    config: DecontConfig
    files: Mapping[str, tuple[str, ...]]


def read_manifest(path: str, storage_options: Mapping[str, Any] | None = None) -> IndexManifest:
    """The manifest of the index at ``path``: beamtrove's ``index.json``, or a DataTrove index's file names.

    Raises:
        FileNotFoundError: ``path`` holds neither.
        ValueError: A manifest this version cannot read, or one naming an unknown word splitter.
    """
    fs, folder = filesystem(path, storage_options)
    manifest_path = posixpath.join(folder, MANIFEST_FILE)
    if fs.exists(manifest_path):
        with fs.open(manifest_path, "rb") as stream:
            manifest = orjson.loads(stream.read())
        if manifest.get("format") != _FORMAT or manifest.get("version") != _VERSION:
            raise ValueError(
                f"{path}/{MANIFEST_FILE} is not a version {_VERSION} decontamination index; rebuild it with "
                "`beamtrove run decont_index`."
            )
        config = DecontConfig(
            n_grams=manifest["n_grams"],
            find_query_ngrams=manifest["find_query_ngrams"],
            find_overlap_ngrams=manifest["find_overlap_ngrams"],
            word_splitter=manifest["word_splitter"],
        )
        files = {task: tuple(entry["files"]) for task, entry in manifest["tasks"].items()}
        return IndexManifest(path, config, files)
    found = sorted(fs.glob(posixpath.join(folder, f"**/*{HASHES_SUFFIX}")))
    if not found:
        raise FileNotFoundError(
            f"No decontamination index at {path}: it holds neither {MANIFEST_FILE} nor *{HASHES_SUFFIX} files. "
            "Build one with `beamtrove run decont_index`."
        )
    # DataTrove's indexer: one file per task, named after it, built with its default n-gram settings.
    relative = [posixpath.relpath(file, folder) for file in found]
    files = {name.removesuffix(HASHES_SUFFIX): (name,) for name in relative}
    return IndexManifest(path, DecontConfig(word_splitter="spacy"), files)


class DecontIndex:
    """The hashes of one or more index folders of the same n-gram settings, ready for lookups.

    Hashes are held as one sorted ``uint64`` array (8 bytes each) with the
    task of each beside it; a hash several tasks share keeps the first task
    in the order the manifests list them.
    """

    def __init__(self, manifests: Iterable[IndexManifest], storage_options: Mapping[str, Any] | None = None):
        self.tasks: list[str] = []
        hashes, task_ids = [], []
        for manifest in manifests:
            for task, files in manifest.files.items():
                task_id = len(self.tasks)
                self.tasks.append(task)
                for file in files:
                    with open_url(join(manifest.path, file), "rb", storage_options) as stream:
                        loaded = np.frombuffer(stream.read(), dtype=_DTYPE)
                    hashes.append(loaded)
                    task_ids.append(np.full(len(loaded), task_id, dtype=np.int32))
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, dtype=_DTYPE)
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


class _HashItemsFn(beam.DoFn):
    """Emits ``(task, hash)`` for every n-gram of a benchmark item, and its task to the ``tasks`` output."""

    def __init__(self, config: DecontConfig, query_key: str, task_key: str, step: str):
        self._config = config or DecontConfig()
        self._query_key = query_key
        self._task_key = task_key
        self._metrics = StepMetrics(step)
        self._split = None

    def setup(self):
        self._split = word_splitter(self._config.word_splitter)

    def process(self, item: Document):
        self._metrics.received()
        query = item.metadata.get(self._query_key)
        if query is not None and not isinstance(query, str):
            self._metrics.skipped("query_not_a_string")
            return
        ngrams = benchmark_ngrams(item.text, query, self._config, self._split)
        if not ngrams:
            self._metrics.skipped("too_short")
            return
        task = item.metadata.get(self._task_key)
        if not isinstance(task, str) or not task.strip():
            # Items without a task field belong to the benchmark their file holds.
            task = posixpath.basename(item.metadata.get("file_path", "input")).split(".", 1)[0]
        task = task_name(task)
        self._metrics.emitted()
        self._metrics.inc("ngrams", len(ngrams))
        yield beam.pvalue.TaggedOutput(_TASKS, task)
        for ngram in ngrams:
            yield task, hash_ngram(ngram)


class _WriteShardFn(beam.DoFn):
    """Writes one task's shard of distinct hashes, sorted, as an ``.index.hashes`` file."""

    def __init__(self, output_dir: str, step: str, storage_options: Mapping[str, Any]):
        self._output_dir = output_dir
        self._metrics = StepMetrics(step)
        self._storage_options = storage_options

    def process(self, element):
        (task, shard), hashes = element
        values = np.sort(np.fromiter(hashes, dtype=_DTYPE))
        relative = f"{task}/part-{shard:05d}{HASHES_SUFFIX}"
        write_atomically(values.tobytes(), join(self._output_dir, relative), self._storage_options)
        self._metrics.inc("files")
        self._metrics.inc("hashes", len(values))
        yield WrittenFile(join(self._output_dir, relative), len(values), values.nbytes, relative)


class _WriteManifestFn(beam.DoFn):
    """Writes ``index.json`` once every shard is written."""

    def __init__(self, output_dir: str, config: DecontConfig, storage_options: Mapping[str, Any]):
        self._output_dir = output_dir
        self._config = config
        self._storage_options = storage_options

    def process(self, _, written: list[WrittenFile], items: dict[str, int]):
        tasks = {}
        for task in sorted(items):
            files = [file for file in written if file.destination.startswith(f"{task}/")]
            tasks[task] = {
                "items": items[task],
                "hashes": sum(file.records for file in files),
                "files": sorted(file.destination for file in files),
            }
        manifest = {
            "format": _FORMAT,
            "version": _VERSION,
            **dataclasses.asdict(self._config),
            "normalization": _NORMALIZATION,
            "hash": _HASH,
            "tasks": tasks,
        }
        path = join(self._output_dir, MANIFEST_FILE)
        write_json(manifest, path, self._storage_options)
        yield WrittenFile(path, len(tasks), len(orjson.dumps(manifest)), MANIFEST_FILE)


def _shard_of(task_hash: tuple[str, int], num_shards: int) -> tuple[tuple[str, int], int]:
    task, value = task_hash
    return (task, value % num_shards), value


class BuildDecontIndex(beam.PTransform):
    """Hashes the n-grams of benchmark items and writes them as a decontamination index folder.

    Takes benchmark items as documents: the text is the label (gold answer),
    ``metadata[query_key]`` the prompt (optional) and ``metadata[task_key]``
    the task; items without a task take their file's name up to the first
    dot (``mmlu.test.jsonl`` -> ``mmlu``). Hashes are made distinct per task
    by a shuffle and split over ``num_shards`` files per task, each written
    by its own worker; ``index.json`` is written last (see the module
    docstring for the layout). Returns the
    :class:`~beamtrove.transforms.writers.WrittenFile` s.

    Stats: ``in`` items, ``out`` items that gave n-grams,
    ``skipped.too_short`` (fewer words than an n-gram),
    ``skipped.query_not_a_string``, ``ngrams`` (before deduplication),
    ``hashes`` (distinct, per task, written), ``files``.

    Args:
        output_dir: The index folder (path or fsspec URL).
        config: Which n-grams to index and how to split words; DataTrove's defaults when None.
        query_key: Metadata field of the prompt.
        task_key: Metadata field of the task name.
        num_shards: Hash files per task.
        storage_options: fsspec filesystem options.
        step: Stats name of the step.

    Raises:
        ValueError: ``num_shards`` below 1.
    """

    def __init__(
        self,
        output_dir: str,
        config: DecontConfig | None = None,
        *,
        query_key: str = "query",
        task_key: str = "task",
        num_shards: int = 1,
        storage_options: Mapping[str, Any] | None = None,
        step: str = "write_index",
    ):
        super().__init__()
        if num_shards < 1:
            raise ValueError(f"num_shards must be at least 1 (got {num_shards}).")
        self._output_dir = output_dir.rstrip("/")
        self._config = config or DecontConfig()
        self._query_key = query_key
        self._task_key = task_key
        self._num_shards = num_shards
        self._storage_options = dict(storage_options or {})
        self._step = step

    def expand(self, items):
        hashed = items | "HashItems" >> beam.ParDo(
            _HashItemsFn(self._config, self._query_key, self._task_key, self._step)
        ).with_outputs(_TASKS, main="hashes")
        items_per_task = (
            hashed[_TASKS]
            | "CountItems" >> beam.combiners.Count.PerElement()
            | "ItemsPerTask" >> beam.combiners.ToDict()
        )
        written = (
            hashed.hashes
            | "DistinctHashes" >> beam.Distinct()
            | "AssignShards" >> beam.Map(_shard_of, self._num_shards)
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(_WriteShardFn(self._output_dir, self._step, self._storage_options))
        )
        manifest = (
            items.pipeline
            | "Once" >> beam.Create([None])
            | "WriteManifest"
            >> beam.ParDo(
                _WriteManifestFn(self._output_dir, self._config, self._storage_options),
                beam.pvalue.AsList(written),
                beam.pvalue.AsSingleton(items_per_task),
            )
        )
        return (written, manifest) | "AllFiles" >> beam.Flatten()
