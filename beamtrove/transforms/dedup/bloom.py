"""Bloom-filter dedup: documents whose word n-grams mostly occurred in earlier documents are removed.

The rule is DataTrove's ``SingleBloomFilter``: a document's shingles are the
word n-grams of its normalized text; an occurrence of a shingle is a
*repeat* when the shingle occurs in a document earlier in
:class:`KeepOrder`; a document whose repeats make more than ``threshold`` of
its shingle occurrences is removed. Occurrences count with their
multiplicity (a shingle three times in a document is three occurrences, all
repeats or none), a shingle repeated inside one document only is not a
repeat, a removed document's shingles still count against later documents,
and a document with no shingle (fewer than ``n_grams`` words) is kept.

DataTrove answers "occurs earlier" by querying one Bloom filter while it
reads the documents in order, so its false positives remove documents that
should stay; that needs a single sequential worker. Here the answer is exact,
computed with shuffles, and the Bloom filter only decides what is worth
shuffling:

1. Each document's distinct shingles go into a filter of per-bit counters
   that saturate at two documents (two bit arrays, "hit by one document" and
   "hit by two or more"). Adding a document's shingles, and merging two such
   filters (``twice |= other.twice | (once & other.once)``), are associative
   and commutative, so the filter is built where the shingles are made (one
   partial filter per task of a staged run) and merged from those, and its
   content does not depend on bundles, order or workers.
2. A shingle can only be a repeat if it occurs in two documents, and then
   all its ``k`` bits are set in "two or more". Only shingles whose bits are
   all set there (the candidates) are shuffled, with their document's
   :class:`KeepOrder` node and count, to the slice of the hash space that
   owns them (``partitions`` slices, rounded up to a multiple of a staged
   run's partitions, each of which gets as many); a slice sorts its shingles with numpy and
   tells every document but a shingle's first how many repeats it holds.
   Shingles travel in batches of many documents' arrays, one record per
   slice and batch, not per document: on the DirectRunner a record costs
   microseconds, a shingle in an array nanoseconds, and a document has
   shingles in nearly every slice, whose number grows with the partitions.
   A false positive of the filter (a candidate of one document) costs a few
   shuffled bytes and nothing else.
3. Repeat counts go back, as arrays in batches of documents, to the slice of
   the documents that holds their document (which travelled with its
   shingles), where each document is kept or removed.

Crawls repeat whole texts, and copies cost little here. A worker keeps the
shingles of the texts it met last (:class:`~beamtrove.transforms.dedup.shingles.RecentTexts`,
32 MiB): a copy is not normalized and hashed again, and without a filter its
shingles go out as the same arrays, which a batch holds once. A slice
finds the documents whose shingles there are the same (in one batch, or
equal arrays from several), computes the repeats of the earliest only, and
gives each of the others that document's repeats, plus that document itself
for the shingles that first occurred in it. On 100,938 pages where 90 %
of the documents are exact copies of 1,239 texts, these took the staged run
from 148 s to 82 s alone (its largest process from 0.79 to 0.33 GiB),
with the same output.

A staged run over several partitions builds no filter and shuffles every
shingle: there a shuffle is a file written once and read once, and adding a
shingle to the filter and looking it up cost more than shuffling it. On
100,938 pages of which bloom removed 89 %, and on 100,000 generated
documents of which it removed 2.8 % (a filter sized for them halved the
candidates), the staged runs without a filter took 19 % less time.

So the kept set is the same for any ``fpr``: ``fpr`` only trades the
filter's size (a fixed-size side input, set by the configuration, not by the
data) against shuffle volume. The filter has ``m = ceil(-n ln(fpr) / ln(2)**2)``
bits for ``n = expected_shingles`` distinct shingles, or ``8 * filter_bytes``,
and ``k = round(m / n * ln 2)`` hash functions; bit ``i`` of a shingle hash
``h`` is ``(h + i * h') mod m``, ``h'`` being ``h`` with its halves swapped
(double hashing, as in Kirsch and Mitzenmacher). A filter that is too small
for the data only makes more candidates. ``fpr`` None or 0 skips the filter
and shuffles every shingle.

Text is normalized with :func:`~beamtrove.text.normalize_text` (the
normalization of beamtrove's other dedups and of DataTrove's, which keeps
symbols such as ``•``, ``©`` or ``€`` as words). Words are then
split with ``word_splitter`` (``"spacy"`` for DataTrove's tokenizer) and
every n-gram of them is hashed to 64 bits (DataTrove: 32 bits, whose
collisions also count as repeats).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.layout import EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.dedup.bloom_filter import (
    POPCOUNT,
    BloomDedupConfig,
    SharedBits,
    bloom_shingles,
    in_two_documents,
)
from beamtrove.transforms.dedup.keep import DedupStep, KeepOrder
from beamtrove.transforms.dedup.shingles import RecentTexts
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import SAME, SLICED, Stage, StagedForm, key_slice

__all__ = ["BloomDedup", "BloomDedupConfig", "bloom_shingles"]

_REASON = "bloom_duplicate"
# The shingles of the texts a worker met last, for their copies: about 4,000 pages' (9 bytes a shingle).
_RECENT_TEXTS_BYTES = 32 << 20


class _TextShingles(NamedTuple):
    """A text's distinct shingles, their counts and occurrences; with ``owned``, the same split by slice."""

    distinct: np.ndarray
    counts: np.ndarray
    occurrences: int
    owned: tuple[tuple[int, np.ndarray, np.ndarray], ...]

    def size(self) -> int:
        # The owned arrays are views of these.
        return self.distinct.nbytes + self.counts.nbytes


def _owned(
    hashes: np.ndarray, counts: np.ndarray, slices: int
) -> tuple[np.ndarray, np.ndarray, tuple[tuple[int, np.ndarray, np.ndarray], ...]]:
    """``hashes`` and ``counts`` in the order of the slices that own them (each slice's in their order), made
    read-only, and ``(slice, hashes, counts)`` for each slice that owns some, in slice order: views of those."""
    owners = hashes % np.uint64(slices)
    order = np.argsort(owners, kind="stable")
    owners, hashes, counts = owners[order], hashes[order], counts[order]
    # A text's are shared by all its copies: nothing may write to them.
    hashes.flags.writeable = counts.flags.writeable = False
    bounds = np.flatnonzero(np.diff(owners)) + 1
    return (
        hashes,
        counts,
        tuple(
            (int(owners[start]), hashes[start:end], counts[start:end])
            for start, end in zip((0, *bounds.tolist()), (*bounds.tolist(), len(hashes)), strict=True)
            if end > start
        ),
    )


class _SharedBitsFn(beam.CombineFn):
    """Builds a filter from shingled documents; its output is the filter's ``(once, twice)`` arrays."""

    def __init__(self, bits: int, k: int):
        self._bits = bits
        self._k = k

    def create_accumulator(self) -> SharedBits:
        return SharedBits(self._bits, self._k)

    def add_input(self, accumulator: SharedBits, shingled) -> SharedBits:
        _, _, hashes, _ = shingled
        accumulator.add(hashes)
        return accumulator

    def merge_accumulators(self, accumulators) -> SharedBits:
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged.merge(accumulator.once, accumulator.twice)
        return merged

    def extract_output(self, accumulator: SharedBits) -> tuple[np.ndarray, np.ndarray]:
        # Arrays, not the object: a staged run writes partial filters as values.
        return accumulator.once, accumulator.twice


class _MergedBitsFn(_SharedBitsFn):
    """Merges partial filters, each its ``(once, twice)`` arrays, into the whole input's filter."""

    def add_input(self, accumulator: SharedBits, partial) -> SharedBits:
        accumulator.merge(*partial)
        return accumulator


class _ShinglesFn(beam.DoFn):
    """A document's ``(node, slice, distinct shingles, their counts)``; the document, to that slice of documents.

    With ``send``, where every shingle is a candidate, it sends them to the slices of the hash space itself
    (see :class:`_ShingleBatches`): a text's copies met here share their shingles' arrays, and a batch holds
    those arrays once.
    """

    def __init__(self, config: BloomDedupConfig, order: KeepOrder, slices: int, metrics: StepMetrics, send: bool):
        self._config = config
        self._order = order
        self._slices = slices
        self._metrics = metrics
        self._send = send

    def setup(self):
        self._shingles = RecentTexts(self._text_shingles, _TextShingles.size, _RECENT_TEXTS_BYTES)

    def start_bundle(self):
        self._batches = _ShingleBatches()

    def _text_shingles(self, text: str, language: str | None) -> _TextShingles:
        config = self._config
        hashes = bloom_shingles(text, config.n_grams, config.word_splitter, language, config.word_tokenizers)
        distinct, counts = np.unique(hashes, return_counts=True)
        # Nearly every count is 1: a byte each, not 8, in the largest dataset a run writes and reads.
        counts = counts.astype(np.min_scalar_type(int(counts.max(initial=0))))
        if self._send:
            distinct, counts, owned = _owned(distinct, counts, self._slices)
            return _TextShingles(distinct, counts, len(hashes), owned)
        # Shared by every copy of the text: nothing may write to them.
        distinct.flags.writeable = counts.flags.writeable = False
        return _TextShingles(distinct, counts, len(hashes), ())

    def process(self, document: Document):
        self._metrics.received()
        self._metrics.chars("in", document.text)
        shingles = self._shingles(document.text, language_key(document.metadata))
        if not shingles.occurrences:
            self._metrics.inc("no_shingles")
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            yield beam.pvalue.TaggedOutput("unshingled", document)
            return
        self._metrics.inc("shingle_occurrences", shingles.occurrences)
        self._metrics.inc("shingles", len(shingles.distinct))
        node = self._order.node(document)
        # Its slice travels with its shingles, so that repeats go back to it without hashing its node again.
        slice_ = key_slice(node, self._slices)
        yield beam.pvalue.TaggedOutput("documents", (slice_, (node, document, shingles.occurrences)))
        if not self._send:
            yield node, slice_, shingles.distinct, shingles.counts
            return
        self._metrics.inc("candidates", len(shingles.distinct))
        yield from self._batches.add(node, slice_, shingles.owned)

    def finish_bundle(self):
        yield from self._batches.flush()


class _FilterStatsFn(beam.DoFn):
    """Reports the finished filter's size and fill, and passes on the array candidates are looked up in."""

    def __init__(self, bits: int, k: int, metrics: StepMetrics):
        self._bits = bits
        self._k = k
        self._metrics = metrics

    def process(self, shared: tuple[np.ndarray, np.ndarray]):
        once, twice = shared
        self._metrics.inc("filter_bits", self._bits)
        self._metrics.inc("filter_hashes", self._k)
        self._metrics.inc("filter_bits_set", int(POPCOUNT[once].sum(dtype=np.int64)))
        self._metrics.inc("filter_bits_shared", int(POPCOUNT[twice].sum(dtype=np.int64)))
        yield twice


# Shingles, or documents' repeat counts, per record: a few MB of arrays, a bounded batch per slice and bundle.
_BATCH_SHINGLES = 1 << 18
_BATCH_DOCUMENTS = 1 << 12
# What a document that shares its shingles' arrays with another of the batch counts for: its node.
_SHARED_SEGMENT_ITEMS = 16


class _Batch:
    """One slice's batch: its documents, and the arrays of their shingles there, each array once."""

    def __init__(self):
        self.nodes: list = []
        self.document_slices: list[int] = []
        self.segment_of: list[int] = []
        self.segments: dict[int, int] = {}
        self.hashes: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.items = 0

    def add(self, node, document_slice: int, hashes: np.ndarray, counts: np.ndarray) -> None:
        # Arrays the batch holds cannot be freed, so the id of one stands for it alone while the batch lasts.
        segment = self.segments.setdefault(id(hashes), len(self.segments))
        if segment == len(self.hashes):
            self.hashes.append(hashes)
            self.counts.append(counts)
            self.items += len(hashes)
        else:
            self.items += _SHARED_SEGMENT_ITEMS
        self.nodes.append(node)
        self.document_slices.append(document_slice)
        self.segment_of.append(segment)

    def record(self) -> tuple:
        return (
            self.nodes,
            np.array(self.document_slices, dtype=np.int64),
            np.array(self.segment_of, dtype=np.int64),
            np.array([len(hashes) for hashes in self.hashes], dtype=np.int64),
            np.concatenate(self.hashes),
            np.concatenate(self.counts),
        )


class _ShingleBatches:
    """Documents' shingles gathered per slice of the hash space, sent as one record per slice and batch.

    A record is ``(slice, (nodes, their slices of documents, their segments, shingles per segment, hashes,
    counts))``: a document's shingles in the slice are segment ``segments[i]`` of ``hashes`` and ``counts``,
    and documents given the same arrays (the copies of a text) share a segment. On the DirectRunner a record
    costs microseconds, a shingle in an array nanoseconds, and a document has shingles in nearly every slice.
    """

    def __init__(self):
        self._batches: dict[int, _Batch] = {}

    def add(self, node, document_slice: int, owned: Iterable[tuple[int, np.ndarray, np.ndarray]]):
        """Adds a document's ``(slice, hashes, counts)``; yields the records of the batches it fills."""
        for slice_, hashes, counts in owned:
            batch = self._batches.get(slice_)
            if batch is None:
                batch = self._batches[slice_] = _Batch()
            batch.add(node, document_slice, hashes, counts)
            if batch.items >= _BATCH_SHINGLES:
                del self._batches[slice_]
                yield slice_, batch.record()

    def flush(self):
        """Yields every batch left, as ``WindowedValue`` s for ``finish_bundle``, in slice order."""
        for slice_ in sorted(self._batches):
            record = (slice_, self._batches[slice_].record())
            yield WindowedValue(record, GlobalWindow().max_timestamp(), (GlobalWindow(),))
        self._batches.clear()


class _CandidatesFn(beam.DoFn):
    """Sends documents' candidate shingles, those the filter holds in two documents, in batches, to the slices
    of the hash space that own them (see :class:`_ShingleBatches`)."""

    def __init__(self, bits: int, k: int, slices: int, metrics: StepMetrics):
        self._bits = bits
        self._k = k
        self._slices = slices
        self._metrics = metrics

    def start_bundle(self):
        self._batches = _ShingleBatches()

    def process(self, shingled, twice):
        node, document_slice, hashes, counts = shingled
        candidates = in_two_documents(twice, hashes, self._bits, self._k)
        hashes, counts = hashes[candidates], counts[candidates]
        self._metrics.inc("candidates", len(hashes))
        yield from self._batches.add(node, document_slice, _owned(hashes, counts, self._slices)[2])

    def finish_bundle(self):
        yield from self._batches.flush()


class _RepeatsFn(beam.DoFn):
    """Finds, in one slice of the shingles, the repeats of every document and where they first occurred.

    Yields, for each slice of the documents, in batches of up to 4,096 documents with repeats: ``(document
    slice, (nodes, pairs per node, first index, occurrences, first nodes))``. A document's pairs are the
    documents where its repeated occurrences first occurred, ``first nodes[first index]``, each with the
    occurrences it accounts for; arrays, and each node once per batch, where a tuple per pair cost most of
    the time of a run whose documents shared sentences with many others.
    """

    def __init__(self, metrics: StepMetrics):
        self._metrics = metrics

    def process(self, grouped):
        _, batches = grouped
        given = [node for batch in batches for node in batch[0]]
        # The documents' ranks in KeepOrder, so that numpy can find where each shingle first occurs.
        by_rank = sorted(range(len(given)), key=given.__getitem__)
        rank_of = np.empty(len(given), dtype=np.int64)
        rank_of[by_rank] = np.arange(len(given))
        nodes = [given[index] for index in by_rank]
        slice_of_rank = np.concatenate([batch[1] for batch in batches])[by_rank]
        # The batches' segments, numbered across them.
        first_segments = np.cumsum([0, *(len(batch[3]) for batch in batches[:-1])])
        segment_of = np.concatenate([batch[2] + first for batch, first in zip(batches, first_segments, strict=True)])
        sizes = np.concatenate([batch[3] for batch in batches])
        hashes = np.concatenate([batch[4] for batch in batches])
        counts = np.concatenate([batch[5] for batch in batches])
        if not len(hashes):
            return
        starts = np.cumsum(sizes) - sizes
        held_by = _same_shingles(segment_of, starts, sizes, hashes, counts, rank_of)
        segment_counts = counts
        alone = held_by == np.arange(len(given))
        # Only one document of each set of documents with the same shingles here, the earliest: a shingle first
        # occurs where it first occurs among them, and the others' repeats follow from that document's.
        segments = segment_of[alone]
        ranks = np.repeat(rank_of[alone], sizes[segments])
        if not np.array_equal(segments, np.arange(len(sizes))):
            entries = _ranges(starts[segments], sizes[segments])
            hashes, counts = hashes[entries], counts[entries]
        # Grouped by shingle, in any order inside a group (a document holds a shingle once): each group's first
        # document is its least rank. Several times faster than sorting by shingle, then rank.
        order = np.argsort(hashes)
        hashes, ranks, counts = hashes[order], ranks[order], counts[order]
        new_shingle = np.ones(len(hashes), dtype=bool)
        new_shingle[1:] = hashes[1:] != hashes[:-1]
        group_starts = np.flatnonzero(new_shingle)
        group_sizes = np.diff(np.append(group_starts, len(hashes)))
        copied = not alone.all()
        # A shingle is in one document if one document here holds it and no other has the same shingles.
        single = ranks[group_starts[group_sizes == 1]]
        if copied:
            single = single[np.bincount(rank_of[held_by], minlength=len(nodes))[single] == 1]
        self._metrics.inc("unshared_candidates", len(single))
        self._metrics.inc("shared_shingles", len(group_starts) - len(single))
        firsts = np.repeat(np.minimum.reduceat(ranks, group_starts), group_sizes)
        repeated = ranks != firsts
        ranks, firsts, counts = ranks[repeated], firsts[repeated], counts[repeated]
        # One row per (document, first document) pair with the occurrences it accounts for, sorted by the
        # document's slice, then the document: its place in that order stands for it.
        count = len(nodes)
        place_of_rank = np.empty(count, dtype=np.int64)
        rank_at_place = np.lexsort((np.arange(count), slice_of_rank))
        place_of_rank[rank_at_place] = np.arange(count)
        pairs, inverse = np.unique(place_of_rank[ranks] * count + firsts, return_inverse=True)
        totals = np.bincount(inverse, weights=counts).astype(np.int64)
        if copied:
            occurrences = np.add.reduceat(segment_counts, starts, dtype=np.int64)[segment_of]
            pairs, totals = _with_copies(pairs, totals, rank_of, held_by, occurrences, place_of_rank)
        if not len(pairs):
            return
        places, firsts = np.divmod(pairs, count)
        documents = rank_at_place[places]
        document_starts = np.flatnonzero(np.diff(places, prepend=-1))
        pairs_per_document = np.diff(np.append(document_starts, len(pairs)))
        document_slices = slice_of_rank[documents[document_starts]]
        for batch in np.split(np.arange(len(document_starts)), np.flatnonzero(np.diff(document_slices)) + 1):
            for chunk in np.array_split(batch, math.ceil(len(batch) / _BATCH_DOCUMENTS)):
                low, high = document_starts[chunk[0]], document_starts[chunk[-1]] + pairs_per_document[chunk[-1]]
                distinct, first_index = np.unique(firsts[low:high], return_inverse=True)
                value = (
                    [nodes[rank] for rank in documents[document_starts[chunk]].tolist()],
                    pairs_per_document[chunk],
                    first_index.astype(np.int64),
                    totals[low:high],
                    [nodes[rank] for rank in distinct.tolist()],
                )
                yield int(document_slices[chunk[0]]), value


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indexes ``starts[i] .. starts[i] + lengths[i] - 1`` of every range, one range after another."""
    return np.arange(lengths.sum()) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)


def _same_shingles(
    segment_of: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    hashes: np.ndarray,
    counts: np.ndarray,
    rank_of: np.ndarray,
) -> np.ndarray:
    """For each document, the earliest document with the same shingles and counts as it (itself if none).

    Documents of a batch that share a segment were given the same arrays; copies of a text sent from other
    tasks, and documents that differ only in other slices, have equal segments. A segment's shingles are sorted,
    so equal ones are equal arrays: segments are grouped by size and the sum of their shingles (hashes
    already mixed), then each is compared with its group's first, so a collision of sums only leaves a
    segment on its own.
    """
    sums = np.add.reduceat(hashes, starts)
    order = np.lexsort((sizes, sums))
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (sums[order][1:] != sums[order][:-1]) | (sizes[order][1:] != sizes[order][:-1])
    canonical = np.empty(len(order), dtype=np.int64)
    canonical[order] = order[np.flatnonzero(new_group)][np.cumsum(new_group) - 1]
    grouped = np.flatnonzero(canonical != np.arange(len(sizes)))
    if len(grouped):
        mine = _ranges(starts[grouped], sizes[grouped])
        theirs = _ranges(starts[canonical[grouped]], sizes[grouped])
        equal = (hashes[mine] == hashes[theirs]) & (counts[mine] == counts[theirs])
        unequal = ~np.logical_and.reduceat(equal, np.cumsum(sizes[grouped]) - sizes[grouped])
        canonical[grouped[unequal]] = grouped[unequal]
    group = canonical[segment_of]
    order = np.lexsort((rank_of, group))
    first = np.ones(len(order), dtype=bool)
    first[1:] = group[order][1:] != group[order][:-1]
    held_by = np.empty(len(order), dtype=np.int64)
    held_by[order] = order[np.flatnonzero(first)][np.cumsum(first) - 1]
    return held_by


def _with_copies(
    pairs: np.ndarray,
    totals: np.ndarray,
    rank_of: np.ndarray,
    held_by: np.ndarray,
    occurrences: np.ndarray,
    place_of_rank: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of :class:`_RepeatsFn` (``place * documents + first``, sorted) with those of the documents that
    have the same shingles as an earlier one: its pairs, and itself for what first occurred in it (its
    ``occurrences`` here that its pairs do not account for)."""
    copies = np.flatnonzero(held_by != np.arange(len(held_by)))
    count = len(rank_of)
    places, firsts = np.divmod(pairs, count)
    first_pair = np.searchsorted(places, place_of_rank)
    pairs_of = np.searchsorted(places, place_of_rank, side="right") - first_pair
    earlier = rank_of[held_by[copies]]
    taken = pairs_of[earlier]
    rows = _ranges(first_pair[earlier], taken)
    copy_places = place_of_rank[rank_of[copies]]
    repeated = np.bincount(places, weights=totals, minlength=count).astype(np.int64)
    own = occurrences[held_by[copies]] - repeated[place_of_rank[earlier]]
    firsts_in_it = own > 0
    new_pairs = np.concatenate(
        (
            np.repeat(copy_places, taken) * count + firsts[rows],
            copy_places[firsts_in_it] * count + earlier[firsts_in_it],
        )
    )
    pairs = np.concatenate((pairs, new_pairs))
    order = np.argsort(pairs)
    return pairs[order], np.concatenate((totals, totals[rows], own[firsts_in_it]))[order]


def _repeats_found(batches) -> dict[Any, tuple[int, Any]]:
    """Each document's repeated occurrences and its source, given the batches of repeats the slices of the
    shingles found for a slice of the documents (see :class:`_RepeatsFn`).

    Returns:
        ``{node: (repeated occurrences, source node)}`` for each document with repeats, its source the
        document where most of its repeated occurrences first occurred, the earliest on a tie.
    """
    document_of: dict[Any, int] = {}
    first_of: dict[Any, int] = {}
    documents, firsts, totals = [], [], []
    for nodes, pairs_per_node, first_index, occurrences, first_nodes in batches:
        ids = np.fromiter((document_of.setdefault(node, len(document_of)) for node in nodes), np.int64, len(nodes))
        first_ids = np.fromiter(
            (first_of.setdefault(node, len(first_of)) for node in first_nodes), np.int64, len(first_nodes)
        )
        documents.append(np.repeat(ids, pairs_per_node))
        firsts.append(first_ids[first_index])
        totals.append(occurrences)
    if not document_of:
        return {}
    # The same pair found in several slices of the shingles is one pair: its occurrences add up.
    width = len(first_of)
    pairs, inverse = np.unique(np.concatenate(documents) * width + np.concatenate(firsts), return_inverse=True)
    sums = np.bincount(inverse, weights=np.concatenate(totals)).astype(np.int64)
    pair_documents, pair_firsts = np.divmod(pairs, width)
    repeats = np.bincount(pair_documents, weights=sums).astype(np.int64)
    first_nodes = list(first_of)
    first_order = np.empty(width, dtype=np.int64)
    first_order[sorted(range(width), key=first_nodes.__getitem__)] = np.arange(width)
    # Per document, its pairs by most occurrences, then earliest first: the first of them is its source.
    order = np.lexsort((first_order[pair_firsts], -sums, pair_documents))
    chosen = order[np.flatnonzero(np.diff(pair_documents[order], prepend=-1))]
    nodes = list(document_of)
    return {
        nodes[document]: (int(repeats[document]), first_nodes[first])
        for document, first in zip(pair_documents[chosen].tolist(), pair_firsts[chosen].tolist(), strict=True)
    }


def _found_by_node(grouped):
    _, batches = grouped
    yield from _repeats_found(batches).items()


class _DecideFn(beam.DoFn):
    """Keeps or removes the documents of one slice of the documents, given the repeats found for them."""

    def __init__(self, threshold: float, metrics: StepMetrics):
        self._threshold = threshold
        self._metrics = metrics

    def process(self, joined):
        _, sides = joined
        found = _repeats_found(sides["repeats"])
        for node, document, occurrences in sides["documents"]:
            yield self._decide(document, occurrences, found.get(node))

    def _decide(self, document: Document, occurrences: int, found: tuple[int, Any] | None):
        repeats, source = found or (0, None)
        fraction = repeats / occurrences
        if fraction <= self._threshold:
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            return document
        self._metrics.dropped(_REASON)
        return excluded_output(
            document,
            _REASON,
            duplicate_of=KeepOrder.document_id(source),
            bloom_duplicate_fraction=round(fraction, 6),
        )


class _DecideLookingUpFn(_DecideFn):
    """Keeps or removes each document of a slice as it streams past, its repeats looked up by node."""

    def process(self, sliced, found_by_node: dict):
        _, (node, document, occurrences) = sliced
        yield self._decide(document, occurrences, found_by_node.get(node))


class BloomDedup(DedupStep):
    """Removes documents whose word n-grams mostly occur in earlier documents; reason ``bloom_duplicate``.

    See the module documentation for the rule and the design. "Earlier" is
    :class:`KeepOrder`. Returns :class:`DedupOutputs`: removed documents get
    ``duplicate_of`` (the document where most of their repeated occurrences
    first occurred, the earliest on a tie; it may itself have been removed)
    and ``bloom_duplicate_fraction``. Documents are removed for what they
    share with many others, not as members of a group, so ``clusters`` is
    empty. Counters: ``beamtrove/<step>``: ``in``, ``out``,
    ``dropped.bloom_duplicate``, ``no_shingles``, ``shingle_occurrences``,
    ``chars_in``, ``chars_out``, ``shingles`` (distinct per document, summed), ``candidates`` (of those,
    the shuffled ones), ``shared_shingles`` and ``unshared_candidates``
    (candidate shingles in two documents or more, and in one only: the
    filter's false positives), and with a filter ``filter_bits``,
    ``filter_hashes``, ``filter_bits_set``, ``filter_bits_shared``. The
    filter's measured false-positive rate is ``unshared_candidates /
    (shingles - candidates + unshared_candidates)``.

    Args:
        config: What counts as a duplicate and the filter's size.
        keep_by: See :class:`KeepOrder`.
        step: Stats name.
    """

    def __init__(self, config: BloomDedupConfig | None = None, keep_by: str | None = None, step: str = "bloom"):
        super().__init__(step)
        self._config = config or BloomDedupConfig()
        self._order = KeepOrder(keep_by)

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step as stages: shingles, the filter, candidates, each slice's repeats, the decisions.

        The shingles' tasks build partial filters, which one task merges.
        Without a filter, and over partitions (a staged run, whose shuffle
        is files: cheaper per shingle than the filter, see the module
        documentation), the candidates are every shingle, sent on by the
        stage that makes them. The documents wait for their repeats in the
        slice of the documents their node hashes to, where the repeats come
        back, so each document meets all its repeats in one join.

        Args:
            partitions: A staged run's partitions, 1 in one pipeline: the
                slices of shingles and of documents are a multiple of them,
                so that every partition holds as many.
        """
        slices = partitions * math.ceil(self._config.shingle_partitions / partitions)
        shingles = {"by_slice": SLICED, "unshingled": SAME}
        # Over partitions the shuffle is files written and read once, which cost less per shingle than adding it
        # to the filter and looking it up there (measured on inputs where bloom removed 89 % and 2.8 % of the
        # documents): every shingle is a candidate, as without a filter, and the kept set is the same.
        filtered = not self._config.exact and partitions == 1
        run = functools.partial(self._shingles, slices=slices, filtered=filtered)
        if not filtered:
            head = (Stage("Shingles", {"documents": ("documents",)}, run, {**shingles, "candidates": SLICED}),)
        else:
            head = (
                Stage(
                    "Shingles",
                    {"documents": ("documents",)},
                    run,
                    {**shingles, "shingled": SAME, "partial_filters": SAME},
                ),
                # One accumulator of fixed size, each task's partial filter streamed through it.
                Stage("Filter", {"partial_filters": ("partial_filters",)}, self._filter, {"twice": SAME}, whole=True),
                Stage(
                    "Candidates",
                    {"shingled": ("shingled",)},
                    functools.partial(self._candidates, slices=slices),
                    {"candidates": SLICED},
                    sides={"twice": "twice"},
                ),
            )
        return StagedForm(
            (
                *head,
                Stage(
                    "Repeats",
                    {"candidates": ("candidates",)},
                    self._repeats,
                    {"repeats": SLICED},
                ),
                Stage(
                    "Decide",
                    {"documents": ("by_slice",), "repeats": ("repeats",)},
                    # Over partitions, a task's repeats are those of its slices' documents, few enough to look up
                    # as the documents stream past; in one pipeline they are the whole input's: joined.
                    self._decide_looking_up if partitions > 1 else self._decide,
                    {"decided": SAME, EXCLUDED: SAME},
                ),
            ),
            input="documents",
            kept=("decided", "unshingled"),
            excluded=(EXCLUDED,),
            # A shingle per word, in arrays: 5 partitions of 100,938 documents peaked at 1.91 GiB in one worker,
            # about 14 bytes per byte of text; but a task of more documents runs slower per document: 30 (19
            # partitions at 1 GiB) ran that input in 206.9 s, 5 partitions in 305.7 s (a pip install beside it).
            held_per_input_byte=30.0,
        )

    def _shingles(self, pipeline, inputs, sides, slices: int, filtered: bool):
        config = self._config
        fn = _ShinglesFn(config, self._order, slices, self._metrics, send=not filtered)
        outputs = inputs["documents"] | "Shingles" >> beam.ParDo(fn).with_outputs(
            "documents", "unshingled", main="shingled"
        )
        written = {"by_slice": outputs.documents, "unshingled": outputs.unshingled}
        if not filtered:
            # Every shingle is a candidate: the shingles were sent on as they were made.
            written["candidates"] = outputs.shingled
            return written
        written["shingled"] = outputs.shingled
        written["partial_filters"] = (
            outputs.shingled
            | "PartialFilter" >> beam.CombineGlobally(_SharedBitsFn(config.bits, config.hashes)).without_defaults()
        )
        return written

    def _filter(self, pipeline, inputs, sides):
        config = self._config
        twice = (
            inputs["partial_filters"]
            | "Filter" >> beam.CombineGlobally(_MergedBitsFn(config.bits, config.hashes))
            | "FilterStats" >> beam.ParDo(_FilterStatsFn(config.bits, config.hashes, self._metrics))
        )
        return {"twice": twice}

    def _candidates(self, pipeline, inputs, sides, slices: int):
        config = self._config
        fn = _CandidatesFn(config.bits, config.hashes, slices, self._metrics)
        twice = beam.pvalue.AsSingleton(sides["twice"])
        return {"candidates": inputs["shingled"] | "Candidates" >> beam.ParDo(fn, twice)}

    def _repeats(self, pipeline, inputs, sides):
        repeats = (
            inputs["candidates"]
            | "GroupByPartition" >> beam.GroupByKey()
            | "Repeats" >> beam.ParDo(_RepeatsFn(self._metrics))
        )
        return {"repeats": repeats}

    def _decide(self, pipeline, inputs, sides):
        decided = (
            {"documents": inputs["documents"], "repeats": inputs["repeats"]}
            | "JoinRepeats" >> beam.CoGroupByKey()
            | "Decide"
            >> beam.ParDo(_DecideFn(self._config.threshold, self._metrics)).with_outputs(EXCLUDED, main="kept")
        )
        return {"decided": decided.kept, EXCLUDED: decided[EXCLUDED]}

    def _decide_looking_up(self, pipeline, inputs, sides):
        found = inputs["repeats"] | "GroupRepeats" >> beam.GroupByKey() | "FoundByNode" >> beam.FlatMap(_found_by_node)
        fn = _DecideLookingUpFn(self._config.threshold, self._metrics)
        decided = inputs["documents"] | "Decide" >> beam.ParDo(fn, beam.pvalue.AsDict(found)).with_outputs(
            EXCLUDED, main="kept"
        )
        return {"decided": decided.kept, EXCLUDED: decided[EXCLUDED]}
