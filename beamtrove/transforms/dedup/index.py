"""The dedup index: what dedup knows of a dataset, kept so that a later dataset can be deduplicated against it.

FineWeb deduplicates each Common Crawl dump on its own; the next dump must
then lose what the released ones already hold. ``beamtrove run dedup_index``
writes an index of a dump, and ``beamtrove run dedup --against INDEX ...``
treats every document of the indexes as coming before every document of
its input: a document (or sentence span) already present in an index is
removed, with a reason naming the index, and the input's own duplicates are
removed as in an ordinary run. Built from dump A's input documents, A's index
makes ``dedup --against A`` on dump B remove from B exactly what a dedup
over A and B together would, when A's documents come first in its keep order.

An index is a folder::

    index.json                             the manifest (below)
    <kind>/part-<shard>-of-<shards>.jsonl.gz  the records of one kind

with one JSON object per line, sorted, for each kind:

* ``exact`` and ``url``: ``{"key": hex, "id": id}``, one per distinct text
  (or normalized URL): the 16-byte digest the dedup step groups on and the
  document kept for it;
* ``minhash``: ``{"id": id, "node": order, "sketch": hex, "bands": [hex, ...]}``,
  one per document long enough to shingle: its LSH band keys (the bucket
  number and a 16-byte digest of the band, since version 2), the one-byte
  sketch of its signature (for ``--minhash_threshold``) and its place in the
  index's keep order;
* ``sentence``: ``{"key": hex}``, one per distinct span of sentences.

The manifest says how the records were made, so a run using settings that
would not match them fails before it starts, and what each shard holds, so a
damaged index is refused instead of silently removing less::

    {"format": "beamtrove-dedup-index", "version": 3, "name": "CC-MAIN-2024-10",
     "documents": 1000, "keep_by": null,
     "kinds": {"exact": {"records": 990, "files": ["exact/part-00000-of-00008.jsonl.gz", ...]},
               "minhash": {"records": 980, "files": [...], "n_grams": 5, "num_buckets": 14,
                           "hashes_per_bucket": 8, "seed": 1},
               "sentence": {"records": 41230, "files": [...], "span_sentences": 3}},
     "shards": {"exact/part-00000-of-00008.jsonl.gz": {"bytes": 5120, "records": 124}, ...}}

Before a run, every shard the manifest lists must exist with the bytes it
records (one listing of the folder); as a shard is read, gzip's checksum and
its record count must hold. Either failing stops the run with one line naming
the shard. An index written before ``shards`` was recorded is checked for
its shards' presence only.

Several indexes are merged by naming them all: a key several hold belongs
to the first one named.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import logging
import posixpath
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import orjson

from beamtrove.document import Document
from beamtrove.fs import filesystem, join, open_url, write_json, write_url_atomically
from beamtrove.metrics import StepMetrics
from beamtrove.options import ConfigurationError
from beamtrove.transforms.dedup.exact import key_digest, normalize_url
from beamtrove.transforms.dedup.keep import KeepOrder, index_node
from beamtrove.transforms.dedup.minhash import MinHashConfig, MinHasher
from beamtrove.transforms.dedup.sentences import span_digests
from beamtrove.transforms.manifests import file_sizes, is_count, load_manifest
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages, flatten
from beamtrove.transforms.writers import WrittenFile

__all__ = [
    "INDEX_KINDS",
    "MANIFEST_FILE",
    "BuildDedupIndex",
    "DedupIndexManifest",
    "DedupIndexes",
    "IndexMatch",
    "ReadIndexEntries",
    "read_index_manifest",
]

MANIFEST_FILE = "index.json"
#: What an index can hold: one kind per dedup step that compares whole keys.
INDEX_KINDS = ("exact", "url", "minhash", "sentence")
_FORMAT = "beamtrove-dedup-index"
# Version 2: MinHash band keys hold a digest of each band instead of its hashes. Version 3: MinHash and sentence
# keys are of text normalized as DataTrove normalizes it (symbols such as € stay words).
_VERSION = 3
# The MinHash settings band keys depend on, each with the option of `beamtrove run dedup` that sets it.
_MINHASH_OPTIONS = {
    "n_grams": "minhash_ngrams",
    "num_buckets": "minhash_buckets",
    "hashes_per_bucket": "minhash_hashes_per_bucket",
    "seed": "minhash_seed",
}
_MINHASH_FIELDS = tuple(_MINHASH_OPTIONS)
_KIND_SETTINGS = {"exact": (), "url": (), "minhash": _MINHASH_FIELDS, "sentence": ("span_sentences",)}
_REBUILD = "rebuild the index with `beamtrove run dedup_index`"

_LOGGER = logging.getLogger(__name__)


class IndexMatch(NamedTuple):
    """A key an index holds: which index (its position among those named) and the document it came from."""

    position: int
    id: str


@dataclasses.dataclass(frozen=True)
class DedupIndexManifest:
    """An index folder's manifest, checked against the folder (see :func:`read_index_manifest`).

    Attributes:
        path: The index folder.
        name: The index's name, used in the reasons of what it removes.
        keep_by: The keep order its documents were ranked with.
        documents: Documents it was built from.
        kinds: Kind -> its manifest entry (``records``, ``files`` and the kind's settings).
        shards: Shard file (relative to ``path``) -> the ``bytes`` and ``records`` it holds; empty for an index
            written before beamtrove recorded them.
    """

    path: str
    name: str
    keep_by: str | None
    documents: int
    kinds: Mapping[str, Mapping[str, Any]]
    shards: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)

    def files(self, kind: str) -> list[str]:
        """The URLs of a kind's record files."""
        return [join(self.path, file) for file in self.kinds[kind]["files"]]

    def shard_records(self, kind: str) -> list[tuple[str, int | None]]:
        """The URL of each of a kind's shards and the records it holds (None when the manifest does not say)."""
        return [
            (join(self.path, file), self.shards[file]["records"] if self.shards else None)
            for file in self.kinds[kind]["files"]
        ]

    def entry(self, kind: str) -> Mapping[str, Any]:
        """The manifest entry of ``kind``.

        Raises:
            ConfigurationError: The index holds no ``kind`` keys.
        """
        if kind not in self.kinds:
            raise ConfigurationError(
                f"Index {self.path} holds no {kind} keys (it has {', '.join(self.kinds)}): rebuild it with "
                f"`beamtrove run dedup_index --dedup {kind},...`, or leave {kind} out of --dedup."
            )
        return self.kinds[kind]

    def check_minhash(self, config: MinHashConfig) -> None:
        """Raises ConfigurationError unless the index holds band keys made with ``config``'s shingles and hashes."""
        built = self.entry("minhash")
        differing = [field for field in _MINHASH_FIELDS if built[field] != getattr(config, field)]
        if differing:
            settings = ", ".join(f"{field} {built[field]}" for field in differing)
            wanted = ", ".join(f"{field} {getattr(config, field)}" for field in differing)
            options = " ".join(f"--{_MINHASH_OPTIONS[field]} {built[field]}" for field in differing)
            raise ConfigurationError(
                f"Index {self.path} was built with other MinHash settings ({settings}) than this run's ({wanted}): "
                f"run with {options}, or rebuild the index with this run's settings."
            )

    def check_sentence(self, span_sentences: int) -> None:
        """Raises ConfigurationError unless the index holds spans of ``span_sentences`` sentences."""
        built = self.entry("sentence")["span_sentences"]
        if built != span_sentences:
            raise ConfigurationError(
                f"Index {self.path} holds spans of {built} sentences, not {span_sentences}: run with "
                f"--span_sentences {built}, or rebuild the index."
            )


def read_index_manifest(path: str, storage_options: Mapping[str, Any] | None = None) -> DedupIndexManifest:
    """The manifest of the dedup index at ``path``, checked against the shards its folder holds.

    Every shard the manifest lists must be in the folder, with the bytes the
    manifest records for it; what a shard holds is checked as it is read
    (:class:`ReadIndexEntries`). Besides ``index.json`` this lists the folder
    once and reads no shard: it costs the same for an index of any size.

    Raises:
        FileNotFoundError: ``path`` holds no ``index.json``.
        ConfigurationError: The manifest is not a dedup index this version
            reads, or the index is damaged (a manifest that is not JSON or
            lacks a field, a shard missing, empty or of other bytes); the
            message names the file.
    """
    fs, folder = filesystem(path, storage_options)
    manifest_path = posixpath.join(folder, MANIFEST_FILE)
    if not fs.exists(manifest_path):
        raise FileNotFoundError(
            f"No dedup index at {path}: it has no {MANIFEST_FILE}. Build one with `beamtrove run dedup_index`."
        )
    manifest = load_manifest(
        join(path, MANIFEST_FILE),
        fs,
        manifest_path,
        format_name=_FORMAT,
        version=_VERSION,
        index="dedup index",
        rebuild=_REBUILD,
        problem=_manifest_problem,
    )
    index = DedupIndexManifest(
        path.rstrip("/"),
        manifest["name"],
        manifest["keep_by"],
        manifest["documents"],
        manifest["kinds"],
        manifest.get("shards", {}),
    )
    _check_shards(index, fs, folder)
    return index


def _manifest_problem(manifest: Mapping[str, Any]) -> str | None:
    """What makes a manifest's fields unusable, or None."""
    if not (isinstance(manifest.get("name"), str) and is_count(manifest.get("documents"))):
        return "its name or documents is missing"
    if not isinstance(manifest.get("keep_by", 0), str | None):
        return "its keep_by is missing"
    kinds, shards = manifest.get("kinds"), manifest.get("shards", {})
    if not isinstance(kinds, dict) or not kinds or not set(kinds) <= set(INDEX_KINDS):
        return f"its kinds must be some of {', '.join(INDEX_KINDS)}"
    if not isinstance(shards, dict):
        return "its shards are not an object"
    for kind, entry in kinds.items():
        files = entry.get("files") if isinstance(entry, dict) else None
        if not (isinstance(files, list) and all(isinstance(file, str) for file in files)):
            return f"its {kind} entry lists no files"
        if not (is_count(entry.get("records")) and all(isinstance(entry.get(f), int) for f in _KIND_SETTINGS[kind])):
            return f"its {kind} entry lacks its records or settings"
        if not shards:
            continue
        held = [shards.get(file) for file in files]
        if not all(isinstance(shard, dict) and is_count(shard.get("bytes")) for shard in held):
            return f"its shards lack the bytes of a {kind} file"
        if not all(is_count(shard.get("records")) for shard in held):
            return f"its shards lack the records of a {kind} file"
        total = sum(shard["records"] for shard in held)
        if total != entry["records"]:
            return f"its {kind} files hold {total} records, not {entry['records']}"
    return None


def _check_shards(index: DedupIndexManifest, fs, folder: str) -> None:
    """Raises ConfigurationError naming the first shard the folder lacks, or holds empty or of other bytes."""
    sizes = file_sizes(fs, folder)
    for entry in index.kinds.values():
        for file in entry["files"]:
            url, size = join(index.path, file), sizes.get(file)
            if size is None:
                raise ConfigurationError(
                    f"Dedup index shard {url} is missing ({MANIFEST_FILE} lists it): {_REBUILD}, or copy the "
                    "whole index folder."
                )
            if index.shards and size != index.shards[file]["bytes"]:
                raise ConfigurationError(
                    f"Dedup index shard {url} holds {size} bytes, not the {index.shards[file]['bytes']} "
                    f"{MANIFEST_FILE} records: it was changed or cut short; {_REBUILD}."
                )
            if not size:
                raise ConfigurationError(f"Dedup index shard {url} is empty: {_REBUILD}.")
    if not index.shards:
        _LOGGER.warning(
            "Dedup index %s records no shard sizes (an earlier beamtrove wrote it): only that its shards exist is "
            "checked before the run; %s to have their sizes and records checked too.",
            index.path,
            _REBUILD,
        )


def _as_node(value: Any) -> Any:
    """A node read back from JSON: its arrays are the tuples they were written from."""
    return tuple(_as_node(item) for item in value) if isinstance(value, list) else value


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
            signature = self._hasher.signature(document.text)
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
            "format": _FORMAT,
            "version": _VERSION,
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
            settings["minhash"] = {field: getattr(self._minhash, field) for field in _MINHASH_FIELDS}
        if "sentence" in settings:
            settings["sentence"] = {"span_sentences": self._span_sentences}
        return settings

    def staged_form(self) -> StagedForm:
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


@contextlib.contextmanager
def _shard_records(url: str, records: int | None, storage_options: Mapping[str, Any]) -> Iterator[Iterator[dict]]:
    """The records of an index shard, to be read within the ``with``.

    Raises:
        ConfigurationError: The shard, or a record in it, is damaged (gzip's checksum fails, a line is not a record,
            it holds other than ``records`` records); the message names the shard. A damaged index is bad
            configuration, not bad input: it must not silently remove less.
    """
    try:
        with open_url(url, "rb", storage_options) as raw, gzip.open(raw, "rb") as stream:
            yield _counted_records(stream, url, records)
    except ConfigurationError:
        raise
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise ConfigurationError(f"Dedup index shard {url} is damaged ({reason}): {_REBUILD}.") from None


def _counted_records(lines: Iterable[bytes], url: str, records: int | None) -> Iterator[dict]:
    read = 0
    for line in lines:
        read += 1
        yield orjson.loads(line)
    if records is not None and read != records:
        raise ConfigurationError(
            f"Dedup index shard {url} holds {read} records, not the {records} {MANIFEST_FILE} records: {_REBUILD}."
        )


class _ReadRecordsFn(beam.DoFn):
    """Reads one record file of an index and emits what a dedup step joins on."""

    def __init__(self, kind: str, with_sketches: bool, storage_options: Mapping[str, Any]):
        self._kind = kind
        self._with_sketches = with_sketches
        self._storage_options = storage_options

    def process(self, shard: tuple[int, str, int | None]):
        position, url, records = shard
        with _shard_records(url, records, self._storage_options) as shard_records:
            for record in shard_records:
                if self._kind == "minhash":
                    node = index_node(position, _as_node(record["node"]))
                    value = (node, bytes.fromhex(record["sketch"])) if self._with_sketches else node
                    for band in record["bands"]:
                        yield bytes.fromhex(band), value
                elif self._kind == "sentence":
                    yield bytes.fromhex(record["key"]), (index_node(position, None), -1)
                else:
                    yield bytes.fromhex(record["key"]), IndexMatch(position, record["id"])


class ReadIndexEntries(beam.PTransform):
    """Reads one kind of one or more indexes as the ``(key, entry)`` pairs its dedup step joins on.

    Entries are :class:`IndexMatch` for ``exact`` and ``url``; an
    :func:`index_node` (with the sketch when ``with_sketches``) per band key for
    ``minhash``; ``(index_node(position, None), -1)`` per span for ``sentence``.
    A PBegin transform: apply it to the pipeline.

    Args:
        indexes: The index manifests, in the order they take precedence.
        kind: One of :data:`INDEX_KINDS`; every index must hold it.
        with_sketches: For ``minhash``, pair each node with its sketch.
        storage_options: fsspec filesystem options.

    Raises:
        ConfigurationError: An index does not hold ``kind``. A shard found
            damaged as it is read fails the run with the same error, naming it.
    """

    def __init__(
        self,
        indexes: Sequence[DedupIndexManifest],
        kind: str,
        *,
        with_sketches: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ):
        super().__init__()
        for index in indexes:
            index.entry(kind)
        self._shards = [
            (position, url, records)
            for position, index in enumerate(indexes)
            for url, records in index.shard_records(kind)
        ]
        self._kind = kind
        self._with_sketches = with_sketches
        self._storage_options = dict(storage_options or {})

    def expand(self, pipeline):
        return (
            pipeline
            | "IndexFiles" >> beam.Create(self._shards)
            | "Spread" >> beam.Reshuffle()
            | "ReadRecords" >> beam.ParDo(_ReadRecordsFn(self._kind, self._with_sketches, self._storage_options))
        )


class DedupIndexes:
    """The indexes a dedup run is checked against, in the order they take precedence.

    Reads every manifest when constructed and checks it against its folder
    (:func:`read_index_manifest`), so a missing, unreadable or damaged index
    fails the run before it starts.

    Args:
        paths: Index folders (paths or fsspec URLs).
        storage_options: fsspec filesystem options.

    Raises:
        ValueError: No path, or two indexes with the same name.
        ConfigurationError: A damaged index; the message names the file.
    """

    def __init__(self, paths: Sequence[str], storage_options: Mapping[str, Any] | None = None):
        if not paths:
            raise ValueError("Name at least one dedup index to deduplicate against.")
        self._storage_options = dict(storage_options or {})
        self.manifests = [read_index_manifest(path, storage_options) for path in paths]
        self.names = [manifest.name for manifest in self.manifests]
        if len(set(self.names)) < len(self.names):
            raise ValueError(f"Indexes named the same cannot be told apart in reasons: {', '.join(self.names)}.")

    def reason(self, base: str, position: int) -> str:
        """The ``filter_reason`` of a document removed because the index at ``position`` holds it."""
        return f"{base}_in_{self.names[position]}"

    def read(self, kind: str, *, with_sketches: bool = False) -> ReadIndexEntries:
        """A PBegin transform reading one kind of every index; see :class:`ReadIndexEntries`."""
        return ReadIndexEntries(
            self.manifests, kind, with_sketches=with_sketches, storage_options=self._storage_options
        )
