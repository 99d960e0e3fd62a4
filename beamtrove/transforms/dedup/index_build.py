"""Building a dedup index (``beamtrove run dedup_index``): the keys of a dataset's documents, as index shards.

:class:`BuildDedupIndex` writes the folder :mod:`beamtrove.transforms.dedup.index`
lays out: each kind's records, sorted, in gzip shards, then ``index.json``
(:mod:`beamtrove.transforms.dedup.index_manifest`).
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam
import orjson

from beamtrove.document import Document
from beamtrove.fs import join, write_json, write_url_atomically
from beamtrove.languages import language_key
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.dedup.exact import key_digest, normalize_url
from beamtrove.transforms.dedup.index_manifest import (
    INDEX_FORMAT,
    INDEX_KINDS,
    INDEX_VERSION,
    MANIFEST_FILE,
    MINHASH_FIELDS,
)
from beamtrove.transforms.dedup.keep import KeepOrder
from beamtrove.transforms.dedup.minhash import MinHashConfig, MinHasher
from beamtrove.transforms.dedup.sentences import span_digests
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages, flatten
from beamtrove.transforms.writers import WrittenFile

__all__ = ["BuildDedupIndex"]


class _IndexRecordsFn(beam.DoFn):
    """Emits a document's keys, tagged by kind, each with the document's rank in the index's keep order."""

    def __init__(self, kinds: Sequence[str], order: KeepOrder, minhash: MinHashConfig, span_sentences: int):
        self._kinds = kinds
        self._order = order
        self._minhash = minhash
        self._span_sentences = span_sentences

    def setup(self):
        self._hasher = MinHasher(self._minhash)

    def process(self, document: Document):
        rank = self._order.rank(document)
        if "exact" in self._kinds:
            yield beam.pvalue.TaggedOutput("exact", (key_digest(document.text), rank))
        url = document.metadata.get("url")
        if "url" in self._kinds and isinstance(url, str) and url.strip():
            yield beam.pvalue.TaggedOutput("url", (key_digest(normalize_url(url)), rank))
        if "minhash" in self._kinds:
            signature = self._hasher.signature(document.text, language_key(document.metadata))
            if signature is not None:
                record = {
                    "id": document.id,
                    "node": rank,
                    "sketch": MinHasher.sketch(signature).hex(),
                    "bands": [key.hex() for key in MinHasher.band_keys(signature)],
                }
                yield beam.pvalue.TaggedOutput("minhash", (document.id, record))
        if "sentence" in self._kinds:
            for digest in span_digests(document.text, self._span_sentences):
                yield beam.pvalue.TaggedOutput("sentence", digest)


def _first_document(grouped) -> tuple[bytes, dict]:
    key, ranks = grouped
    return key, {"key": key.hex(), "id": KeepOrder.ranked_id(min(ranks))}


def _sentence_record(grouped: tuple[bytes, Any]) -> tuple[bytes, dict]:
    digest, _ = grouped
    return digest, {"key": digest.hex()}


def _shard(keyed: tuple[bytes | str, dict], kind: str, num_shards: int) -> tuple[tuple[str, int], dict]:
    key, record = keyed
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    shard = int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") % num_shards
    return (kind, shard), record


class _WriteShardFn(beam.DoFn):
    """Writes one kind's shard of records as sorted JSON lines, gzip-compressed with no timestamp."""

    def __init__(self, output_dir: str, num_shards: int, step: str, storage_options: Mapping[str, Any]):
        self._output_dir = output_dir
        self._num_shards = num_shards
        self._metrics = StepMetrics(step)
        self._storage_options = storage_options

    def process(self, element):
        (kind, shard), records = element
        lines = sorted(orjson.dumps(record) for record in records)
        data = gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0)
        relative = f"{kind}/part-{shard:05d}-of-{self._num_shards:05d}.jsonl.gz"
        write_url_atomically(join(self._output_dir, relative), data, self._storage_options)
        self._metrics.inc(f"records.{kind}", len(lines))
        self._metrics.inc("files")
        yield WrittenFile(join(self._output_dir, relative), len(lines), len(data), relative)


class _WriteManifestFn(beam.DoFn):
    """Writes ``index.json`` once every shard is written."""

    def __init__(self, output_dir: str, name: str, keep_by: str | None, settings: Mapping[str, dict], options):
        self._output_dir = output_dir
        self._name = name
        self._keep_by = keep_by
        self._settings = settings
        self._storage_options = options

    def process(self, _, written: list[WrittenFile], documents: int):
        kinds = {}
        for kind, settings in self._settings.items():
            files = sorted((file for file in written if file.destination.startswith(f"{kind}/")), key=_destination)
            kinds[kind] = {
                "records": sum(file.records for file in files),
                "files": [file.destination for file in files],
                **settings,
            }
        manifest = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "name": self._name,
            "documents": documents,
            "keep_by": self._keep_by,
            "kinds": kinds,
            "shards": {file.destination: {"bytes": file.size, "records": file.records} for file in written},
        }
        path = join(self._output_dir, MANIFEST_FILE)
        write_json(manifest, path, self._storage_options)
        yield WrittenFile(path, len(kinds), len(orjson.dumps(manifest)), MANIFEST_FILE)


def _destination(file: WrittenFile) -> str:
    return file.destination


class BuildDedupIndex(beam.PTransform):
    """Writes a dedup index of documents: the keys of the chosen kinds (see the module docstring).

    Returns the :class:`~beamtrove.transforms.writers.WrittenFile` s, ``index.json`` last. Stats:
    ``beamtrove/<step>``: ``in``, ``records.<kind>``, ``files``.

    Args:
        output_dir: The index folder (path or fsspec URL).
        kinds: Which of :data:`INDEX_KINDS` to index.
        name: The index's name, in the reasons of what it removes (e.g. the dump, ``CC-MAIN-2024-10``).
        minhash: MinHash settings; a run against the index must use the same shingles and hashes.
        span_sentences: Sentences per span.
        keep_by: See :class:`KeepOrder`: which of the indexed duplicates is named as kept.
        num_shards: Files per kind, each written by its own worker.
        storage_options: fsspec filesystem options.
        step: Stats name.
    """

    def __init__(
        self,
        output_dir: str,
        kinds: Sequence[str],
        *,
        name: str,
        minhash: MinHashConfig | None = None,
        span_sentences: int = 3,
        keep_by: str | None = None,
        num_shards: int = 8,
        storage_options: Mapping[str, Any] | None = None,
        step: str = "write_index",
    ):
        super().__init__()
        unknown = sorted(set(kinds) - set(INDEX_KINDS))
        if not kinds or unknown:
            raise ValueError(f"An index holds some of {', '.join(INDEX_KINDS)} (got {', '.join(kinds) or 'none'}).")
        if num_shards < 1:
            raise ValueError(f"num_shards must be at least 1 (got {num_shards}).")
        if not name.strip():
            raise ValueError("An index needs a name (e.g. the dump it holds, CC-MAIN-2024-10).")
        self._output_dir = output_dir.rstrip("/")
        self._kinds = tuple(kind for kind in INDEX_KINDS if kind in kinds)
        self._name = name
        self._minhash = minhash or MinHashConfig()
        self._span_sentences = span_sentences
        self._keep_by = keep_by
        self._num_shards = num_shards
        self._storage_options = dict(storage_options or {})
        self._metrics = StepMetrics(step)
        self._step = step

    def _settings(self) -> dict[str, dict]:
        settings = {kind: {} for kind in self._kinds}
        if "minhash" in settings:
            settings["minhash"] = {field: getattr(self._minhash, field) for field in MINHASH_FIELDS}
            if self._minhash.word_splitter is not None:
                # Recorded only when set: an index of space-separated words reads as every earlier one.
                settings["minhash"]["word_splitter"] = self._minhash.word_splitter
        if "sentence" in settings:
            settings["sentence"] = {"span_sentences": self._span_sentences}
        return settings

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The index as stages: keys, the first rank of each key, each index shard written, then the manifest."""
        return StagedForm(
            (
                Stage("Keys", {"documents": ("documents",)}, self._keys, {**_KEYED_KINDS, "counts": SAME}),
                Stage("FirstOfKeys", {kind: (kind,) for kind in _GROUPED_KINDS}, self._first_of_keys, _SHARDED),
                Stage("WriteShards", {"records": ("minhash", "grouped")}, self._write_shards, {"written": SAME}),
                Stage(
                    "WriteManifest",
                    {"written": ("written",), "counts": ("counts",)},
                    self._write_manifest,
                    {"files": SAME},
                    whole=True,
                ),
            ),
            input="documents",
            kept=(),
        )

    def _keys(self, pipeline, inputs, sides):
        counted = inputs["documents"] | "Count" >> beam.Map(_counted, self._metrics)
        index_records = _IndexRecordsFn(self._kinds, KeepOrder(self._keep_by), self._minhash, self._span_sentences)
        keys = counted | "Keys" >> beam.ParDo(index_records).with_outputs(*self._kinds)
        empty = {kind: flatten(pipeline, [], f"No{kind}") for kind in _KEYED_KINDS if kind not in self._kinds}
        chosen = {kind: keys[kind] for kind in self._kinds}
        if "sentence" in chosen:
            # Keyed, so that a staged run gathers each span's copies in one partition.
            chosen["sentence"] = chosen["sentence"] | "SpanKeys" >> beam.Map(_span_key)
        if "minhash" in chosen:
            chosen["minhash"] = chosen["minhash"] | "Shardminhash" >> beam.Map(_shard, "minhash", self._num_shards)
        counts = counted | "Documents" >> beam.combiners.Count.Globally()
        return {**empty, **chosen, "counts": counts}

    def _first_of_keys(self, pipeline, inputs, sides):
        records = []
        for kind in ("exact", "url"):
            first = inputs[kind] | f"Group{kind}" >> beam.GroupByKey() | f"First{kind}" >> beam.Map(_first_document)
            records.append(first | f"Shard{kind}" >> beam.Map(_shard, kind, self._num_shards))
        spans = (
            inputs["sentence"]
            | "DistinctSpans" >> beam.GroupByKey()
            | "SpanRecords" >> beam.Map(_sentence_record)
            | "Shardsentence" >> beam.Map(_shard, "sentence", self._num_shards)
        )
        return {"grouped": flatten(pipeline, [*records, spans], "AllGrouped")}

    def _write_shards(self, pipeline, inputs, sides):
        write = _WriteShardFn(self._output_dir, self._num_shards, self._step, self._storage_options)
        written = inputs["records"] | "GroupByShard" >> beam.GroupByKey() | "WriteShards" >> beam.ParDo(write)
        return {"written": written}

    def _write_manifest(self, pipeline, inputs, sides):
        total = inputs["counts"] | "AllDocuments" >> beam.CombineGlobally(sum)
        manifest_fn = _WriteManifestFn(
            self._output_dir, self._name, self._keep_by, self._settings(), self._storage_options
        )
        manifest = (
            pipeline
            | "Once" >> beam.Create([None])
            | "WriteManifest"
            >> beam.ParDo(manifest_fn, beam.pvalue.AsList(inputs["written"]), beam.pvalue.AsSingleton(total))
        )
        return {"files": (inputs["written"], manifest) | "AllFiles" >> beam.Flatten()}

    def expand(self, documents):
        return apply_stages(self.staged_form(), documents)["files"]


# The kinds whose records the Keys stage writes keyed: by key (grouped next), or by index shard (minhash).
_KEYED_KINDS = {"exact": KEYED, "url": KEYED, "sentence": KEYED, "minhash": KEYED}
_GROUPED_KINDS = ("exact", "url", "sentence")
_SHARDED = {"grouped": KEYED}


def _span_key(digest: bytes) -> tuple[bytes, None]:
    return digest, None


def _counted(document: Document, metrics: StepMetrics) -> Document:
    # Every document it receives goes into the index: the sink's "out" is what the index holds.
    metrics.received()
    metrics.emitted()
    return document
