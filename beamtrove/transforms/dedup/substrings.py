"""Exact-substring removal: every run of ``min_tokens`` tokens seen before is cut out, its first occurrence kept.

Documents are tokenized (GPT-2 by default in DataTrove's setup) and every
*window* of ``min_tokens`` consecutive tokens is compared across the corpus. A
window whose token sequence occurs more than once survives where it first
occurs (the first document in :class:`KeepOrder`, then the first position)
and is removed everywhere else, inside the same document too. The removed
windows of a document are merged into token spans and cut out by the
encoding's character offsets, so the text outside them is untouched; a
character split across tokens (an emoji is several byte-level tokens) goes
only when all its tokens go. Documents left with fewer than ``min_doc_words``
words (:func:`~beamtrove.text.split_words`, DataTrove's count) are excluded.

Why windows, and why anchored: the suffix array of the paper (Lee et al.,
2021) needs the whole corpus in one index on one machine. Grouping by a hash
of every window is Beam-native and exact, but shuffles one record per token
(a key, the document's sort key and a position: some 60 bytes per token, and
as many Python elements as tokens). Here each window is instead sent to the
group of its *anchor*: the ``k``-token run with the smallest hash inside it
(the leftmost on ties). Equal windows have equal anchors at the same offset,
so they still meet in one group, where their full hashes are compared; any
``k`` finds the same repeats. Consecutive windows mostly share an anchor, so
a document sends one record per run of windows with the same anchor carrying
the 8-byte hashes of its windows. With ``k`` a quarter of the window (13 of
the default 50 tokens) a run is some 20 windows long: about 11 bytes per token
and a twentieth of the elements, while 13 tokens rarely repeat by chance, so
large groups are made of repeated text. A group with a single run holds no
repeat (the windows of one run differ from each other) and costs nothing
more. Most other groups hold a few runs: they are handled a few hundred at a
time with numpy (a sort of the windows by group, hash, document and
position gives each window's first occurrence), not one Python step per
window. A group of more than 64 runs is done alone, up to 4,096 runs in one
pass; a larger one (boilerplate puts one run per page in the same group) is
read twice as a stream, 4,096 runs at a time, and only a dictionary of its
distinct window hashes is held.

Documents are tokenized once, a batch at a time in background threads: the
character bounds of their tokens travel with them to the cut, as differences
that take a byte per token for most tokenizers.

Hashes are polynomial hashes of the token ids modulo 2**64, mixed
(:func:`~beamtrove.transforms.dedup.shingles.powers`,
:func:`~beamtrove.transforms.dedup.shingles.mix64`); two windows of one
anchor group are taken as equal when their 64-bit hashes are.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
from typing import Any

import apache_beam as beam
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from beamtrove.document import Document
from beamtrove.layout import EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.resources import load_once
from beamtrove.text import split_words
from beamtrove.transforms.batching import BatchDoFn
from beamtrove.transforms.dedup.keep import DedupStep, KeepOrder
from beamtrove.transforms.dedup.shingles import mix64, powers
from beamtrove.transforms.dedup.spans import cut_bounds, cut_token_spans, cut_with_bounds, merge_spans, pack_bounds
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm
from beamtrove.transforms.tokens.tokenize import TokenizerSpec

__all__ = ["SubstringDedup", "cut_token_spans", "merge_spans"]

# Documents per encode_batch call: enough for the tokenizer to spread a batch over the cores.
_BATCH_SIZE = 64
# Runs of an anchor group held at once: a boilerplate group can hold one run per page of a whole dump.
_CHUNK_RUNS = 4096
# Groups of up to _BATCHED_RUNS runs are handled _GROUP_BATCH at a time.
_BATCHED_RUNS = 64
_GROUP_BATCH = 256


def _run_hashes(ids: np.ndarray, lengths: tuple[int, ...]) -> list[np.ndarray]:
    """For each length, the hashes of every run of that many consecutive ``ids``, in order."""
    size = len(ids)
    forward, inverse = powers(size)
    with np.errstate(over="ignore"):
        prefix = np.zeros(size + 1, dtype=np.uint64)
        np.cumsum((ids + np.uint64(1)) * forward, out=prefix[1:])
        return [
            mix64(((prefix[length:] - prefix[: size - length + 1]) * inverse[: size - length + 1]) ^ np.uint64(length))
            for length in lengths
        ]


def _encode(tokenizer, text: str):
    """The encoding of ``text`` without special tokens, or None when the tokenizer rejects it (lone surrogates)."""
    try:
        return tokenizer.encode(text, add_special_tokens=False)
    except TypeError:
        return None


class _AnchoredWindowsFn(BatchDoFn):
    # encode_batch releases the GIL and spreads a batch over the cores: the next
    # batches are encoded while the windows of this one are hashed and emitted.
    in_flight = 2

    def __init__(self, spec: TokenizerSpec, min_tokens: int, order: KeepOrder, metrics: StepMetrics):
        super().__init__(_BATCH_SIZE)
        self._spec = spec
        self._min_tokens = min_tokens
        # Any anchor length finds the same repeats; a quarter of the window makes runs long (few records)
        # while runs of that many tokens rarely repeat by chance.
        self._anchor_tokens = (min_tokens + 3) // 4
        self._order = order
        self._metrics = metrics

    def setup(self):
        self._tokenizer = load_once(self._spec, self._spec.load)
        self._encoder = concurrent.futures.ThreadPoolExecutor(max_workers=self.in_flight, thread_name_prefix="encode")

    def teardown(self):
        self._encoder.shutdown()

    def begin_batch(self, documents: list[Document]) -> concurrent.futures.Future:
        return self._encoder.submit(self._encode_batch, [document.text for document in documents])

    def _encode_batch(self, texts: list[str]) -> list:
        try:
            return self._tokenizer.encode_batch(texts, add_special_tokens=False)
        except TypeError:  # one rejected text fails the batch: alone, the others still encode
            return [_encode(self._tokenizer, text) for text in texts]

    def transform_batch(self, documents: list[Document], encodings: concurrent.futures.Future) -> list:
        return [self._windows(*pair) for pair in zip(documents, encodings.result(), strict=True)]

    def _windows(self, document: Document, encoding) -> tuple:
        """``(node, document, packed cut bounds, runs)``; no bounds nor runs below ``min_tokens`` tokens."""
        node = self._order.node(document)
        if encoding is None:
            self._metrics.inc("not_tokenized")
            return node, document, None, []
        ids = encoding.ids
        if len(ids) < self._min_tokens:
            return node, document, None, []
        windows, anchors = _run_hashes(
            np.fromiter(ids, dtype=np.uint64, count=len(ids)), (self._min_tokens, self._anchor_tokens)
        )
        # anchor[s]: the position of the smallest anchor hash inside window s (leftmost on ties).
        inside = sliding_window_view(anchors, self._min_tokens - self._anchor_tokens + 1)
        anchor = np.arange(len(windows)) + inside.argmin(axis=1)
        # The anchor of a sliding window never moves left, so windows sharing one are consecutive.
        starts = np.concatenate(([0], np.flatnonzero(np.diff(anchor)) + 1, [len(windows)])).tolist()
        # Signed: Beam encodes Python ints of 64 bits or less compactly.
        keys = anchors[anchor[starts[:-1]]].view(np.int64).tolist()
        runs = [
            (key, (node, start, windows[start:end].tobytes()))
            for key, start, end in zip(keys, starts, starts[1:], strict=False)
        ]
        return node, document, pack_bounds(cut_bounds(encoding.offsets)), runs


class _SplitRunsFn(beam.DoFn):
    def process(self, windowed):
        node, document, bounds, runs = windowed
        yield beam.pvalue.TaggedOutput("documents", (node, (document, bounds)))
        yield from runs


class _Chunk:
    """Runs of anchor groups, their windows flattened in ``(group, node, start)`` order of the runs.

    Windows are only compared inside their group: each group is numbered.
    """

    def __init__(self, runs: list[tuple[int, Any, int, bytes]]):
        runs.sort(key=lambda run: run[:3])
        self.groups = [group for group, _, _, _ in runs]
        self.nodes = [node for _, node, _, _ in runs]
        hashes = [np.frombuffer(blob, dtype=np.uint64) for _, _, _, blob in runs]
        lengths = np.fromiter(map(len, hashes), dtype=np.intp, count=len(runs))
        heads = np.cumsum(lengths) - lengths
        starts = np.fromiter((start for _, _, start, _ in runs), dtype=np.int64, count=len(runs))
        self.hashes = np.concatenate(hashes)
        self.run = np.repeat(np.arange(len(runs)), lengths)
        self.position = np.arange(len(self.hashes)) + np.repeat(starts - heads, lengths)
        # Ranks that follow (group, node), equal for equal ones: numpy orders windows as Python orders occurrences.
        owners = list(zip(self.groups, self.nodes, strict=True))
        steps = itertools.accumulate((a != b for a, b in itertools.pairwise(owners)), initial=0)
        rank = np.fromiter(steps, dtype=np.intp, count=len(runs))[self.run]
        group = np.asarray(self.groups, dtype=np.intp)[self.run]
        order = np.lexsort((self.position, rank, self.hashes, group))
        new = np.ones(len(order), dtype=bool)
        for key in (self.hashes[order], group[order]):
            new[1:] &= key[1:] == key[:-1]
        np.logical_not(new[1:], out=new[1:])
        # The first occurrence of each distinct window of a group, and which of them each window is.
        self.firsts = order[new]
        self.distinct = np.empty(len(order), dtype=np.intp)
        self.distinct[order] = np.cumsum(new) - 1
        first = self.firsts[self.distinct]
        self.is_first = (rank == rank[first]) & (self.position == self.position[first])
        self.run_head = np.zeros(len(order), dtype=bool)
        self.run_head[heads] = True

    def occurrences(self):
        """``(hash, (node, position))`` of the first occurrence of each distinct window of a chunk of one group."""
        nodes = (self.nodes[run] for run in self.run[self.firsts].tolist())
        return zip(
            self.hashes[self.firsts].tolist(), zip(nodes, self.position[self.firsts].tolist(), strict=True), strict=True
        )

    def removed_spans(self, min_tokens: int, first: dict[int, tuple] | None = None):
        """``(group, (node, (start, end)))`` token spans of windows that are not the first occurrence of theirs.

        Args:
            min_tokens: Tokens per window.
            first: For a chunk of a group too large to hold, the first occurrence of every window of the group.
        """
        kept = self.is_first
        if first is not None:
            overall = (first[value] == occurrence for value, occurrence in self.occurrences())
            kept = kept & np.fromiter(overall, dtype=bool, count=len(self.firsts))[self.distinct]
        removed = ~kept
        # Stretches of removed windows, each inside one run.
        begins = removed.copy()
        begins[1:] &= ~removed[:-1] | self.run_head[1:]
        ends = removed.copy()
        ends[:-1] &= ~removed[1:] | self.run_head[1:]
        begins, ends = np.flatnonzero(begins), np.flatnonzero(ends)
        for run, start, end in zip(
            self.run[begins].tolist(), self.position[begins].tolist(), self.position[ends].tolist(), strict=True
        ):
            yield self.groups[run], (self.nodes[run], (start, end + min_tokens))


class _RepeatedSpansFn(BatchDoFn):
    """The removed spans of each anchor group, as one list per group.

    Most groups hold a few runs: they are batched, so that numpy works on
    thousands of runs at once. Larger ones are done alone, a chunk of
    ``_CHUNK_RUNS`` runs at a time.
    """

    def __init__(self, min_tokens: int):
        super().__init__(_GROUP_BATCH)
        self._min_tokens = min_tokens

    def process(self, grouped, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
        _, runs = grouped
        head = list(itertools.islice(runs, _BATCHED_RUNS + 1))
        # The windows of one run differ from each other: a group of one run holds no repeat.
        if len(head) < 2:
            return
        if len(head) <= _BATCHED_RUNS:
            yield from super().process(head, timestamp, window)
        else:
            yield [span for _, span in self._large_group(runs)]

    def transform_batch(self, groups: list[list[tuple]], begun: None) -> list[list]:
        spans: list[list] = [[] for _ in groups]
        chunk = _Chunk([(number, *run) for number, runs in enumerate(groups) for run in runs])
        for number, span in chunk.removed_spans(self._min_tokens):
            spans[number].append(span)
        return spans

    def _large_group(self, runs):
        if next(itertools.islice(runs, _CHUNK_RUNS, None), None) is None:
            yield from next(_chunks(runs)).removed_spans(self._min_tokens)
            return
        # Streamed twice rather than held: the first pass finds the first occurrence of every distinct window.
        first: dict[int, tuple] = {}
        for chunk in _chunks(runs):
            for value, occurrence in chunk.occurrences():
                known = first.get(value)
                if known is None or occurrence < known:
                    first[value] = occurrence
        for chunk in _chunks(runs):
            yield from chunk.removed_spans(self._min_tokens, first)


def _chunks(runs):
    """The runs of one group, ``_CHUNK_RUNS`` at a time."""
    iterator = iter(runs)
    while chunk := [(0, *run) for run in itertools.islice(iterator, _CHUNK_RUNS)]:
        yield _Chunk(chunk)


class _CutSpansFn(beam.DoFn):
    def __init__(self, min_doc_words: int, metrics: StepMetrics):
        self._min_doc_words = min_doc_words
        self._metrics = metrics

    def process(self, joined):
        _, (documents, spans) = joined
        spans = merge_spans(spans)
        for document, bounds in documents:
            self._metrics.received()
            self._metrics.chars("in", document.text)
            if not spans:
                self._metrics.emitted()
                self._metrics.chars("out", document.text)
                yield document
                continue
            text = cut_with_bounds(document.text, np.cumsum(bounds, axis=1, dtype=np.int64), spans)
            self._metrics.inc("spans_removed", len(spans))
            self._metrics.inc("tokens_removed", sum(end - start for start, end in spans))
            self._metrics.inc("chars_removed", len(document.text) - len(text))
            # A document every word of which was a repeat is gone whatever the minimum, as in sentence dedup.
            words = len(split_words(text))
            if not words or words < self._min_doc_words:
                self._metrics.dropped("substring_dedup_too_short")
                yield excluded_output(document, "substring_dedup_too_short")
                continue
            self._metrics.emitted()
            self._metrics.chars("out", text)
            yield dataclasses.replace(document, text=text)


class SubstringDedup(DedupStep):
    """Cuts every run of ``min_tokens`` tokens out of all but its first occurrence.

    Returns :class:`DedupOutputs` (``clusters`` empty): ``.kept`` (documents, shortened where spans
    were cut) and ``.excluded`` (documents left with fewer than
    ``min_doc_words`` words once cut, reason ``substring_dedup_too_short``).
    A document left with no word is excluded whatever ``min_doc_words``.
    Counters: ``beamtrove/<step>``: ``in``, ``out``, ``chars_in``, ``chars_out``,
    ``dropped.substring_dedup_too_short``, ``spans_removed`` (merged spans),
    ``tokens_removed``, ``chars_removed``, ``not_tokenized`` (texts the
    tokenizer rejects, kept as they are).

    DataTrove's ExactSubstr (through the paper's suffix-array tool) removes
    *every* copy, the first one included; this keeps the first.

    Args:
        tokenizer_path: Path or fsspec URL of a ``tokenizer.json`` (DataTrove uses GPT-2's).
        min_tokens: Tokens of the shortest repeated run removed (DataTrove: 50, i.e. 100 bytes for the tool).
        min_doc_words: Exclude documents left with fewer words once cut; 0 keeps them all.
        keep_by: See :class:`KeepOrder`: where a repeated run survives.
        step: Stats name.
    """

    def __init__(
        self,
        tokenizer_path: str,
        min_tokens: int = 50,
        min_doc_words: int = 50,
        keep_by: str | None = None,
        step: str = "substring",
    ):
        """Loads the tokenizer once now, so that a wrong path fails before the run.

        Raises:
            FileNotFoundError: No tokenizer at ``tokenizer_path``.
            ValueError: ``min_tokens`` < 1, ``min_doc_words`` < 0, or a malformed tokenizer or ``keep_by``.
        """
        super().__init__(step)
        if min_tokens < 1:
            raise ValueError(f"min_tokens must be at least 1 token (got {min_tokens}); DataTrove uses 50.")
        if min_doc_words < 0:
            raise ValueError(f"min_doc_words must be 0 (keep every document) or more (got {min_doc_words}).")
        self._spec = TokenizerSpec(tokenizer_path, eos_token=None, bos_token=None, storage_options={})
        load_once(self._spec, self._spec.load)
        self._min_tokens = min_tokens
        self._min_doc_words = min_doc_words
        self._order = KeepOrder(keep_by)

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step as stages: anchored runs of windows, the repeated spans of each anchor, then the cuts."""
        return StagedForm(
            (
                Stage(
                    "AnchoredWindows",
                    {"documents": ("documents",)},
                    self._anchored_windows,
                    {"runs": KEYED, "by_node": KEYED},
                ),
                Stage("RepeatedSpans", {"runs": ("runs",)}, self._repeated_spans, {"spans": KEYED}),
                Stage(
                    "CutSpans",
                    {"documents": ("by_node",), "spans": ("spans",)},
                    self._cut_spans,
                    {"kept": SAME, EXCLUDED: SAME},
                ),
            ),
            input="documents",
            kept=("kept",),
            excluded=(EXCLUDED,),
        )

    def _anchored_windows(self, pipeline, inputs, sides):
        runs, keyed_documents = (
            inputs["documents"]
            | "AnchoredWindows"
            >> beam.ParDo(_AnchoredWindowsFn(self._spec, self._min_tokens, self._order, self._metrics))
            | "SplitRuns" >> beam.ParDo(_SplitRunsFn()).with_outputs("documents", main="runs")
        )
        return {"runs": runs, "by_node": keyed_documents}

    def _repeated_spans(self, pipeline, inputs, sides):
        spans = (
            inputs["runs"]
            | "GroupByAnchor" >> beam.GroupByKey()
            | "RepeatedSpans" >> beam.ParDo(_RepeatedSpansFn(self._min_tokens))
            | "FlattenSpans" >> beam.FlatMap(lambda spans: spans)
        )
        return {"spans": spans}

    def _cut_spans(self, pipeline, inputs, sides):
        outputs = (
            (inputs["documents"], inputs["spans"])
            | "JoinSpans" >> beam.CoGroupByKey()
            | "CutSpans"
            >> beam.ParDo(_CutSpansFn(self._min_doc_words, self._metrics)).with_outputs(EXCLUDED, main="kept")
        )
        return {"kept": outputs.kept, EXCLUDED: outputs[EXCLUDED]}
