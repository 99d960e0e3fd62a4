"""Connected components of a graph held as a PCollection of edges, without a single-worker stage.

The graph is shrunk to stars by alternating the *large-star* and *small-star*
operations of Kiveris et al., "Connected Components in MapReduce and Beyond"
(SoCC 2014). Both keep the components unchanged and each is one GroupByKey
over nodes, so every worker only ever holds the neighbours of the nodes it
was given. Once nothing changes, every component is a star around its
smallest node. A Beam graph has no loops, so ``max_rounds`` rounds are
unrolled; once a round changed nothing, the links skip the rounds left. The
counters ``changed.round_NN`` show each round's work, and a round without
one proves convergence. If the bound is reached first, the
result is still safe: a node is only ever assigned to a smaller node of its
own component, and the smallest node of every component is never assigned,
so each component keeps at least one member (``unconverged`` counts the
nodes still pointing at more than one node).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beamtrove.metrics import StepMetrics

__all__ = ["Component", "ConnectedComponents"]

_CHANGES = "changes"
_CONVERGED = "converged"


class Component(NamedTuple):
    """Where a node belongs.

    Attributes:
        node: The node.
        root: The smallest node of its component (the node itself for the root).
        size: Nodes in the component.
    """

    node: Any
    root: Any
    size: int


class _CountingChanges(beam.DoFn):
    """A round's DoFn that reports the links it changed: as a counter, and per bundle on the ``changes`` output."""

    def __init__(self, metrics: StepMetrics, counter: str):
        self._metrics = metrics
        self._counter = counter

    def start_bundle(self):
        self._changes = 0

    def changed(self, links: int) -> None:
        self._metrics.inc(self._counter, links)
        self._changes += links

    def finish_bundle(self):
        if self._changes:
            yield beam.pvalue.TaggedOutput(_CHANGES, GlobalWindows.windowed_value(self._changes))


class _LargeStar(_CountingChanges):
    """Links every larger neighbour of a node to the smallest node of its neighbourhood."""

    def process(self, grouped):
        node, neighbours = grouped
        neighbours = set(neighbours)
        smallest = min(*neighbours, node)
        larger = [neighbour for neighbour in neighbours if neighbour > node]
        if smallest != node and larger:
            self.changed(len(larger))
        for neighbour in larger:
            yield neighbour, smallest


class _SmallStar(_CountingChanges):
    """Links a node and its smaller neighbours to the smallest of them; emits each edge both ways."""

    def process(self, grouped):
        node, smaller = grouped
        smaller = set(smaller)
        smallest = min(smaller)
        if len(smaller) > 1:
            self.changed(len(smaller) - 1)
        smaller.discard(smallest)
        smaller.add(node)
        for member in smaller:
            yield member, smallest
            yield smallest, member


class _SetAsideOnceConverged(beam.DoFn):
    """Passes links on to the next round, or sets them all aside once a round changed nothing.

    The side input holds one count per bundle of the last round that changed
    links (not per link, so it does not grow with the data), and only its
    first is read: a sum over a global combine would cost each round a
    shuffle of its own.
    """

    def process(self, link, changes: Iterable[int]):
        if next(iter(changes), 0):
            yield link
        else:
            yield beam.pvalue.TaggedOutput(_CONVERGED, link)


class _AssignToSmallest(beam.DoFn):
    """A node's root: the smallest of its smaller neighbours, keyed by that root."""

    def __init__(self, metrics: StepMetrics):
        self._metrics = metrics

    def process(self, grouped):
        node, smaller = grouped
        smaller = set(smaller)
        if len(smaller) > 1:
            self._metrics.inc("unconverged")
        yield min(smaller), node


class _EmitComponent(beam.DoFn):
    def __init__(self, metrics: StepMetrics):
        self._metrics = metrics

    def process(self, grouped):
        root, members = grouped
        members = list(members)
        size = len(members) + 1
        self._metrics.inc("components")
        self._metrics.observe("component_size", size)
        yield Component(root, root, size)
        for member in members:
            yield Component(member, root, size)


def _both_ways(edge: tuple[Any, Any]) -> Iterable[tuple[Any, Any]]:
    first, second = edge
    if first != second:
        yield first, second
        yield second, first


def _larger_first(edge: tuple[Any, Any]) -> Iterable[tuple[Any, Any]]:
    first, second = edge
    if first != second:
        yield (first, second) if first > second else (second, first)


class ConnectedComponents(beam.PTransform):
    """Edges in, one :class:`Component` per node that has an edge out.

    Nodes are any values that compare with each other and have a
    deterministic coder (strings, integers, tuples of those). Edges may repeat
    and come in either direction; self-loops are ignored. The root of a
    component is its smallest node.

    Counters go to ``beamtrove/<step>``: ``changed.round_NN`` (edges moved by
    round NN), ``unconverged``, ``components`` and the ``component_size``
    distribution.

    Args:
        max_rounds: Large-star/small-star rounds to unroll. A chain of 10,000
            nodes needs about 15; the default leaves room for far larger graphs.
        step: Stats name of the step.
    """

    def __init__(self, max_rounds: int = 30, step: str = "connected_components"):
        super().__init__()
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1 (got {max_rounds}).")
        self._max_rounds = max_rounds
        self._metrics = StepMetrics(step)

    def expand(self, edges):
        links = edges | "BothWays" >> beam.FlatMap(_both_ways)
        converged = []
        changes = None
        for number in range(1, self._max_rounds + 1):
            if changes is not None:
                routed = links | f"Round{number}Route" >> beam.ParDo(
                    _SetAsideOnceConverged(), beam.pvalue.AsIter(changes)
                ).with_outputs(_CONVERGED, main="active")
                converged.append(routed[_CONVERGED])
                links = routed.active
            links, changes = self._round(links, number)
        return (
            (*converged, links)
            | "AllLinks" >> beam.Flatten()
            | "LargerFirst" >> beam.FlatMap(_larger_first)
            | "GroupByNode" >> beam.GroupByKey()
            | "AssignToSmallest" >> beam.ParDo(_AssignToSmallest(self._metrics))
            | "GroupByRoot" >> beam.GroupByKey()
            | "EmitComponents" >> beam.ParDo(_EmitComponent(self._metrics))
        )

    def _round(self, links, number: int):
        """One large-star and small-star round: ``(links, changes per bundle)``."""
        counter = f"changed.round_{number:02d}"
        large = (
            links
            | f"Round{number}GroupNeighbours" >> beam.GroupByKey()
            | f"Round{number}LargeStar"
            >> beam.ParDo(_LargeStar(self._metrics, counter)).with_outputs(_CHANGES, main="links")
        )
        small = (
            large.links
            | f"Round{number}GroupSmaller" >> beam.GroupByKey()
            | f"Round{number}SmallStar"
            >> beam.ParDo(_SmallStar(self._metrics, counter)).with_outputs(_CHANGES, main="links")
        )
        changes = (large[_CHANGES], small[_CHANGES]) | f"Round{number}Changes" >> beam.Flatten()
        return small.links, changes
