"""Ids that several documents share, reported without changing any decision.

Datasets combined from several sources often number their rows from 0 each,
so one ``id`` can name several documents. Steps that compare documents tell
them apart by where they were read (:class:`~beamtrove.document.Origin`), so
such ids change nothing they decide; users still want to know, since the ids
in ``duplicate_of`` and cluster maps then name more than one document.
"""

from __future__ import annotations

import logging

import apache_beam as beam

from beamtrove.document import Document
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages

__all__ = ["SHARED_IDS_STEP", "ReportSharedIds"]

_LOGGER = logging.getLogger(__name__)

#: The stats name of :class:`ReportSharedIds`'s counters.
SHARED_IDS_STEP = "shared_ids"
# Where two documents of an id were read is enough to find them.
_ORIGINS_SHOWN = 2


def _id_and_origin(document: Document) -> tuple[str, tuple[str, int]]:
    origin = document.origin
    return document.id, ("(made in code)", 0) if origin is None else (origin.file, origin.record)


class _CountWithFirstOrigins(beam.CombineFn):
    """How many documents hold an id, and the first origins among theirs."""

    def create_accumulator(self) -> tuple[int, list]:
        return 0, []

    def add_input(self, accumulator, origin):
        count, origins = accumulator
        return count + 1, sorted([*origins, origin])[:_ORIGINS_SHOWN]

    def merge_accumulators(self, accumulators):
        count, origins = 0, []
        for partial_count, partial_origins in accumulators:
            count += partial_count
            origins = sorted(origins + list(partial_origins))[:_ORIGINS_SHOWN]
        return count, origins

    def extract_output(self, accumulator):
        return accumulator


class _CountSharedFn(beam.DoFn):
    def __init__(self, step: str):
        self._metrics = StepMetrics(step)

    def process(self, id_count):
        document_id, (count, origins) = id_count
        if count > 1:
            self._metrics.inc("ids")
            self._metrics.inc("documents", count)
            yield document_id, count, origins


class _Summary(beam.CombineFn):
    """Ids shared, documents holding them, and the smallest such id with its count and first origins."""

    def create_accumulator(self) -> tuple[int, int, tuple | None]:
        return 0, 0, None

    def add_input(self, accumulator, shared):
        return self.merge_accumulators([accumulator, (1, shared[1], shared)])

    def merge_accumulators(self, accumulators):
        ids, documents, smallest = 0, 0, None
        for partial_ids, partial_documents, example in accumulators:
            ids += partial_ids
            documents += partial_documents
            if example is not None and (smallest is None or example < smallest):
                smallest = example
        return ids, documents, smallest

    def extract_output(self, accumulator):
        return accumulator


def _warn(summary: tuple[int, int, tuple | None]) -> None:
    ids, documents, example = summary
    if example is None:
        return
    document_id, count, origins = example
    where = " and ".join(f"{file} (record {record})" for file, record in origins)
    _LOGGER.warning(
        "%d ids are each held by several documents (%d documents in all), e.g. %r by %d, read at %s. Steps tell "
        "documents apart by where they were read, so nothing they decide changes; ids in duplicate_of and cluster "
        "maps may name several documents.",
        ids,
        documents,
        document_id,
        count,
        where,
    )


class ReportSharedIds(beam.PTransform):
    """Counts the ids that several documents share and warns once, naming the smallest such id.

    A branch beside the pipeline: it returns nothing and decides nothing.
    Counters: ``beamtrove/<step>``: ``ids`` (ids held by two documents or
    more) and ``documents`` (the documents holding them).

    Args:
        step: Stats name.
    """

    def __init__(self, step: str = SHARED_IDS_STEP):
        super().__init__()
        self._step = step

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The report as stages: ids keyed, counted per id, then one summary and its warning."""
        return StagedForm(
            (
                Stage("IdAndOrigin", {"documents": ("documents",)}, _key_by_id, {"ids": KEYED}),
                Stage("CountPerId", {"ids": ("ids",)}, self._count_per_id, {"shared": SAME}),
                Stage("Warn", {"shared": ("shared",)}, _summarize, {}, whole=True),
            ),
            input="documents",
            kept=(),
        )

    def _count_per_id(self, pipeline, inputs, sides):
        counted = inputs["ids"] | "CountPerId" >> beam.CombinePerKey(_CountWithFirstOrigins())
        return {"shared": counted | "Shared" >> beam.ParDo(_CountSharedFn(self._step))}

    def expand(self, documents):
        return apply_stages(self.staged_form(), documents)["shared"]


def _key_by_id(pipeline, inputs, sides):
    return {"ids": inputs["documents"] | "IdAndOrigin" >> beam.Map(_id_and_origin)}


def _summarize(pipeline, inputs, sides):
    inputs["shared"] | "Summary" >> beam.CombineGlobally(_Summary()) | "Warn" >> beam.Map(_warn)
    return {}
