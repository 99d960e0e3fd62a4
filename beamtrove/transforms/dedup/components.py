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

The rounds are declared as stages (:mod:`beamtrove.transforms.stages`): one
pipeline applies them as one graph, and a staged run gives every task one
partition of the links, keyed by node, so no task holds the whole graph.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beamtrove.metrics import StepMetrics
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages

__all__ = ["COMPONENTS", "Component", "ConnectedComponents"]

#: The dataset of the components' stages that holds the :class:`Component` s.
COMPONENTS = "components"
_CHANGES = "changes"
_CONVERGED = "converged"
_LARGER_FIRST, _ASSIGNED = "cc-larger-first", "cc-assigned"


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

    The side inputs hold one count per bundle of the last round's two
    operations that changed links (not per link, so they do not grow with the
    data), and only their first is read: a sum over a global combine would cost
    each round a shuffle of its own.
    """

    def process(self, link, large_changes: Iterable[int], small_changes: Iterable[int]):
        if next(iter(large_changes), 0) or next(iter(small_changes), 0):
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

    The same work is also a chain of stages (:meth:`stages`), each keyed by
    node: a staged run gives each of its tasks one partition of the links, and
    the tasks of the rounds after convergence read nothing and run nothing.

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

    def stages(self, edges: Sequence[str]) -> tuple[Stage, ...]:
        """The components as stages, from the datasets ``edges`` to :data:`COMPONENTS` (``Component`` s).

        Round NN is two stages, each a ``GroupByKey`` over nodes. From round 2 on,
        a round's first stage reads the previous round's changes whole, and sets
        every link aside once that round changed none; the stages of the rounds
        left then read nothing (:attr:`Stage.nothing_from_nothing`).
        """
        rounds = self._max_rounds
        stages = [_stage("BothWays", {"edges": tuple(edges)}, self._both_ways, {_links(0): KEYED})]
        for number in range(1, rounds + 1):
            writes = {_large(number): KEYED, _changes("large", number): SAME}
            sides = {}
            if number > 1:
                writes[_converged(number)] = SAME
                sides = {tag: _changes(tag, number - 1) for tag in ("large", "small")}
            large_star = functools.partial(self._large_star, number=number)
            small_star = functools.partial(self._small_star, number=number)
            stages += [
                _stage(f"Round{number:02d}LargeStar", {"links": (_links(number - 1),)}, large_star, writes, sides),
                _stage(
                    f"Round{number:02d}SmallStar",
                    {"large": (_large(number),)},
                    small_star,
                    {_links(number): KEYED, _changes("small", number): SAME},
                ),
            ]
        every_link = (*(_converged(number) for number in range(2, rounds + 1)), _links(rounds))
        return (
            *stages,
            _stage("LargerFirst", {"links": every_link}, self._larger_first, {_LARGER_FIRST: KEYED}),
            _stage("AssignToSmallest", {"links": (_LARGER_FIRST,)}, self._assign, {_ASSIGNED: KEYED}),
            _stage("EmitComponents", {"assigned": (_ASSIGNED,)}, self._emit, {COMPONENTS: SAME}),
        )

    def expand(self, edges):
        return apply_stages(StagedForm(self.stages(("edges",)), "edges", kept=(COMPONENTS,)), edges)[COMPONENTS]

    def _both_ways(self, pipeline, inputs, sides):
        return {_links(0): inputs["edges"] | "BothWays" >> beam.FlatMap(_both_ways)}

    def _large_star(self, pipeline, inputs, sides, *, number: int):
        links, written = inputs["links"], {}
        if number > 1:
            route = _SetAsideOnceConverged()
            routed = links | f"Round{number}Route" >> beam.ParDo(
                route, beam.pvalue.AsIter(sides["large"]), beam.pvalue.AsIter(sides["small"])
            ).with_outputs(_CONVERGED, main="active")
            links, written[_converged(number)] = routed.active, routed[_CONVERGED]
        large = (
            links
            | f"Round{number}GroupNeighbours" >> beam.GroupByKey()
            | f"Round{number}LargeStar"
            >> beam.ParDo(_LargeStar(self._metrics, _counter(number))).with_outputs(_CHANGES, main="links")
        )
        return {**written, _large(number): large.links, _changes("large", number): large[_CHANGES]}

    def _small_star(self, pipeline, inputs, sides, *, number: int):
        small = (
            inputs["large"]
            | f"Round{number}GroupSmaller" >> beam.GroupByKey()
            | f"Round{number}SmallStar"
            >> beam.ParDo(_SmallStar(self._metrics, _counter(number))).with_outputs(_CHANGES, main="links")
        )
        return {_links(number): small.links, _changes("small", number): small[_CHANGES]}

    def _larger_first(self, pipeline, inputs, sides):
        return {_LARGER_FIRST: inputs["links"] | "LargerFirst" >> beam.FlatMap(_larger_first)}

    def _assign(self, pipeline, inputs, sides):
        assigned = (
            inputs["links"]
            | "GroupByNode" >> beam.GroupByKey()
            | "AssignToSmallest" >> beam.ParDo(_AssignToSmallest(self._metrics))
        )
        return {_ASSIGNED: assigned}

    def _emit(self, pipeline, inputs, sides):
        components = (
            inputs["assigned"]
            | "GroupByRoot" >> beam.GroupByKey()
            | "EmitComponents" >> beam.ParDo(_EmitComponent(self._metrics))
        )
        return {COMPONENTS: components}


def _stage(name: str, reads, run, writes, sides=None) -> Stage:
    # Each reads links of its partition alone, and gives nothing from nothing.
    return Stage(name, reads, run, writes, sides or {}, nothing_from_nothing=True)


def _counter(number: int) -> str:
    return f"changed.round_{number:02d}"


def _links(number: int) -> str:
    """The links after round ``number`` (0: the edges, both ways), keyed by node."""
    return f"cc-links-{number:02d}"


def _large(number: int) -> str:
    return f"cc-large-{number:02d}"


def _changes(operation: str, number: int) -> str:
    """One count per bundle of round ``number``'s ``large`` or ``small`` star that changed links."""
    return f"cc-{operation}-changes-{number:02d}"


def _converged(number: int) -> str:
    """The links set aside before round ``number``, the round before it having changed none."""
    return f"cc-converged-{number:02d}"
