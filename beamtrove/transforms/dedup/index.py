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

This module reads indexes for a dedup run (:class:`DedupIndexes`);
:mod:`beamtrove.transforms.dedup.index_build` writes one, and
:mod:`beamtrove.transforms.dedup.index_manifest` reads and checks its
manifest.
"""

from __future__ import annotations

import contextlib
import gzip
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import orjson

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import open_url
from beamtrove.transforms.dedup.index_build import BuildDedupIndex
from beamtrove.transforms.dedup.index_manifest import (
    INDEX_KINDS,
    MANIFEST_FILE,
    REBUILD_HINT,
    DedupIndexManifest,
    read_index_manifest,
)
from beamtrove.transforms.dedup.keep import index_node

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


class IndexMatch(NamedTuple):
    """A key an index holds: which index (its position among those named) and the document it came from."""

    position: int
    id: str


def _as_node(value: Any) -> Any:
    """A node read back from JSON: its arrays are the tuples they were written from."""
    return tuple(_as_node(item) for item in value) if isinstance(value, list) else value


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
        raise ConfigurationError(f"Dedup index shard {url} is damaged ({reason}): {REBUILD_HINT}.") from None


def _counted_records(lines: Iterable[bytes], url: str, records: int | None) -> Iterator[dict]:
    read = 0
    for line in lines:
        read += 1
        yield orjson.loads(line)
    if records is not None and read != records:
        raise ConfigurationError(
            f"Dedup index shard {url} holds {read} records, not the {records} {MANIFEST_FILE} records: {REBUILD_HINT}."
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
