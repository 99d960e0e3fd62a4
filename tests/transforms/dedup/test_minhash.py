"""MinHash LSH dedup on real movie reviews and copies of them."""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.dedup import ClusterMember, MinHashConfig, MinHashDedup, MinHasher, sketch_agreement
from tests.conftest import near_copy


def test_signatures_are_deterministic_and_shaped_by_the_config(reviews):
    text = reviews[0].text
    signature = MinHasher(MinHashConfig()).signature(text)
    assert signature.shape == (14, 8) and signature.dtype == np.uint64
    assert np.array_equal(signature, MinHasher(MinHashConfig()).signature(text))
    assert (signature < (1 << 61) - 1).all()
    assert not np.array_equal(signature, MinHasher(MinHashConfig(seed=2)).signature(text))
    assert MinHasher(MinHashConfig(num_buckets=20, hashes_per_bucket=5)).signature(text).shape == (20, 5)
    assert MinHasher(MinHashConfig()).signature("too short to shingle") is None


def test_signature_agreement_estimates_jaccard_similarity(reviews):
    hasher = MinHasher(MinHashConfig(num_buckets=64, hashes_per_bucket=8))
    text = reviews[1].text
    words = text.split()
    # The second half of the review against the whole: Jaccard of the 5-gram sets is about one half.
    half = " ".join(words[len(words) // 2 :])
    agreement = sketch_agreement(MinHasher.sketch(hasher.signature(text)), MinHasher.sketch(hasher.signature(half)))
    assert 0.4 < agreement < 0.6
    assert MinHashConfig().match_probability(0.85) == pytest.approx(0.99, abs=0.005)


@pytest.mark.parametrize("config", [{"n_grams": 0}, {"num_buckets": 0}, {"threshold": 1.5}, {"threshold": 0}])
def test_bad_configs_fail_at_construction(config):
    with pytest.raises(ValueError, match="MinHash"):
        MinHashConfig(**config)


def _with_copies(reviews: list[Document]) -> tuple[list[Document], set[str]]:
    """The reviews plus exact copies of 5, near copies of 5 and a heavily edited copy.

    The near copies have 1 % of their words replaced: their 5-gram Jaccard similarities to the originals
    are 0.86 to 0.93, where the default LSH finds a pair with probability 0.99 or more.
    """
    copies = [dataclasses.replace(reviews[n], id=f"{reviews[n].id}-exact") for n in range(5)]
    copies += [Document(near_copy(reviews[n].text, 0.01, seed=n), f"{reviews[n].id}-near") for n in range(10, 15)]
    rewritten = Document(near_copy(reviews[20].text, 0.3, seed=1), "review-020-rewritten")
    return [*reviews, *copies, rewritten], {copy.id for copy in copies}


def test_exact_and_near_copies_are_removed_and_their_originals_kept(reviews):
    documents, copies = _with_copies(reviews)
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | MinHashDedup()
        assert_that(result.excluded | "ExcludedIds" >> beam.Map(lambda d: d.id), equal_to(sorted(copies)))
        reasons = result.excluded | beam.Map(lambda d: (d.metadata["filter_reason"], d.metadata["duplicate_of"]))
        assert_that(
            reasons, equal_to([("minhash_duplicate", copy.rsplit("-", 1)[0]) for copy in copies]), label="Reasons"
        )
        members = [ClusterMember(copy, copy.rsplit("-", 1)[0], 2) for copy in copies]
        assert_that(result.clusters, equal_to(members), label="ClusterMap")
        # Every kept document carries its cluster size: 2 for the originals of the copies, 1 for the rest.
        roots = {copy.rsplit("-", 1)[0] for copy in copies}
        sizes = result.kept | beam.Map(lambda d: (d.id, d.metadata.get("minhash_cluster_size")))
        expected = [(d.id, 2 if d.id in roots else 1) for d in documents if d.id not in copies]
        assert_that(sizes, equal_to(expected), label="KeptSizes")
        assert_that(result.kept | "Count" >> beam.combiners.Count.Globally(), equal_to([201]), label="KeptCount")


def test_keep_by_keeps_the_earliest_copy(reviews):
    original = dataclasses.replace(reviews[3], metadata={"date": "2024-05-02"})
    earlier = Document(near_copy(original.text, 0.01, seed=3), "zz-mirror", metadata={"date": "2021-01-01"})
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create([original, earlier, *reviews[4:40]]) | MinHashDedup(keep_by="date")
        assert_that(
            result.excluded | beam.Map(lambda d: (d.id, d.metadata["duplicate_of"])),
            equal_to([(original.id, "zz-mirror")]),
        )


def _overlapping_pair(reviews: list[Document]) -> tuple[Document, Document, float]:
    """Two documents made of one review plus a different short one, that share a band but agree < 0.9."""
    hasher = MinHasher(MinHashConfig())
    base = max(reviews[:50], key=lambda d: len(d.text))
    tails = sorted(reviews[50:], key=lambda d: len(d.text))[:40]
    first = Document(base.text + "\n" + tails[0].text, "pair-a")
    first_signature = hasher.signature(first.text)
    for tail in tails[1:]:
        second = Document(base.text + "\n" + tail.text, "pair-b")
        second_signature = hasher.signature(second.text)
        shared = set(MinHasher.band_keys(first_signature)) & set(MinHasher.band_keys(second_signature))
        agreement = sketch_agreement(MinHasher.sketch(first_signature), MinHasher.sketch(second_signature))
        if shared and agreement < 0.85:
            return first, second, agreement
    raise AssertionError("no pair of the reviews shares a band with a low agreement")


def test_a_threshold_rejects_links_between_documents_that_only_share_a_band(reviews):
    first, second, agreement = _overlapping_pair(reviews)
    assert agreement > 0.5
    with TestPipeline() as pipeline:
        documents = pipeline | beam.Create([first, second])
        linked = documents | "Default" >> MinHashDedup()
        verified = documents | "Verified" >> MinHashDedup(MinHashConfig(threshold=0.9))
        assert_that(linked.excluded | "LinkedIds" >> beam.Map(lambda d: d.id), equal_to(["pair-b"]), label="Linked")
        assert_that(verified.excluded, equal_to([]), label="Verified")


def test_documents_too_short_to_shingle_are_kept(reviews):
    short = [Document("Click here to subscribe", f"short-{n}") for n in range(3)]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create([*short, *reviews[:5]]) | MinHashDedup()
        assert_that(result.kept | beam.Map(lambda d: d.id), equal_to([d.id for d in [*short, *reviews[:5]]]))
