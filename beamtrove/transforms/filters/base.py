"""The filter contract and the ``Filter`` transform.

A :class:`DocumentFilter` looks at one document and either keeps it (possibly
rewritten: a line-level rule removes lines, a language filter adds metadata)
or drops it with a :class:`Drop` naming the reason. ``Filter`` applies one to a
PCollection: kept documents go to the main output, dropped ones to the
``excluded`` output with ``filter_reason`` in their metadata (DataTrove's
exclusion writer layout), and a rule that raises, or uses more than its CPU
time on a document, turns the document into a dead letter instead of failing
or stalling the run.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

import apache_beam as beam
from apache_beam import pvalue

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.layout import DEAD_LETTERS, EXCLUDED, FILTER_REASON_KEY
from beamtrove.metrics import StepMetrics
from beamtrove.resources import load_once
from beamtrove.transforms.batching import BatchDoFn
from beamtrove.transforms.cpu_time import CpuTimeLimit, CpuTimeLimitExceeded

__all__ = [
    "DEFAULT_STEP_TIMEOUT",
    "FILTER_REASON_KEY",
    "DocumentFilter",
    "DocumentFormatter",
    "Drop",
    "Filter",
    "Verdict",
    "excluded_output",
    "load_once",
]

#: CPU seconds a filter or formatter may use on one document. Far above what real documents need: the slowest
#: FineWeb filter, Gopher repetition, takes about 2 s per MB of English and less on any run of marks, so only a
#: document of some 15 MB of text, or a rule gone wrong, comes near it.
DEFAULT_STEP_TIMEOUT = 30.0


@dataclasses.dataclass(frozen=True, slots=True)
class Drop:
    """A filter's decision to remove a document.

    Attributes:
        reason: Short stable reason; it names the ``dropped.<reason>`` counter.
        document: The document as the filter annotated it (a language filter
            adds the language it found), written to the exclusion output; the
            input document when ``None``.
    """

    reason: str
    document: Document | None = None


def excluded_output(document: Document, reason: str, **metadata: Any) -> pvalue.TaggedOutput:
    """``document`` for a step's ``excluded`` output, with ``filter_reason`` and ``metadata`` added."""
    metadata = {**document.metadata, **metadata, FILTER_REASON_KEY: reason}
    return pvalue.TaggedOutput(EXCLUDED, dataclasses.replace(document, metadata=metadata))


#: What a filter returns: the document to keep (the input or a rewritten copy) or a ``Drop``.
Verdict = Document | Drop


class DocumentFilter(abc.ABC):
    """A per-document keep-or-drop rule.

    Subclasses hold plain picklable configuration; :meth:`setup` loads models
    and lists once per worker process. Filters never mutate their input: a
    rewritten document is a copy (``dataclasses.replace``).
    """

    #: Default stats name of the step; the excluded documents' directory in pipelines.
    name: ClassVar[str]
    #: Documents :meth:`filter_batch` receives at once (1: no batching).
    batch_size: ClassVar[int] = 1
    #: Whether the step also counts each language's documents: ``language.<key>.in``, ``.out`` and
    #: ``.dropped.<reason>`` (the key of :func:`~beamtrove.languages.language_key`, ``unknown`` without one).
    counts_by_language: ClassVar[bool] = False

    def setup(self) -> None:  # noqa: B027 - optional hook
        """Loads what the filter needs, once per worker process."""

    def preload(self) -> None:  # noqa: B027 - optional hook
        """Loads what :meth:`setup` shares through :func:`load_once` before the workers are forked, as far as it can
        (see :class:`~beamtrove.resources.Preloading`); a filter that loads nothing big loads nothing here."""

    @abc.abstractmethod
    def filter(self, document: Document) -> Verdict:
        """Keeps (returns a document) or drops (returns :class:`Drop`) ``document``."""

    def filter_batch(self, documents: list[Document]) -> list[Verdict]:
        """Verdicts for several documents; override when batching is faster."""
        return [self.filter(document) for document in documents]


class DocumentFormatter(DocumentFilter):
    """A rule that rewrites every document and drops none."""

    @abc.abstractmethod
    def format(self, document: Document) -> Document:
        """The rewritten document."""

    def filter(self, document: Document) -> Verdict:
        return self.format(document)


class _FilterFn(BatchDoFn):
    def __init__(self, rule: DocumentFilter, step: str, limit: CpuTimeLimit | None):
        super().__init__(rule.batch_size)
        self._rule = rule
        self._step = step
        self._limit = limit
        self._metrics = StepMetrics(step)

    def setup(self):
        self._rule.setup()

    def preload(self) -> None:
        self._rule.preload()

    def _verdicts(self, documents: list[Document]) -> list[Verdict]:
        if self._limit is None:
            return self._rule.filter_batch(documents)
        # A batch gets the time of one document: one that uses it up is judged again one document at a time,
        # so that whether a document is a timeout never depends on the documents batched with it.
        return self._limit.run(self._rule.filter_batch, documents)

    def transform_batch(self, documents: list[Document], begun: None) -> list:
        self._metrics.received(len(documents))
        return self._judge(documents)

    def _judge(self, documents: list[Document]) -> list:
        """One output per document: the kept document, or an excluded or dead-letter tagged output."""
        try:
            verdicts = self._verdicts(documents)
        except Exception as exc:  # a batch is retried one by one to find the culprit
            if len(documents) == 1:
                return [self._dead_letter(documents[0], exc)]
            return [output for document in documents for output in self._judge([document])]
        outputs = []
        for document, verdict in zip(documents, verdicts, strict=True):
            if isinstance(verdict, Drop):
                self._metrics.dropped(verdict.reason)
                outputs.append(excluded_output(verdict.document or document, verdict.reason))
            else:
                self._metrics.emitted()
                outputs.append(verdict)
            if self._rule.counts_by_language:
                self._count_language(verdict.document or document if isinstance(verdict, Drop) else verdict, verdict)
        return outputs

    def _count_language(self, document: Document, verdict: Verdict) -> None:
        prefix = f"language.{language_key(document.metadata) or 'unknown'}."
        self._metrics.inc(prefix + "in")
        self._metrics.inc(prefix + ("dropped." + verdict.reason if isinstance(verdict, Drop) else "out"))

    def _dead_letter(self, document: Document, exc: Exception):
        if isinstance(exc, CpuTimeLimitExceeded):
            reason, message = "timeout", str(exc)
        else:
            reason, message = type(exc).__name__, DeadLetter.describe(exc)
        self._metrics.errored(reason)
        dead_letter = DeadLetter.of_document(self._step, reason, message, document)
        return pvalue.TaggedOutput(DEAD_LETTERS, dead_letter)


class Filter(beam.PTransform):
    """Applies a :class:`DocumentFilter` to every document.

    Returns a ``DoOutputsTuple``: ``.kept`` (the main output), ``.excluded``
    (dropped documents, ``filter_reason`` in their metadata) and
    ``.dead_letters`` (documents the rule raised on, or used more than
    ``timeout`` CPU seconds on). Counters go to ``beamtrove/<step>``: ``in``,
    ``out``, ``dropped.<reason>``, ``errors.<exception type>``,
    ``errors.timeout``.

    The limit is on the CPU time of the thread that runs the rule, which
    machine load does not change, so the same input gives the same dead
    letters on a busy machine as on an idle one, on any runner (see
    :mod:`beamtrove.transforms.cpu_time`).

    Args:
        rule: The filter (or formatter) to apply.
        step: Stats name of the step; defaults to the rule's ``name``.
        timeout: CPU seconds the rule may use on one document; ``None`` for
            no limit.

    Raises:
        ValueError: ``timeout`` is not a positive number of seconds or None.
    """

    def __init__(self, rule: DocumentFilter, step: str | None = None, timeout: float | None = DEFAULT_STEP_TIMEOUT):
        super().__init__()
        self._rule = rule
        self._step = step or rule.name
        self._limit = None if timeout is None else CpuTimeLimit(timeout, self._step)

    @property
    def step(self) -> str:
        """The step's stats name."""
        return self._step

    def step_fn(self) -> beam.DoFn:
        """The DoFn this transform applies, for running the step inside another DoFn."""
        return _FilterFn(self._rule, self._step, self._limit)

    def expand(self, documents):
        return documents | beam.ParDo(self.step_fn()).with_outputs(EXCLUDED, DEAD_LETTERS, main="kept")
