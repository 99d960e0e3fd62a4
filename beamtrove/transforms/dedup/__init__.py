"""Dedup: exact content, URL, MinHash near duplicates (with distributed connected components) and sentence spans."""

from beamtrove.transforms.dedup.components import Component, ConnectedComponents
from beamtrove.transforms.dedup.exact import ExactDedup, UrlDedup, normalize_url
from beamtrove.transforms.dedup.keep import ClusterMember, DedupOutputs, KeepOrder
from beamtrove.transforms.dedup.minhash import (
    MinHashClusters,
    MinHashConfig,
    MinHashDedup,
    MinHasher,
    RemoveClustered,
    sketch_agreement,
)
from beamtrove.transforms.dedup.sentences import SentenceDedup, split_sentences
from beamtrove.transforms.dedup.shingles import normalize_text, shingle_hashes

__all__ = [
    "ClusterMember",
    "Component",
    "ConnectedComponents",
    "DedupOutputs",
    "ExactDedup",
    "KeepOrder",
    "MinHashClusters",
    "MinHashConfig",
    "MinHashDedup",
    "MinHasher",
    "RemoveClustered",
    "SentenceDedup",
    "UrlDedup",
    "normalize_text",
    "normalize_url",
    "shingle_hashes",
    "sketch_agreement",
    "split_sentences",
]
