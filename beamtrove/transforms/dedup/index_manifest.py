"""The manifest of a dedup index, ``index.json``: reading it and checking it against the index folder.

The layout of an index and what its manifest records are in
:mod:`beamtrove.transforms.dedup.index`; :class:`~beamtrove.transforms.dedup.index_build.BuildDedupIndex`
writes the manifest, :class:`~beamtrove.transforms.dedup.index.DedupIndexes` reads it before a run.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from collections.abc import Mapping
from typing import Any

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import filesystem, join
from beamtrove.transforms.dedup.minhash import MinHashConfig
from beamtrove.transforms.manifests import file_sizes, is_count, load_manifest

__all__ = [
    "INDEX_FORMAT",
    "INDEX_KINDS",
    "INDEX_VERSION",
    "MANIFEST_FILE",
    "MINHASH_FIELDS",
    "REBUILD_HINT",
    "DedupIndexManifest",
    "read_index_manifest",
]

MANIFEST_FILE = "index.json"
#: What an index can hold: one kind per dedup step that compares whole keys.
INDEX_KINDS = ("exact", "url", "minhash", "sentence")
INDEX_FORMAT = "beamtrove-dedup-index"
# Version 2: MinHash band keys hold a digest of each band instead of its hashes. Version 3: MinHash and sentence
# keys are of text normalized as DataTrove normalizes it (symbols such as € stay words).
INDEX_VERSION = 3
# The MinHash settings band keys depend on, each with the option of `beamtrove run dedup` that sets it.
_MINHASH_OPTIONS = {
    "n_grams": "minhash_ngrams",
    "num_buckets": "minhash_buckets",
    "hashes_per_bucket": "minhash_hashes_per_bucket",
    "seed": "minhash_seed",
}
MINHASH_FIELDS = tuple(_MINHASH_OPTIONS)
_KIND_SETTINGS = {"exact": (), "url": (), "minhash": MINHASH_FIELDS, "sentence": ("span_sentences",)}
REBUILD_HINT = "rebuild the index with `beamtrove run dedup_index`"

_LOGGER = logging.getLogger(__name__)


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
        differing = [field for field in MINHASH_FIELDS if built[field] != getattr(config, field)]
        if built.get("word_splitter") != config.word_splitter:
            words = {None: "space-separated words"}
            raise ConfigurationError(
                f"Index {self.path} was built with other MinHash words "
                f"({words.get(built.get('word_splitter'), built.get('word_splitter'))}) than this run's "
                f"({words.get(config.word_splitter, config.word_splitter)}): run with the --word_splitter it was "
                "built with, or rebuild the index with this run's."
            )
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
    (:class:`~beamtrove.transforms.dedup.index.ReadIndexEntries`). Besides
    ``index.json`` this lists the folder once and reads no shard: it costs the
    same for an index of any size.

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
        format_name=INDEX_FORMAT,
        version=INDEX_VERSION,
        index="dedup index",
        rebuild=REBUILD_HINT,
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
                    f"Dedup index shard {url} is missing ({MANIFEST_FILE} lists it): {REBUILD_HINT}, or copy the "
                    "whole index folder."
                )
            if index.shards and size != index.shards[file]["bytes"]:
                raise ConfigurationError(
                    f"Dedup index shard {url} holds {size} bytes, not the {index.shards[file]['bytes']} "
                    f"{MANIFEST_FILE} records: it was changed or cut short; {REBUILD_HINT}."
                )
            if not size:
                raise ConfigurationError(f"Dedup index shard {url} is empty: {REBUILD_HINT}.")
    if not index.shards:
        _LOGGER.warning(
            "Dedup index %s records no shard sizes (an earlier beamtrove wrote it): only that its shards exist is "
            "checked before the run; %s to have their sizes and records checked too.",
            index.path,
            REBUILD_HINT,
        )
