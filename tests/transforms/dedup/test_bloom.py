"""Bloom-filter dedup on real movie reviews and State of the Union addresses, against a sequential exact reference."""

from __future__ import annotations

import collections
import dataclasses
import math
import random

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.layout import EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.text import normalize_text
from beamtrove.transforms.dedup import bloom
from beamtrove.transforms.dedup.bloom import BloomDedup, BloomDedupConfig, bloom_shingles
from beamtrove.transforms.stages import SLICED, apply_stages
from tests.conftest import near_copy, run_and_collect


def _words(text: str) -> list[str]:
    return text.split()


@pytest.fixture(scope="module")
def corpus(reviews, state_union) -> list[Document]:
    """200 real reviews and 3 addresses, with near copies, an exact copy, a merge and partial copies of them."""
    documents = list(reviews)
    for number, fraction in enumerate([0.002, 0.01, 0.02, 0.05] * 5):
        near = near_copy(reviews[number].text, fraction, seed=number)
        documents.append(Document(near, f"review-{number:03d}-near"))
    # Sorts before the original: the copy is the one kept.
    documents.append(Document(reviews[50].text, "copy-050"))
    documents.append(Document(reviews[60].text + "\n" + reviews[61].text, "review-999-merged"))
    speeches = [state_union[name] for name in ("1965-Johnson-1", "1984-Reagan", "2002-GWBush")]
    documents += [Document(text, f"speech-{number}") for number, text in enumerate(speeches)]
    unseen = _words(state_union["1990-Bush"])[2000:]
    for share in (0.7, 0.9):
        # The first address's opening, padded with a slice of another address that no other document holds.
        head = _words(speeches[0])[: int(share * 400)]
        tail = unseen[int(share * 1000) :][: 400 - len(head)]
        documents.append(Document(" ".join(head + tail), f"speech-reuse-{share}"))
    return documents


def _sequential_removals(documents) -> list[str]:
    """The rule as a plain loop in id order with a set of every shingle seen so far (13-grams, threshold 0.8)."""
    seen = set()
    removed = []
    for document in sorted(documents, key=lambda d: d.id):
        shingles = bloom_shingles(document.text).tolist()
        if shingles and sum(shingle in seen for shingle in shingles) / len(shingles) > 0.8:
            removed.append(document.id)
        seen.update(shingles)
    return removed


# The reference on `corpus`: near copies with 0.2% to 2% of their words replaced (not all: a replaced word
# breaks up to 13 shingles), the original of the copy that sorts first, the merge of two reviews and the
# 90% reuse of an address (the 70% one repeats less than the threshold).
_REMOVED = [
    "review-000-near",
    "review-001-near",
    "review-004-near",
    "review-005-near",
    "review-008-near",
    "review-012-near",
    "review-013-near",
    "review-016-near",
    "review-017-near",
    "review-050",
    "review-999-merged",
    "speech-reuse-0.9",
]


def test_the_reference_removes_what_it_should(corpus):
    assert _sequential_removals(corpus) == sorted(_REMOVED)


@pytest.mark.parametrize(
    "config",
    [
        BloomDedupConfig(fpr=None),
        BloomDedupConfig(fpr=0, partitions=1),
        BloomDedupConfig(fpr=0.01, expected_shingles=200_000),
        # 512 bits for ~130,000 shingles: every bit set, every shingle a candidate.
        BloomDedupConfig(filter_bytes=64, expected_shingles=200_000, partitions=3),
    ],
    ids=["exact", "exact-one-partition", "fpr-0.01", "saturated"],
)
def test_bloom_dedup_equals_exact_membership_at_any_filter_size(corpus, config):
    shuffled = corpus[::-1]
    random.Random(3).shuffle(shuffled)
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(shuffled, reshuffle=True) | BloomDedup(config)
        assert_that(result.excluded | beam.Map(lambda d: d.id), equal_to(_REMOVED), label="Removed")
        kept_count = result.kept | beam.combiners.Count.Globally()
        assert_that(kept_count, equal_to([len(corpus) - len(_REMOVED)]), label="KeptCount")
        assert_that(result.clusters, equal_to([]), label="NoClusters")


@pytest.mark.parametrize(
    ("config", "partitions", "slices"),
    [
        # 16 slices by default: over 3 partitions, 18, 6 each; over 20, one each.
        (BloomDedupConfig(expected_shingles=200_000), 3, 18),
        (BloomDedupConfig(expected_shingles=200_000), 20, 20),
        (BloomDedupConfig(fpr=0, partitions=4), 2, 4),
        (BloomDedupConfig(fpr=0, partitions=4), 1, 4),
    ],
)
def test_the_staged_form_cuts_candidates_into_slices_every_partition_gets_as_many_of(
    corpus, config, partitions, slices
):
    form = BloomDedup(config).staged_form(partitions)
    assert [stage.writes["candidates"] for stage in form.stages if "candidates" in stage.writes] == [SLICED]
    with TestPipeline() as pipeline:
        datasets = apply_stages(form, pipeline | beam.Create(corpus))
        keys = datasets["candidates"] | beam.Map(lambda record: record[0]) | beam.Distinct()
        assert_that(keys, equal_to(list(range(slices))), label="Slices")
        removed = datasets[EXCLUDED] | beam.Map(lambda document: document.id)
        assert_that(removed, equal_to(_REMOVED), label="Removed")


def test_removed_documents_say_what_they_repeat(corpus):
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(corpus) | BloomDedup()
        rows = result.excluded | beam.Map(
            lambda d: (
                d.id,
                d.metadata["duplicate_of"],
                d.metadata["bloom_duplicate_fraction"],
                d.metadata["filter_reason"],
            )
        )
        chosen = rows | beam.Filter(lambda row: not row[0].endswith("-near"))
        assert_that(
            chosen,
            equal_to(
                [
                    ("review-050", "copy-050", 1.0, "bloom_duplicate"),
                    # Every shingle but the 12 across the junction was in review-060 or review-061; 061 is longer.
                    ("review-999-merged", "review-061", 0.992762, "bloom_duplicate"),
                    ("speech-reuse-0.9", "speech-0", 0.898219, "bloom_duplicate"),
                ]
            ),
        )


def _decisions(documents, label: str):
    return documents | label >> beam.Map(
        lambda d: (d.id, (d.metadata.get("duplicate_of"), d.metadata.get("bloom_duplicate_fraction")))
    )


def test_over_partitions_the_decisions_look_repeats_up_and_decide_as_the_join(corpus):
    with TestPipeline() as pipeline:
        documents = pipeline | "Corpus" >> beam.Create(corpus)
        joined = documents | "Joined" >> BloomDedup()
        datasets = apply_stages(BloomDedup().staged_form(3), documents)
        assert_that(datasets[EXCLUDED] | "Ids" >> beam.Map(lambda d: d.id), equal_to(_REMOVED), label="Removed")
        differing = (
            {
                "joined": _decisions(joined.excluded, "JoinedDecisions"),
                "staged": _decisions(datasets[EXCLUDED], "Decisions"),
            }
            | "ById" >> beam.CoGroupByKey()
            | "Differing" >> beam.Filter(lambda kv: list(kv[1]["joined"]) != list(kv[1]["staged"]))
        )
        assert_that(differing, equal_to([]), label="SameDecisions")
        kept = (datasets["decided"], datasets["unshingled"]) | beam.Flatten() | "KeptIds" >> beam.Map(lambda d: d.id)
        assert_that(kept, equal_to([d.id for d in corpus if d.id not in _REMOVED]), label="Kept")
        # A task over one partition streams its documents past that partition's repeats: no join holds them.
        assert [label for label in pipeline.applied_labels if label.endswith("JoinRepeats")] == ["Joined/JoinRepeats"]


def test_counters_give_the_filter_and_its_measured_false_positives(corpus):
    config = BloomDedupConfig(fpr=0.05, expected_shingles=150_000)
    assert (config.bits, config.hashes) == (935_284, 4)
    stats = run_and_collect(lambda p: p | beam.Create(corpus) | BloomDedup(config))
    counters = stats["bloom"]["counters"]
    assert counters == {
        "in": 227,
        "out": 215,
        "dropped.bloom_duplicate": 12,
        "chars_in": sum(len(document.text) for document in corpus),
        "chars_out": 838_514,
        "shingle_occurrences": 150_446,
        "shingles": 150_432,
        "candidates": 29_267,
        "shared_shingles": 12_056,
        "unshared_candidates": 4_877,
        "filter_bits": 935_284,
        "filter_hashes": 4,
        "filter_bits_set": 417_253,
        "filter_bits_shared": 137_248,
    }
    # The candidates of one document only are the filter's false positives: 4,877 of 126,042 such shingles.
    unshared = counters["shingles"] - counters["candidates"] + counters["unshared_candidates"]
    assert counters["unshared_candidates"] / unshared == pytest.approx(0.0387, abs=1e-4)
    assert config.expected_fpr == pytest.approx(0.0503, abs=1e-4)


def test_a_copy_is_removed_and_its_original_kept_whatever_the_order(reviews):
    original = reviews[7]
    copies = [
        Document(original.text, "review-007-copy"),
        Document(original.text.upper().replace(" ", "  "), "review-007-shouted"),
    ]
    documents = [*reviews[:20], *copies]
    for label, order in (("Forward", documents), ("Backward", documents[::-1])):
        with TestPipeline() as pipeline:
            result = pipeline | beam.Create(order, reshuffle=True) | BloomDedup(BloomDedupConfig(partitions=5))
            sources = result.excluded | beam.Map(lambda d: (d.id, d.metadata["duplicate_of"]))
            assert_that(
                sources,
                equal_to([("review-007-copy", "review-007"), ("review-007-shouted", "review-007")]),
                label=label,
            )


def test_keep_by_decides_which_copy_is_earlier(reviews):
    documents = [
        dataclasses.replace(reviews[3], metadata={"score": 1}),
        Document(reviews[3].text, "review-003-better", metadata={"score": 9}),
        reviews[4],
    ]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | BloomDedup(keep_by="-score")
        assert_that(result.excluded | beam.Map(lambda d: d.id), equal_to(["review-003"]))


def test_documents_without_shingles_and_repeats_inside_one_document(reviews):
    words = [word for word in _words(reviews[9].text) if word.isalpha()]
    sentence = " ".join(words[:20])
    documents = [
        Document("", "empty"),
        Document(" ".join(words[:12]), "twelve-words"),
        Document("!!! ... ???", "punctuation-only"),
        # The same 20 words five times: repeats inside a document do not count, so it stays.
        Document(" ".join([sentence] * 5), "self-repeating"),
        # All of its 8 shingles occur in the document before it.
        Document(sentence, "z-later-sentence"),
    ]

    def build(pipeline):
        result = pipeline | beam.Create(documents) | BloomDedup()
        sources = result.excluded | beam.Map(lambda d: (d.id, d.metadata["duplicate_of"]))
        assert_that(sources, equal_to([("z-later-sentence", "self-repeating")]))

    counters = run_and_collect(build)["bloom"]["counters"]
    assert (counters["in"], counters["out"], counters["no_shingles"], counters["shingle_occurrences"]) == (5, 4, 3, 96)


def test_no_documents():
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create([], reshuffle=False).with_output_types(Document) | BloomDedup()
        assert_that(result.kept, equal_to([]), label="Kept")
        assert_that(result.excluded, equal_to([]), label="Excluded")


def test_threshold_is_a_strict_bound(reviews):
    # One-word shingles: repeats are words seen before. The second document repeats 4 of its 5 words.
    words = [word for word in _words(reviews[11].text) if word.isalpha()]
    distinct = list(dict.fromkeys(words))
    first = Document(" ".join(distinct[:4]), "a")
    second = Document(" ".join([*distinct[:4], distinct[10]]), "b")
    for threshold, removed in ((0.8, []), (0.79, ["b"]), (0.0, ["b"]), (1.0, [])):
        config = BloomDedupConfig(n_grams=1, threshold=threshold, fpr=None)
        with TestPipeline() as pipeline:
            result = pipeline | beam.Create([first, second]) | BloomDedup(config)
            assert_that(result.excluded | beam.Map(lambda d: d.id), equal_to(removed))


def test_bloom_shingles_counts_every_n_gram_with_repeats(reviews):
    text = reviews[12].text
    words = normalize_text(text).split()
    shingles = bloom_shingles(text, 13)
    assert len(shingles) == len(words) - 12
    assert len(bloom_shingles(" ".join(words[:12]), 13)) == 0
    doubled = bloom_shingles(" ".join(words[:13] * 2), 13)
    assert len(doubled) == 14 and doubled[0] == doubled[13]


def test_spacy_words(reviews):
    pytest.importorskip("spacy")
    # spaCy's English exceptions split "cannot" in two; beamtrove's words keep it whole.
    assert len(bloom_shingles("we cannot stay", 1, "spacy")) == 4
    assert len(bloom_shingles("we cannot stay", 1)) == 3


def test_filter_size_derivation():
    config = BloomDedupConfig(fpr=0.01, expected_shingles=1_000_000)
    assert (config.bits, config.hashes, config.shingle_partitions) == (9_585_059, 7, 16)
    assert config.expected_fpr == pytest.approx(0.01, rel=0.01)
    sized = BloomDedupConfig(filter_bytes=1 << 20, expected_shingles=1_000_000)
    assert (sized.bits, sized.hashes) == (8 << 20, 6)
    assert BloomDedupConfig(expected_shingles=100_000_000).shingle_partitions == 48
    exact = BloomDedupConfig(fpr=0)
    assert (exact.exact, exact.bits, exact.hashes, exact.expected_fpr) == (True, None, None, None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fpr": 1.0}, "fpr must be in \\(0, 1\\)"),
        ({"fpr": 1.5}, "fpr must be in \\(0, 1\\)"),
        ({"fpr": -0.01}, "fpr must be in \\(0, 1\\)"),
        ({"fpr": math.nan}, "fpr must be in \\(0, 1\\)"),
        ({"n_grams": 0}, "n_grams must be"),
        ({"n_grams": 2.5}, "n_grams must be"),
        ({"threshold": 1.01}, "threshold is a fraction"),
        ({"threshold": math.nan}, "threshold is a fraction"),
        ({"expected_shingles": 0}, "expected_shingles must be at least 1"),
        ({"filter_bytes": 0}, "filter_bytes must be at least 1"),
        ({"partitions": 0}, "partitions must be at least 1"),
        ({"fpr": 1e-300, "expected_shingles": 10**9}, "raise fpr, or lower expected_shingles"),
        ({"filter_bytes": 1 << 40}, "raise fpr, or lower expected_shingles or filter_bytes"),
        ({"word_splitter": "nltk"}, "word splitter is one of"),
    ],
)
def test_config_rejects_what_it_cannot_use(options, message):
    with pytest.raises(ValueError, match=message):
        BloomDedupConfig(**options)


def _first_occurrences(documents) -> dict:
    """``{node: (repeated occurrences, source)}`` by the rule, one document at a time in node order."""
    first: dict[int, tuple] = {}
    found = {}
    for node, hashes, counts in sorted(documents, key=lambda document: document[0]):
        pairs = collections.Counter()
        for shingle, count in zip(hashes.tolist(), counts.tolist(), strict=True):
            if shingle in first:
                pairs[first[shingle]] += count
        for shingle in hashes.tolist():
            first.setdefault(shingle, node)
        if pairs:
            found[node] = (sum(pairs.values()), min(pairs, key=lambda source: (-pairs[source], source)))
    return found


def test_repeats_of_documents_with_the_same_shingles_follow_from_the_earliest(reviews):
    texts = [bloom_shingles(document.text) for document in reviews[:40]]
    # Part of two reviews; and part of another, twice more with two shingles moved apart by as much: three
    # sets of shingles of the same size and the same sum, that only comparing the arrays tells apart.
    part = np.unique(texts[2])[:150]
    moved = [part.copy(), part.copy()]
    for shingles, (up, down), by in ((moved[0], (10, 20), 1 << 40), (moved[1], (30, 140), 3 << 20)):
        shingles[up] += np.uint64(by)
        shingles[down] -= np.uint64(by)
    texts += [np.concatenate((texts[0][:200], texts[1][:100])), part, *moved]
    pool = [np.unique(hashes, return_counts=True) for hashes in texts]
    assert len({(len(distinct), int(distinct.sum())) for distinct, _ in pool[-3:]}) == 1
    assert len({distinct.tobytes() for distinct, _ in pool[-3:]}) == 3
    pool = [(distinct, counts.astype(np.uint8)) for distinct, counts in pool]
    rng = random.Random(7)
    documents, tasks = [], []
    for task in range(4):
        batches = bloom._ShingleBatches()
        for number in range(60):
            # Copies of a few texts, some given the same arrays (as a task's copies are), some equal arrays.
            distinct, counts = pool[rng.choice([0, 1, 2, 40, 41, 42, 43, rng.randrange(len(pool))])]
            if rng.random() < 0.3:
                distinct, counts = distinct.copy(), counts.copy()
            node = (f"doc-{rng.randrange(10**6):06d}-{task}-{number:02d}", ("file", number))
            documents.append((node, distinct, counts))
            assert not list(batches.add(node, number % 3, [(0, distinct, counts)]))
        tasks += [record for _, record in (window.value for window in batches.flush())]
    shared = sum(len(record[0]) - len(record[3]) for record in tasks)
    assert shared > 100
    found = bloom._repeats_found(value for _, value in bloom._RepeatsFn(StepMetrics("bloom")).process((0, tasks)))
    assert found == _first_occurrences(documents)
    assert len(found) > 150
