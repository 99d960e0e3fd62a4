"""C4-style span dedup: sentence spans repeated across the corpus are cut out of all but one document.

Boilerplate that survives extraction (cookie notices, newsletter pitches,
"all rights reserved" blocks) repeats verbatim over thousands of pages. As in
C4, every run of ``span_sentences`` consecutive sentences is hashed after
:func:`~beamtrove.text.normalize_text` (sentences of
punctuation alone are skipped); a span seen more
than once is kept where it first occurs (the first document in
:class:`KeepOrder`, then the first position) and removed everywhere else,
inside the same document too, with the whitespace before it. Documents
left with fewer than ``min_doc_words`` words or ``min_doc_sentences``
sentences, or with no text at all, are dropped.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import apache_beam as beam
import regex

from beamtrove.document import Document
from beamtrove.layout import EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.text import TERMINAL_PUNCTUATION, normalize_text
from beamtrove.transforms.dedup.keep import INDEX, DedupStep, KeepOrder, input_node
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm

if TYPE_CHECKING:
    from beamtrove.transforms.dedup.index import DedupIndexes

__all__ = ["SentenceDedup", "span_digests", "split_sentences"]

# A sentence ends after terminal punctuation (and the quotes or brackets closing
# it) followed by whitespace, or at a line break.
_SENTENCE_END = regex.compile(
    "[" + regex.escape("".join(TERMINAL_PUNCTUATION)) + "]+[\"'\u201d\u2019\u00bb)\\]]*\\s+|\\n\\s*",
)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the sentences of ``text``, trailing whitespace included.

    The sentences tile the text: joining the slices gives ``text`` back.
    """
    bounds = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            bounds.append((start, match.end()))
            start = match.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


def _worded_sentences(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, normalized text)`` of the sentences that hold words.

    A sentence of punctuation alone (the dots of an ellipsis written
    ``. . .``) would make spans that differ only by it look equal.
    """
    sentences = []
    for start, end in split_sentences(text):
        normalized = normalize_text(text[start:end])
        if normalized:
            sentences.append((start, end, normalized))
    return sentences


def span_digests(text: str, span_sentences: int) -> list[bytes]:
    """The 12-byte digest of every run of ``span_sentences`` consecutive worded sentences of ``text``, in order."""
    sentences = [normalized for _, _, normalized in _worded_sentences(text)]
    return [
        hashlib.blake2b(
            "\n".join(sentences[first : first + span_sentences]).encode("utf-8", "surrogatepass"), digest_size=12
        ).digest()
        for first in range(len(sentences) - span_sentences + 1)
    ]


class _SpanKeysFn(beam.DoFn):
    def __init__(self, span_sentences: int, order: KeepOrder):
        self._span_sentences = span_sentences
        self._order = order

    def process(self, document: Document):
        node = input_node(self._order.node(document))
        yield beam.pvalue.TaggedOutput("documents", (node, document))
        for first, digest in enumerate(span_digests(document.text, self._span_sentences)):
            yield digest, (node, first)


def _repeats(grouped):
    """Every occurrence of an input document but the first, with the index position of the first if it is indexed."""
    # Two passes rather than a sorted copy: boilerplate spans occur on millions of pages.
    _, occurrences = grouped
    first = min(occurrences)
    (first_kind, *first_node), _ = first
    source = first_node[0] if first_kind == INDEX else None
    for occurrence in occurrences:
        if occurrence != first and occurrence[0][0] != INDEX:
            node, number = occurrence
            yield node, (number, source)


def _cut(text: str, sentences: list[tuple[int, int, str]], cut: set[int]) -> str:
    """``text`` without the worded sentences numbered in ``cut``, each with the whitespace before it.

    The whitespace before a sentence, not after it, leaves with it (as in
    DataTrove), so a span cut at the end of a text takes the space that led
    to it; the result is stripped, since a cut at either end leaves a stray
    separator.
    """
    bounds = split_sentences(text)
    content_ends = [start + len(text[start:end].rstrip()) for start, end in bounds]
    # Where the whitespace before each sentence begins: the content end of the sentence before it.
    leading_from = dict(zip((start for start, _ in bounds), [0, *content_ends[:-1]], strict=True))
    pieces, position = [], 0
    for number in sorted(cut):
        start, end, _ = sentences[number]
        # Between two cut sentences, what holds no words (the dots of an ellipsis) goes too.
        cut_from = position if number - 1 in cut else max(position, leading_from[start])
        pieces.append(text[position:cut_from])
        position = max(position, start + len(text[start:end].rstrip()))
    pieces.append(text[position:])
    return "".join(pieces).strip()


class _CutRepeatsFn(beam.DoFn):
    def __init__(
        self,
        span_sentences: int,
        min_doc_words: int,
        min_doc_sentences: int,
        index_names: Sequence[str],
        metrics: StepMetrics,
    ):
        self._span_sentences = span_sentences
        self._index_names = index_names
        self._min_doc_words = min_doc_words
        self._min_doc_sentences = min_doc_sentences
        self._metrics = metrics

    def process(self, joined):
        _, (documents, repeats) = joined
        repeated_spans = set()
        for first, source in repeats:
            repeated_spans.add(first)
            if source is not None:
                self._metrics.inc(f"spans_in_index.{self._index_names[source]}")
        for document in documents:
            self._metrics.received()
            self._metrics.chars("in", document.text)
            if not repeated_spans:
                self._metrics.emitted()
                self._metrics.chars("out", document.text)
                yield document
                continue
            sentences = _worded_sentences(document.text)
            cut = {number for first in repeated_spans for number in range(first, first + self._span_sentences)}
            text = _cut(document.text, sentences, cut)
            self._metrics.inc("spans_removed", len(repeated_spans))
            self._metrics.inc("chars_removed", len(document.text) - len(text))
            if self._too_short(text):
                self._metrics.dropped("sentence_dedup_too_short")
                yield excluded_output(document, "sentence_dedup_too_short")
                continue
            self._metrics.emitted()
            self._metrics.chars("out", text)
            yield dataclasses.replace(document, text=text)

    def _too_short(self, text: str) -> bool:
        # A document whose every worded sentence was a repeat is gone whatever the minimums.
        sentences_left = len(_worded_sentences(text))
        return not sentences_left or sentences_left < self._min_doc_sentences or len(text.split()) < self._min_doc_words


class SentenceDedup(DedupStep):
    """Cuts sentence spans repeated across documents out of all but their first occurrence.

    Returns :class:`DedupOutputs` (``clusters`` empty): ``.kept`` (documents, shortened where spans
    were cut) and ``.excluded`` (cut documents left empty, with fewer than
    ``min_doc_words`` words or with fewer than ``min_doc_sentences``
    sentences, reason ``sentence_dedup_too_short``). Documents with nothing
    cut are kept as they are. Counters:
    ``beamtrove/<step>``: ``in``, ``out``, ``dropped.sentence_dedup_too_short``,
    ``spans_removed``, ``chars_removed``.

    Args:
        span_sentences: Sentences per span (C4 used 3).
        min_doc_words: Drop documents with fewer whitespace-separated words once cut.
        min_doc_sentences: Drop documents with fewer sentences holding words once cut (DataTrove's default, 3).
        keep_by: See :class:`KeepOrder`: where a repeated span survives.
        step: Stats name.
        against: Dedup indexes whose spans come before every input document's:
            a span they hold is cut wherever the input has it (counter
            ``spans_in_index.<name>``).

    Raises:
        ValueError: ``span_sentences`` below 1, or an index of other spans.
    """

    def __init__(
        self,
        span_sentences: int = 3,
        min_doc_words: int = 50,
        keep_by: str | None = None,
        step: str = "sentence",
        min_doc_sentences: int = 3,
        against: DedupIndexes | None = None,
    ):
        super().__init__(step)
        if span_sentences < 1:
            raise ValueError(f"span_sentences must be at least 1 (got {span_sentences}).")
        if against is not None:
            for manifest in against.manifests:
                manifest.check_sentence(span_sentences)
        self._against = against
        self._span_sentences = span_sentences
        self._min_doc_words = min_doc_words
        self._min_doc_sentences = min_doc_sentences
        self._order = KeepOrder(keep_by)

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step as stages: span keys, the repeats of each span, then the cuts of each document."""
        against = self._against is not None
        index = (Stage("ReadIndex", {}, self._read_index, {"indexed": KEYED}, whole=True),) if against else ()
        return StagedForm(
            (
                Stage("SpanKeys", {"documents": ("documents",)}, self._span_keys, {"spans": KEYED, "by_node": KEYED}),
                *index,
                Stage(
                    "Repeats",
                    {"spans": ("spans", "indexed") if against else ("spans",)},
                    self._repeats,
                    {"repeats": KEYED},
                ),
                Stage(
                    "CutRepeats",
                    {"documents": ("by_node",), "repeats": ("repeats",)},
                    self._cut_repeats,
                    {"kept": SAME, EXCLUDED: SAME},
                ),
            ),
            input="documents",
            kept=("kept",),
            excluded=(EXCLUDED,),
        )

    def _span_keys(self, pipeline, inputs, sides):
        fn = _SpanKeysFn(self._span_sentences, self._order)
        spans, keyed_documents = inputs["documents"] | "SpanKeys" >> beam.ParDo(fn).with_outputs(
            "documents", main="spans"
        )
        return {"spans": spans, "by_node": keyed_documents}

    def _read_index(self, pipeline, inputs, sides):
        return {"indexed": pipeline | "ReadIndex" >> self._against.read("sentence")}

    def _repeats(self, pipeline, inputs, sides):
        return {"repeats": inputs["spans"] | "GroupBySpan" >> beam.GroupByKey() | "Repeats" >> beam.FlatMap(_repeats)}

    def _cut_repeats(self, pipeline, inputs, sides):
        index_names = self._against.names if self._against is not None else []
        cut = _CutRepeatsFn(
            self._span_sentences, self._min_doc_words, self._min_doc_sentences, index_names, self._metrics
        )
        outputs = (
            (inputs["documents"], inputs["repeats"])
            | "JoinRepeats" >> beam.CoGroupByKey()
            | "CutRepeats" >> beam.ParDo(cut).with_outputs(EXCLUDED, main="kept")
        )
        return {"kept": outputs.kept, EXCLUDED: outputs[EXCLUDED]}
