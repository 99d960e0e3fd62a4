"""Building a decontamination index (``beamtrove run decont_index``): benchmark items' n-grams, hashed, per task.

:class:`BuildDecontIndex` writes the folder :mod:`beamtrove.transforms.decont.index`
lays out: each task's distinct hashes, sorted, in ``.index.hashes`` files, then
``index.json``.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import apache_beam as beam
import numpy as np
import orjson

from beamtrove.document import Document
from beamtrove.fs import join, write_json, write_url_atomically
from beamtrove.languages import language_key
from beamtrove.metrics import StepMetrics
from beamtrove.text import word_splitter
from beamtrove.transforms.decont.index import (
    HASH_DTYPE,
    HASHES_SUFFIX,
    INDEX_FORMAT,
    INDEX_VERSION,
    MANIFEST_FILE,
    file_digest,
)
from beamtrove.transforms.decont.ngrams import DecontConfig, benchmark_ngrams, hash_ngram
from beamtrove.transforms.writers import WrittenFile

__all__ = ["BuildDecontIndex", "task_name"]

# How the indexed n-grams were normalized and hashed, as the manifest records it.
_NORMALIZATION = "datatrove-simplify-text"
_HASH = "xxh64"
# The tagged outputs of hashing (each item's task) and of writing (each file's digest).
_TASKS = "tasks"
_DIGESTS = "digests"
# Task names become folder names: anything but letters, digits and . _ - : | + = turns into _.
_UNSAFE_IN_TASK = re.compile(r"[^\w.:|+=-]")


def task_name(name: str) -> str:
    """``name`` made safe as a folder name (DataTrove turns spaces into ``_`` too)."""
    safe = _UNSAFE_IN_TASK.sub("_", name.strip())
    return safe.lstrip(".") or "_"


class _HashItemsFn(beam.DoFn):
    """Emits ``(task, hash)`` for every n-gram of a benchmark item, and its task to the ``tasks`` output."""

    def __init__(self, config: DecontConfig, query_key: str, task_key: str, step: str):
        self._config = config or DecontConfig()
        self._query_key = query_key
        self._task_key = task_key
        self._metrics = StepMetrics(step)

    def process(self, item: Document):
        self._metrics.received()
        query = item.metadata.get(self._query_key)
        if query is not None and not isinstance(query, str):
            self._metrics.skipped("query_not_a_string")
            return
        config = self._config
        split = word_splitter(config.word_splitter, language_key(item.metadata), word_tokenizers=config.word_tokenizers)
        ngrams = benchmark_ngrams(item.text, query, config, split)
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
    """Writes one task's shard of distinct hashes, sorted, as an ``.index.hashes`` file; its digest to ``digests``."""

    def __init__(self, output_dir: str, step: str, storage_options: Mapping[str, Any]):
        self._output_dir = output_dir
        self._metrics = StepMetrics(step)
        self._storage_options = storage_options

    def process(self, element):
        (task, shard), hashes = element
        values = np.sort(np.fromiter(hashes, dtype=HASH_DTYPE))
        relative = f"{task}/part-{shard:05d}{HASHES_SUFFIX}"
        data = values.tobytes()
        write_url_atomically(join(self._output_dir, relative), data, self._storage_options)
        self._metrics.inc("files")
        self._metrics.inc("hashes", len(values))
        yield beam.pvalue.TaggedOutput(_DIGESTS, (relative, file_digest(data)))
        yield WrittenFile(join(self._output_dir, relative), len(values), values.nbytes, relative)


class _WriteManifestFn(beam.DoFn):
    """Writes ``index.json`` once every shard is written."""

    def __init__(self, output_dir: str, config: DecontConfig, storage_options: Mapping[str, Any]):
        self._output_dir = output_dir
        self._config = config
        self._storage_options = storage_options

    def process(self, _, written: list[WrittenFile], items: dict[str, int], digests: dict[str, str]):
        tasks = {}
        for task in sorted(items):
            files = [file for file in written if file.destination.startswith(f"{task}/")]
            tasks[task] = {
                "items": items[task],
                "hashes": sum(file.records for file in files),
                "files": sorted(file.destination for file in files),
            }
        manifest = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            **dataclasses.asdict(self._config),
            "normalization": _NORMALIZATION,
            "hash": _HASH,
            "tasks": tasks,
            "shards": {
                file.destination: {"hashes": file.records, "blake2b": digests[file.destination]} for file in written
            },
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
            | "WriteShards"
            >> beam.ParDo(_WriteShardFn(self._output_dir, self._step, self._storage_options)).with_outputs(
                _DIGESTS, main="files"
            )
        )
        manifest = (
            items.pipeline
            | "Once" >> beam.Create([None])
            | "WriteManifest"
            >> beam.ParDo(
                _WriteManifestFn(self._output_dir, self._config, self._storage_options),
                beam.pvalue.AsList(written.files),
                beam.pvalue.AsSingleton(items_per_task),
                beam.pvalue.AsDict(written[_DIGESTS]),
            )
        )
        return (written.files, manifest) | "AllFiles" >> beam.Flatten()
