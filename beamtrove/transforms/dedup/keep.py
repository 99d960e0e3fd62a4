"""Which document of a duplicate group survives, and how the others leave.

Every dedup transform orders documents the same way: by a metadata field
when ``keep_by`` names one (``"date"`` keeps the earliest, ``"-score"`` the
highest), then by id, then by where the document was read (its
:class:`~beamtrove.document.Origin`). The order is a plain sortable value, the
*node* of the document, so groups and graph components pick their survivor with
``min``. A node names one document: users' ids repeat (two datasets that each
number their rows from 0), so documents are joined and told apart by node,
never by id; the id stays what users see and what the order breaks ties on first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any, NamedTuple

import apache_beam as beam

from beamtrove.coders import DocumentCoder
from beamtrove.document import Document
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.stages import StagedForm, applied_outputs

__all__ = ["INDEX", "INPUT", "ClusterMember", "DedupOutputs", "DedupStep", "KeepOrder", "index_node", "input_node"]

# Documents whose keep_by value is a number sort before those with a string, which sort before those without one.
_NUMBER, _STRING, _MISSING = 0, 1, 2


def _is_nan(value: float | int | str) -> bool:
    return isinstance(value, float) and math.isnan(value)


@dataclasses.dataclass(frozen=True)
class KeepOrder:
    """The order in which duplicates are preferred; the first one is kept.

    Attributes:
        keep_by: A metadata field to prefer the smallest value of, or with a
            leading ``-`` the largest; ``None`` to prefer the smallest id.
            Documents without the field come last; ties go to the smallest id.
    """

    keep_by: str | None = None

    def __post_init__(self):
        if self.keep_by is not None and not self.keep_by.lstrip("-"):
            raise ValueError(f"keep_by must name a metadata field, optionally after '-' (got {self.keep_by!r}).")

    def node(self, document: Document) -> tuple:
        """The document's place in the order, unique to it: ``(rank, (origin file, origin record))``.

        A document made in code, with no origin, is told apart by a digest of
        its content instead, so only documents equal in every field share a node.
        """
        origin = document.origin
        if origin is None:
            origin = ("content:" + hashlib.blake2b(DocumentCoder().encode(document), digest_size=16).hexdigest(), 0)
        return self.rank(document), (origin[0], origin[1])

    def rank(self, document: Document) -> Any:
        """Where the order puts the document, before its origin breaks ties: its id, or ``(kind, value, id)``.

        Dedup indexes store ranks: their documents are only ordered among themselves, and an origin would
        tie an index to the paths its input was read from.
        """
        if self.keep_by is None:
            return document.id
        descending = self.keep_by.startswith("-")
        value = document.metadata.get(self.keep_by.lstrip("-"))
        # NaN compares false with everything and would break the order; it counts as missing.
        if isinstance(value, bool) or not isinstance(value, int | float | str) or _is_nan(value):
            return (_MISSING, 0, document.id)
        if isinstance(value, str):
            # Negated code points, then a terminator above them all, reverse the string order.
            return (_STRING, (*(-ord(char) for char in value), 1) if descending else value, document.id)
        return (_NUMBER, -value if descending else value, document.id)

    @staticmethod
    def document_id(node: tuple) -> str:
        """The id inside a :meth:`node`."""
        return KeepOrder.ranked_id(node[0])

    @staticmethod
    def ranked_id(rank: Any) -> str:
        """The id inside a :meth:`rank`."""
        return rank[-1] if isinstance(rank, tuple) else rank


#: The first item of an indexed document's node in a run against dedup indexes; an input document's is INPUT.
INDEX, INPUT = 0, 1


def index_node(position: int, rank: Any) -> tuple:
    """A dedup index document's node in a run against indexes: before every input document, in the order named.

    ``rank`` is the :meth:`KeepOrder.rank` the index stored.
    """
    return (INDEX, position, rank)


def input_node(node: Any) -> tuple:
    """An input document's node in a run against indexes: after every indexed document."""
    return (INPUT, node)


class ClusterMember(NamedTuple):
    """A removed duplicate and the document kept in its place.

    Attributes:
        id: The removed document.
        kept_id: The document kept for its group.
        cluster_size: Documents in the group, the kept one included.
    """

    id: str
    kept_id: str
    cluster_size: int

    def to_row(self) -> dict[str, Any]:
        """The member as a JSON object."""
        return self._asdict()


class DedupOutputs(NamedTuple):
    """What a dedup transform returns.

    Attributes:
        kept: The documents kept.
        excluded: The removed documents, with ``filter_reason`` and ``duplicate_of`` in their metadata.
        clusters: One :class:`ClusterMember` per removed document.
    """

    kept: Any
    excluded: Any
    clusters: Any


class DedupStep(beam.PTransform):
    """A dedup step, declared once as its :class:`~beamtrove.transforms.stages.StagedForm`.

    Applied to documents in one pipeline it runs the form's stages in one graph and returns
    :class:`DedupOutputs`; a staged run (:mod:`beamtrove.execution.jobs.staged`) runs the same stages as tasks.

    Args:
        step: The step's one name: its stats name and, in a pipeline, its folder under ``excluded/`` and
            ``clusters/`` and its bar in the report's funnel.
    """

    def __init__(self, step: str):
        super().__init__()
        self._metrics = StepMetrics(step)

    @property
    def step(self) -> str:
        """The step's name."""
        return self._metrics.step

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step's stages, from the ``documents`` dataset to its kept, excluded and cluster datasets.

        Args:
            partitions: How many partitions a staged run spreads the stages' keyed records over; 1 in one
                pipeline. The kept and excluded documents do not depend on it.
        """
        raise NotImplementedError

    def expand(self, documents):
        return DedupOutputs(*applied_outputs(self.staged_form(), documents))
