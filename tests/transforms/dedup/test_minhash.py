"""MinHash LSH dedup on real movie reviews and copies of them."""

from __future__ import annotations

import collections
import dataclasses
import importlib.util

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.pipeline import PipelineVisitor
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.assets import asset_present
from beamtrove.document import Document
from beamtrove.execution.build import build
from beamtrove.metrics import collect_stats
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.text import normalize_text, word_splitter
from beamtrove.transforms.dedup import (
    ClusterMember,
    KeepOrder,
    MinHashClusters,
    MinHashConfig,
    MinHashDedup,
    MinHasher,
    sketch_agreement,
)
from beamtrove.transforms.dedup.shingles import shingle_hashes, word_shingle_hashes
from beamtrove.transforms.stages import applied_outputs
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


def test_a_language_splitter_shingles_each_document_in_its_language_s_words(udhr_texts):
    if not asset_present("word_tokenizers") or importlib.util.find_spec("pythainlp") is None:
        pytest.skip("needs the fetched word tokenizer table and pythainlp (pip install 'beamtrove[multilingual]')")
    thai = udhr_texts["tha"]
    normalized = normalize_text(thai)
    # By default, the normalized text's space-separated words: 349 runs of Thai, as before.
    spaces = MinHasher(MinHashConfig())
    assert np.array_equal(spaces.shingles(thai, "tha_Thai"), shingle_hashes(normalized, 5))
    assert len(spaces.shingles(thai)) == 349 - 4
    # With the language splitter, PyThaiNLP's 2,506 words of the normalized text, as DataTrove's MinHash given
    # language="tha_Thai" splits its simplified text.
    by_language = MinHasher(MinHashConfig(word_splitter="language"))
    words = word_splitter("language", "tha_Thai")(normalized)
    assert len(words) == 2506
    assert np.array_equal(by_language.shingles(thai, "tha_Thai"), word_shingle_hashes(words, 5))
    # A document without a language gets the fallback's words (spaCy's xx: the spaces' runs, less punctuation).
    assert len(by_language.shingles(thai)) != len(by_language.shingles(thai, "tha_Thai"))
    assert not np.array_equal(by_language.signature(thai), by_language.signature(thai, "tha_Thai"))
    # A fixed language splits every document alike.
    assert np.array_equal(
        MinHasher(MinHashConfig(word_splitter="tha_Thai")).signature(thai, "eng_Latn"),
        by_language.signature(thai, "tha_Thai"),
    )


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


class _Applied(beam.PTransform):
    """A step's staged form applied in one pipeline, under a label of its own."""

    def __init__(self, form):
        super().__init__()
        self._form = form

    def expand(self, documents):
        return applied_outputs(self._form, documents)


class _Labels(PipelineVisitor):
    def __init__(self):
        self.labels = []

    def visit_transform(self, node):
        self.labels.append(node.full_label)

    def enter_composite_transform(self, node):
        self.labels.append(node.full_label)


def test_over_partitions_the_removal_looks_components_up_and_decides_as_the_join(reviews):
    # A staged task's Remove streams its partition's documents past its components: grouped with them, the whole
    # partition was held at once, the largest task of a staged run.
    documents, copies = _with_copies(reviews)
    pipeline = TestPipeline()
    created = pipeline | beam.Create(documents)
    for label, partitions in (("Joined", 1), ("LookedUp", 3)):
        kept, excluded, clusters = created | label >> _Applied(MinHashDedup().staged_form(partitions))
        ids = excluded | f"{label}Ids" >> beam.Map(lambda d: (d.id, d.metadata["duplicate_of"]))
        assert_that(ids, equal_to([(copy, copy.rsplit("-", 1)[0]) for copy in copies]), label=f"{label}Excluded")
        assert_that(kept | f"{label}Count" >> beam.combiners.Count.Globally(), equal_to([201]), label=f"{label}Kept")
        members = [ClusterMember(copy, copy.rsplit("-", 1)[0], 2) for copy in copies]
        assert_that(clusters, equal_to(members), label=f"{label}Clusters")
    labels = _Labels()
    pipeline.visit(labels)
    assert any(label.startswith("Joined/") and "JoinByNode" in label for label in labels.labels)
    assert not any(label.startswith("LookedUp/") and "JoinByNode" in label for label in labels.labels)
    pipeline.run().wait_until_finish()


@pytest.mark.slow
@pytest.mark.parametrize("per_language", [False, True])
def test_per_language_links_only_documents_of_the_same_language(udhr_texts, per_language):
    # The same texts labelled in two languages (as two language IDs might read one page): within each language one
    # copy goes; across languages the copies stay when each language is deduplicated on its own.
    german, french = udhr_texts["deu"], udhr_texts["fra"]
    labelled = [
        Document(text, f"{name}-{language}", metadata={"language": language, "language_script": "Latn"})
        for name, text in (("german", german), ("french", french))
        for language in ("deu", "fra")
    ]
    copies = [
        Document(
            near_copy(german, 0.01, seed=1), "german-deu-near", metadata={"language": "deu", "language_script": "Latn"}
        )
    ]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(labelled + copies) | MinHashDedup(per_language=per_language)
        removed = result.excluded | beam.Map(lambda d: (d.id, d.metadata["duplicate_of"]))
        expected = [("german-deu-near", "german-deu")]
        if not per_language:
            expected += [("german-fra", "german-deu"), ("french-fra", "french-deu")]
        assert_that(removed, equal_to(expected))


def test_per_language_dedup_refuses_indexes():
    with pytest.raises(ValueError, match="cannot run against dedup indexes"):
        MinHashClusters(against=object(), per_language=True)


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


@pytest.mark.slow
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


def _reference_clusters(documents: list[Document], config: MinHashConfig) -> dict[str, tuple[str, int]]:
    """Every document that shares a whole band with another, by plain union-find: id -> (root id, size)."""
    hasher = MinHasher(config)
    parent: dict[str, str] = {}

    def root_of(node: str) -> str:
        while parent[node] != node:
            node = parent[node]
        return node

    by_band: dict[bytes, list[str]] = {}
    for document in documents:
        signature = hasher.signature(document.text)
        for bucket, band in enumerate(signature):
            by_band.setdefault(bytes([bucket]) + band.tobytes(), []).append(document.id)
    for members in by_band.values():
        for member in members:
            parent.setdefault(member, member)
        for member in members[1:]:
            first, other = sorted((root_of(members[0]), root_of(member)))
            parent[other] = first
    clustered = {node for members in by_band.values() if len(members) > 1 for node in members}
    roots = {node: root_of(node) for node in clustered}
    sizes = collections.Counter(roots.values())
    return {node: (root, sizes[root]) for node, root in roots.items()}


@pytest.mark.slow
def test_copies_of_one_signature_link_to_its_first_document_and_clusters_equal_every_shared_band(reviews):
    documents, _ = _with_copies(reviews)
    # Three more copies of one review: four documents with one signature, which only the first brings to the bands.
    documents += [dataclasses.replace(reviews[7], id=f"{reviews[7].id}-copy-{n}") for n in range(3)]
    expected = _reference_clusters(documents, MinHashConfig())
    assert len(expected) == 24 and expected["review-007-copy-2"] == ("review-007", 4)
    pipeline = TestPipeline()
    components = pipeline | beam.Create(documents) | MinHashClusters()
    assert_that(
        components
        | beam.Map(
            lambda component: (
                KeepOrder.document_id(component.node),
                (KeepOrder.document_id(component.root), component.size),
            )
        ),
        equal_to(sorted(expected.items())),
    )
    result = pipeline.run()
    result.wait_until_finish()
    stats = collect_stats(result, pipeline)
    # Five exact copies of five reviews and three of one: 8 documents linked by signature, not by 14 bands each.
    assert stats["minhash"]["counters"]["identical_signatures"] == 8
    assert stats["minhash"]["distributions"]["signature_group_size"]["max"] == 4


def test_no_side_input_of_the_dedup_pipeline_grows_with_the_documents(tmp_path):
    spec = pipeline_spec("dedup")
    options = parse(
        spec,
        [
            "--input",
            str(tmp_path / "*.jsonl"),
            "--output",
            str(tmp_path / "out"),
            "--dedup",
            "exact,url,bloom,minhash,sentence",
            "--minhash_threshold",
            "0.8",
        ],
    )
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "text": "one two three four five six"}\n')
    pipeline = build(spec, options, inspect_output=False).pipeline
    side_inputs = []

    class _SideInputs(PipelineVisitor):
        def visit_transform(self, applied):
            side_inputs.extend((applied.full_label, type(view).__name__) for view in applied.side_inputs)

    pipeline.visit(_SideInputs())
    # CombineGlobally reads its one combined value back as a list of one. Bloom's filter (of a configured size) is a
    # singleton; each connected-components round after the first reads the counts of the bundles of the round before
    # that changed links (its large and its small star), as iterables of which it takes the first: nothing of the
    # documents themselves.
    ours = [(label, kind) for label, kind in side_inputs if not label.endswith("/InjectDefault")]
    rounds = [(label, kind) for label, kind in ours if "minhash/Round" in label]
    assert {kind for _, kind in rounds} == {"AsIter"} and len(rounds) == 2 * 29, rounds
    assert {kind for label, kind in ours if (label, kind) not in rounds} == {"AsSingleton"}, ours
