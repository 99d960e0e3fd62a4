"""Dedup: exact content, URL, Bloom-filter n-gram overlap, MinHash near duplicates (with distributed connected
components), sentence spans and exact substrings.

Each can also run against dedup indexes of earlier datasets (:mod:`beamtrove.transforms.dedup.index`).
"""

from beamtrove.transforms.dedup.bloom import BloomDedup, BloomDedupConfig, bloom_shingles
from beamtrove.transforms.dedup.components import Component, ConnectedComponents
from beamtrove.transforms.dedup.exact import ExactDedup, UrlDedup, key_digest, normalize_url
from beamtrove.transforms.dedup.index import (
    INDEX_KINDS,
    BuildDedupIndex,
    DedupIndexes,
    DedupIndexManifest,
    IndexMatch,
    ReadIndexEntries,
    read_index_manifest,
)
from beamtrove.transforms.dedup.keep import ClusterMember, DedupOutputs, DedupStep, KeepOrder, index_node, input_node
from beamtrove.transforms.dedup.minhash import (
    MinHashClusters,
    MinHashConfig,
    MinHashDedup,
    MinHasher,
    RemoveClustered,
    sketch_agreement,
)
from beamtrove.transforms.dedup.sentences import SentenceDedup, span_digests, split_sentences
from beamtrove.transforms.dedup.shingles import shingle_hashes
from beamtrove.transforms.dedup.substrings import SubstringDedup

__all__ = [
    "INDEX_KINDS",
    "BloomDedup",
    "BloomDedupConfig",
    "BuildDedupIndex",
    "ClusterMember",
    "Component",
    "ConnectedComponents",
    "DedupIndexManifest",
    "DedupIndexes",
    "DedupOutputs",
    "DedupStep",
    "ExactDedup",
    "IndexMatch",
    "KeepOrder",
    "MinHashClusters",
    "MinHashConfig",
    "MinHashDedup",
    "MinHasher",
    "ReadIndexEntries",
    "RemoveClustered",
    "SentenceDedup",
    "SubstringDedup",
    "UrlDedup",
    "bloom_shingles",
    "index_node",
    "input_node",
    "key_digest",
    "normalize_url",
    "read_index_manifest",
    "shingle_hashes",
    "sketch_agreement",
    "span_digests",
    "split_sentences",
]
