"""Exact-content and URL dedup."""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.dedup import ClusterMember, ExactDedup, UrlDedup, normalize_url


def _ids(pcoll, label: str):
    return pcoll | label >> beam.Map(lambda d: d.id)


def test_exact_dedup_keeps_the_smallest_id_of_each_text(reviews):
    copies = [dataclasses.replace(reviews[n], id=f"copy-{n}") for n in (0, 0, 1)]
    copies[1] = dataclasses.replace(copies[1], id="copy-0b")
    reformatted = Document(reviews[2].text.upper().replace(" ", "  "), "review-002-shouted")
    with TestPipeline() as pipeline:
        documents = pipeline | beam.Create([*reviews[:10], *copies, reformatted])
        raw = documents | "Raw" >> ExactDedup()
        normalized = documents | "Normalized" >> ExactDedup(normalized=True)
        # "copy-0" < "review-000": the copies are kept and the originals removed.
        assert_that(_ids(raw.excluded, "RawIds"), equal_to(["review-000", "copy-0b", "review-001"]), label="Raw")
        assert_that(
            raw.clusters,
            equal_to(
                [
                    ClusterMember("copy-0b", "copy-0", 3),
                    ClusterMember("review-000", "copy-0", 3),
                    ClusterMember("review-001", "copy-1", 2),
                ]
            ),
            label="RawClusters",
        )
        assert_that(
            _ids(normalized.excluded, "NormalizedIds"),
            equal_to(["review-000", "copy-0b", "review-001", "review-002-shouted"]),
            label="Normalized",
        )
        assert_that(raw.kept | beam.combiners.Count.Globally(), equal_to([11]), label="KeptCount")


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("HTTP://www.Example.com:80/a/b/?y=2&x=1#top", "http://example.com/a/b?x=1&y=2"),
        ("https://example.com:443", "https://example.com"),
        ("https://example.com:8443/path/", "https://example.com:8443/path"),
        ("http://[::1]:99999/", "http://[::1]:99999/"),
        ("  not a url  ", "not a url"),
    ],
)
def test_normalize_url(url, normalized):
    assert normalize_url(url) == normalized


def test_exact_dedup_keeps_by_priority_in_large_groups(reviews):
    dated = [dataclasses.replace(reviews[7], id=f"mirror-{n:03d}", metadata={"score": n % 37}) for n in range(300)]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(dated) | ExactDedup(keep_by="-score")
        # Scores 36 go to ids 36, 73, ...: the smallest id among the highest scores survives.
        assert_that(_ids(result.kept, "KeptIds"), equal_to(["mirror-036"]))
        sizes = result.clusters | beam.Map(lambda member: (member.kept_id, member.cluster_size))
        assert_that(sizes | beam.Distinct(), equal_to([("mirror-036", 300)]), label="Sizes")


def test_url_dedup_keeps_by_priority_and_passes_documents_without_url(reviews):
    documents = [
        dataclasses.replace(reviews[0], metadata={"url": "http://www.site.com/page/", "date": "2024-01-01"}),
        dataclasses.replace(reviews[1], metadata={"url": "HTTP://site.com/page#comments", "date": "2024-06-01"}),
        dataclasses.replace(reviews[2], metadata={"url": "http://site.com/other"}),
        reviews[3],
        dataclasses.replace(reviews[4], metadata={"url": ""}),
    ]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | UrlDedup(keep_by="-date")
        removed = result.excluded | beam.Map(lambda d: (d.id, d.metadata["filter_reason"], d.metadata["duplicate_of"]))
        assert_that(removed, equal_to([("review-000", "url_duplicate", "review-001")]))
        kept = ["review-001", "review-002", "review-003", "review-004"]
        assert_that(_ids(result.kept, "KeptIds"), equal_to(kept), label="Kept")
