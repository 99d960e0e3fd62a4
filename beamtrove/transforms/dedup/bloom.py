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

import collections
import functools
import math
from collections.abc import Callable
from typing import Any

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
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import SAME, SLICED, Stage, StagedForm, key_slice

__all__ = ["BloomDedup", "BloomDedupConfig", "bloom_shingles"]

_REASON = "bloom_duplicate"


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
    """A document's ``(node, slice, distinct shingles, their counts)``; the document, to that slice of documents."""

    def __init__(self, config: BloomDedupConfig, order: KeepOrder, slices: int, metrics: StepMetrics):
        self._config = config
        self._order = order
        self._slices = slices
        self._metrics = metrics

    def process(self, document: Document):
        self._metrics.received()
        self._metrics.chars("in", document.text)
        config = self._config
        language = language_key(document.metadata)
        hashes = bloom_shingles(document.text, config.n_grams, config.word_splitter, language, config.word_tokenizers)
        if not len(hashes):
            self._metrics.inc("no_shingles")
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            yield beam.pvalue.TaggedOutput("unshingled", document)
            return
        distinct, counts = np.unique(hashes, return_counts=True)
        # Nearly every count is 1: a byte each, not 8, in the largest dataset a run writes and reads.
        counts = counts.astype(np.min_scalar_type(int(counts.max())))
        self._metrics.inc("shingle_occurrences", len(hashes))
        self._metrics.inc("shingles", len(distinct))
        node = self._order.node(document)
        # Its slice travels with its shingles, so that repeats go back to it without hashing its node again.
        slice_ = key_slice(node, self._slices)
        yield beam.pvalue.TaggedOutput("documents", (slice_, (node, document, len(hashes))))
        yield node, slice_, distinct, counts


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


class _Batches:
    """Values bound for slices, gathered per slice and sent as one record per slice and batch.

    Args:
        size: How many of the values' items (the lengths they are added with) make a batch.
        pack: Makes a batch's record value from its values, in the order they were added.
    """

    def __init__(self, size: int, pack: Callable[[list], Any] = list):
        self._size = size
        self._pack = pack
        self._values: dict[int, list] = collections.defaultdict(list)
        self._items: dict[int, int] = collections.defaultdict(int)

    def add(self, slice_: int, value, items: int):
        """Adds ``value`` for ``slice_``; yields that slice's record once its batch holds ``size`` items."""
        self._values[slice_].append(value)
        self._items[slice_] += items
        if self._items[slice_] >= self._size:
            del self._items[slice_]
            yield slice_, self._pack(self._values.pop(slice_))

    def flush(self):
        """Yields every slice's record left, as ``WindowedValue`` s for ``finish_bundle``, in slice order."""
        for slice_ in sorted(self._values):
            record = (slice_, self._pack(self._values[slice_]))
            yield WindowedValue(record, GlobalWindow().max_timestamp(), (GlobalWindow(),))
        self._values.clear()
        self._items.clear()


def _shingle_batch(members: list[tuple]) -> tuple:
    """``(nodes, their slices, shingles per node, hashes, counts)``: the documents' shingles for one slice."""
    nodes = [member[0] for member in members]
    document_slices = np.fromiter((member[1] for member in members), dtype=np.int64, count=len(members))
    sizes = np.fromiter((len(member[2]) for member in members), dtype=np.int64, count=len(members))
    hashes = np.concatenate([member[2] for member in members])
    return nodes, document_slices, sizes, hashes, np.concatenate([member[3] for member in members])


# Shingles, or documents' repeat counts, per record: a few MB of arrays, a bounded batch per slice and bundle.
_BATCH_SHINGLES = 1 << 18
_BATCH_DOCUMENTS = 1 << 12


class _CandidatesFn(beam.DoFn):
    """Sends documents' candidate shingles, in batches, to the slices of the key space that own them.

    Yields ``(slice, (nodes, their slices of documents, shingles per node, hashes, counts))``.
    """

    def __init__(self, bits: int | None, k: int | None, slices: int, metrics: StepMetrics):
        self._bits = bits
        self._k = k
        self._slices = slices
        self._metrics = metrics

    def start_bundle(self):
        self._batches = _Batches(_BATCH_SHINGLES, _shingle_batch)

    def process(self, shingled, twice=None):
        node, document_slice, hashes, counts = shingled
        if twice is not None:
            candidates = in_two_documents(twice, hashes, self._bits, self._k)
            hashes, counts = hashes[candidates], counts[candidates]
        self._metrics.inc("candidates", len(hashes))
        owners = hashes % np.uint64(self._slices)
        order = np.argsort(owners, kind="stable")
        owners, hashes, counts = owners[order], hashes[order], counts[order]
        bounds = np.flatnonzero(np.diff(owners)) + 1
        for start, end in zip((0, *bounds.tolist()), (*bounds.tolist(), len(hashes)), strict=True):
            if end > start:
                value = (node, document_slice, hashes[start:end], counts[start:end])
                yield from self._batches.add(int(owners[start]), value, end - start)

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
        ranks = np.repeat(rank_of, np.concatenate([batch[2] for batch in batches]))
        hashes = np.concatenate([batch[3] for batch in batches])
        counts = np.concatenate([batch[4] for batch in batches])
        # Grouped by shingle, in any order inside a group (a document holds a shingle once): each group's first
        # document is its least rank. Several times faster than sorting by shingle, then rank.
        order = np.argsort(hashes)
        hashes, ranks, counts = hashes[order], ranks[order], counts[order]
        starts = np.ones(len(hashes), dtype=bool)
        starts[1:] = hashes[1:] != hashes[:-1]
        group_starts = np.flatnonzero(starts)
        sizes = np.diff(np.append(group_starts, len(hashes)))
        self._metrics.inc("unshared_candidates", int(np.count_nonzero(sizes == 1)))
        self._metrics.inc("shared_shingles", int(np.count_nonzero(sizes > 1)))
        if not len(hashes):
            return
        firsts = np.repeat(np.minimum.reduceat(ranks, group_starts), sizes)
        repeated = ranks != firsts
        ranks, firsts, counts = ranks[repeated], firsts[repeated], counts[repeated]
        # One row per (document, first document) pair with the occurrences it accounts for, sorted by the
        # document's slice, then the document: its place in that order stands for it.
        count = len(nodes)
        place_of_rank = np.empty(count, dtype=np.int64)
        rank_at_place = np.lexsort((np.arange(count), slice_of_rank))
        place_of_rank[rank_at_place] = np.arange(count)
        pairs, inverse = np.unique(place_of_rank[ranks] * count + firsts, return_inverse=True)
        if not len(pairs):
            return
        totals = np.bincount(inverse, weights=counts).astype(np.int64)
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
        fn = _ShinglesFn(config, self._order, slices, self._metrics)
        outputs = inputs["documents"] | "Shingles" >> beam.ParDo(fn).with_outputs(
            "documents", "unshingled", main="shingled"
        )
        written = {"by_slice": outputs.documents, "unshingled": outputs.unshingled}
        if not filtered:
            written["candidates"] = self._candidates_of(outputs.shingled, slices)
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
        twice = beam.pvalue.AsSingleton(sides["twice"])
        return {"candidates": self._candidates_of(inputs["shingled"], slices, twice)}

    def _candidates_of(self, shingled, slices: int, *twice):
        config = self._config
        fn = _CandidatesFn(config.bits, config.hashes, slices, self._metrics)
        return shingled | "Candidates" >> beam.ParDo(fn, *twice)

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
