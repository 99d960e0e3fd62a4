"""Connected components of a dump-sized link graph as staged tasks: memory per worker, wall, rounds, correctness.

A synthetic graph of near-duplicate links is generated inside the first
stage's tasks (nothing of it is ever whole in one process): components of
sizes drawn from a power law (most of 2 or 3 documents, a tail up to
``--max_size``), each a random recursive tree (what MinHash's band links
look like: members linked to earlier members), one in ten a chain (the
shape that needs the most rounds), plus 20 % extra links within each
component; node labels are scrambled by a bijection, so the smallest node
of a component is anywhere in it. Edges come in both directions.

The stages are those ``beamtrove run dedup --staged`` runs for MinHash
(:meth:`beamtrove.transforms.dedup.ConnectedComponents.stages`), fused as a
staged job fuses them, each task run by the staged engine's
:func:`~beamtrove.execution.jobs.staged.kind.run_task` over its partition's
dataset files, by ``--workers`` processes forked from this one once it has
imported Beam. A task whose stage gives nothing from nothing and whose
partition holds nothing is done without a pipeline, as a staged job does.
The number of partitions is chosen so a task's links fit ``--memory``.

Printed: links, nodes, components, partitions, the rounds that changed links,
the wall of the stages, the highest peak RSS of any worker (goal: no process
above 1.2x ``--memory``), and whether every node's component (root and size)
is what a plain union-find over the same links gives (run afterwards, in
this process, and not counted in the workers' memory).

Usage:
    python -m benchmarks.components_scale [--links 30000000] [--workers 2] [--memory 1GiB] [--max_size 100000]
        [--seed 1] [--max_rounds 30] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import pathlib
import resource
import shutil
import time
from collections.abc import Iterator

import apache_beam as beam
import numpy as np

from beamtrove.execution.jobs.staged.datasets import read_records, written_files
from beamtrove.execution.jobs.staged.kind import run_task
from beamtrove.execution.jobs.staged.plan import fused
from beamtrove.execution.jobs.staged.tasks import DATA_DIR, TaskFiles
from beamtrove.options import byte_size
from beamtrove.stats import merge_stats
from beamtrove.transforms.dedup import ConnectedComponents
from beamtrove.transforms.dedup.components import COMPONENTS
from beamtrove.transforms.stages import SAME, Stage
from benchmarks.common import GIB, Results, add_workdir_arguments, argument_parser, verdict

_GENERATE = "Generate"
_EDGES = "edges"
_STEP = "connected_components"
# Components per generating bundle: a few thousand edges in memory at a time.
_COMPONENTS_PER_CHUNK = 2_000
#: Bytes a task holds per link of its partition at its peak, its 0.2 GiB of Python and Beam aside: 3,000,000
#: links over 3 partitions (1.8 million records a task) peaked at 0.64 GiB. The partitions are sized by it.
BYTES_PER_LINK = 500
_CHAIN_SHARE, _EXTRA_SHARE, _POWER = 0.1, 0.2, 2.2


class Graph:
    """The synthetic graph: component sizes, node offsets and the label bijection, all from the seed.

    Args:
        links: At least this many links (the last component may pass it).
        max_size: The largest component.
        seed: Everything follows from it.
    """

    def __init__(self, links: int, max_size: int, seed: int):
        rng = np.random.default_rng(seed)
        sizes: list[np.ndarray] = []
        total = 0
        while total < links:
            drawn = np.minimum(rng.zipf(_POWER, 1 << 20) + 1, max_size)
            edges = np.cumsum(_edges_of(drawn))
            cut = int(np.searchsorted(edges, links - total)) + 1
            sizes.append(drawn[:cut])
            total += int(edges[min(cut, len(edges)) - 1])
        self.sizes = np.concatenate(sizes)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.nodes = int(self.sizes.sum())
        self.links = total
        self.seed = seed
        # x -> (a x + b) mod n, a bijection of [0, n) when a and n are coprime.
        self._a = next(a for a in range(self.nodes // 2 + 7919, 1 << 62) if math.gcd(a, self.nodes) == 1)
        self._b = int(rng.integers(0, self.nodes))

    def label(self, positions: np.ndarray) -> np.ndarray:
        """The node labels of positions (an order in which each component's nodes are consecutive)."""
        return (positions.astype(np.int64) * self._a + self._b) % self.nodes

    def chunks(self) -> int:
        return math.ceil(len(self.sizes) / _COMPONENTS_PER_CHUNK)

    def edges(self, chunk: int) -> Iterator[tuple[int, int]]:
        """The edges of the components of one chunk, deterministic for (seed, chunk)."""
        rng = np.random.default_rng([self.seed, chunk])
        first = chunk * _COMPONENTS_PER_CHUNK
        for index in range(first, min(first + _COMPONENTS_PER_CHUNK, len(self.sizes))):
            size, offset = int(self.sizes[index]), int(self.offsets[index])
            members = np.arange(1, size)
            chain = rng.random() < _CHAIN_SHARE
            parents = members - 1 if chain else (rng.random(size - 1) * members).astype(np.int64)
            extra = int(_EXTRA_SHARE * (size - 1))
            first_ends = np.concatenate([members, rng.integers(0, size, extra)])
            second_ends = np.concatenate([parents, rng.integers(0, size, extra)])
            flip = rng.random(len(first_ends)) < 0.5
            first_ends, second_ends = np.where(flip, second_ends, first_ends), np.where(flip, first_ends, second_ends)
            for one, other in zip(self.label(first_ends + offset), self.label(second_ends + offset), strict=True):
                yield int(one), int(other)


def _edges_of(sizes: np.ndarray) -> np.ndarray:
    return (sizes - 1) + (_EXTRA_SHARE * (sizes - 1)).astype(np.int64)


class _Plan:
    """What :func:`run_task` asks of a staged job's plan: the partitions, and each task's stage."""

    def __init__(self, graph: Graph, partitions: int, max_rounds: int):
        self.graph = graph
        self.partitions = partitions
        self._components = ConnectedComponents(max_rounds, step=_STEP)
        self.stages = self._stages(0)

    def _stages(self, partition: int) -> tuple[Stage, ...]:
        generate = Stage(_GENERATE, {}, functools.partial(self._generate, partition=partition), {_EDGES: SAME})
        return fused((generate, *self._components.stages((_EDGES,))))

    def stage_for(self, name: str, partition: int, write_to: str) -> Stage:
        return next(stage for stage in self._stages(partition) if stage.name == name)

    def _generate(self, pipeline, inputs, sides, *, partition: int):
        chunks = range(partition, self.graph.chunks(), self.partitions)
        edges = (
            pipeline | "Chunks" >> beam.Create(list(chunks), reshuffle=False) | "Edges" >> beam.FlatMap(_forked_edges)
        )
        return {_EDGES: edges}


# The plan the forked workers inherit (never pickled: its graph's arrays are large).
_FORKED: dict[str, _Plan] = {}


def _forked_edges(chunk: int) -> Iterator[tuple[int, int]]:
    # A module's function pickles by name, so a task's pipeline does not carry a copy of the graph.
    return _FORKED["plan"].graph.edges(chunk)


def _run_in_worker(stage_name: str, partition: int, files: TaskFiles, attempt: str) -> tuple[dict, int]:
    plan = _FORKED["plan"]
    stage = next(stage for stage in plan.stages if stage.name == stage_name)
    stats = run_task(plan, stage, partition, files, pathlib.Path(attempt))
    return stats, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_stages(plan: _Plan, workdir: pathlib.Path, workers: int) -> tuple[dict, int, list[str]]:
    """Runs every stage's tasks on ``workers`` forked processes; returns the merged stats, the highest worker peak
    RSS, and one line per stage."""
    _FORKED["plan"] = plan
    listing: dict[str, dict[int, list[str]]] = {}  # dataset -> partition -> files
    every_stats, peak, lines = [], 0, []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for stage in plan.stages:
            started = time.perf_counter()
            pending, skipped = [], 0
            for partition in range(plan.partitions):
                files = TaskFiles()
                files.reads = {
                    tag: [path for name in names for path in listing.get(name, {}).get(partition, [])]
                    for tag, names in stage.reads.items()
                }
                files.sides = {
                    tag: [path for paths in listing.get(name, {}).values() for path in paths]
                    for tag, name in stage.sides.items()
                }
                if stage.idle_with(files.reads):
                    skipped += 1
                    continue
                attempt = workdir / stage.name / f"{partition:05d}"
                pending.append(pool.apply_async(_run_in_worker, (stage.name, partition, files, str(attempt))))
            records = 0
            for result in pending:
                stats, rss = result.get()
                every_stats.append(stats)
                peak = max(peak, rss)
            for attempt in sorted((workdir / stage.name).glob("*")) if (workdir / stage.name).exists() else ():
                for dataset, partitions in written_files(attempt / DATA_DIR).items():
                    for partition, entries in partitions.items():
                        for entry in entries:
                            path = str(attempt / DATA_DIR / entry["path"])
                            listing.setdefault(dataset, {}).setdefault(int(partition), []).append(path)
                            records += entry["records"] if dataset in stage.writes else 0
            ran = plan.partitions - skipped
            lines.append(
                f"{stage.name}: {ran} tasks run, {skipped} with nothing to read, {records:,} records written, "
                f"{time.perf_counter() - started:.1f} s"
            )
    merged = merge_stats(every_stats).get(_STEP, {"counters": {}})
    return merged, peak, lines


def union_find(graph: Graph) -> tuple[list[int], list[int]]:
    """Each node's smallest node of its component, and its component's size, by a plain union-find."""
    parent = list(range(graph.nodes))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for chunk in range(graph.chunks()):
        for one, other in graph.edges(chunk):
            first, second = find(one), find(other)
            if first != second:
                parent[max(first, second)] = min(first, second)
    roots = [find(node) for node in range(graph.nodes)]
    sizes = np.bincount(np.asarray(roots, dtype=np.int64), minlength=graph.nodes)
    return roots, sizes.tolist()


def compare(graph: Graph, plan_dir: pathlib.Path) -> tuple[int, int]:
    """``(nodes whose root and size are the union-find's, nodes checked)`` over every component record written."""
    roots, sizes = union_find(graph)
    agree = checked = 0
    seen = np.zeros(graph.nodes, dtype=bool)
    for path in sorted(plan_dir.glob(f"*/*/{DATA_DIR}/{COMPONENTS}/*/*.rec")):
        for node, root, size in read_records(path):
            checked += 1
            seen[node] = True
            agree += roots[node] == root and sizes[root] == size
    # Every node has a link, so every node must have a record.
    return agree - int((~seen).sum()), checked


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--links", type=int, default=30_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory", default="1GiB", help="what one worker may hold (default: %(default)s)")
    parser.add_argument("--max_size", type=int, default=100_000, help="largest component (default: %(default)s)")
    parser.add_argument("--max_rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    add_workdir_arguments(parser, "beamtrove-components-scale")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    memory = byte_size(args.memory)
    graph = Graph(args.links, args.max_size, args.seed)
    # Both directions of each link sit in some partition at once: the busiest stages hold two records per link.
    partitions = max(args.workers, math.ceil(2 * graph.links * BYTES_PER_LINK / memory))
    plan = _Plan(graph, partitions, args.max_rounds)
    stages_dir = args.workdir / "stages"
    shutil.rmtree(stages_dir, ignore_errors=True)
    print(
        f"{graph.links:,} links, {graph.nodes:,} nodes, {len(graph.sizes):,} components "
        f"(largest {int(graph.sizes.max()):,}); {partitions} partitions, {args.workers} workers, "
        f"{len(plan.stages)} stages",
        flush=True,
    )
    started = time.perf_counter()
    stats, peak, lines = run_stages(plan, stages_dir, args.workers)
    wall = time.perf_counter() - started
    for line in lines:
        print("  " + line)
    counters = stats["counters"]
    changed = sorted(name for name, value in counters.items() if name.startswith("changed.round_") and value)
    rounds = int(changed[-1].rsplit("_", 1)[1]) if changed else 0
    checking = time.perf_counter()
    agree, checked = compare(graph, stages_dir)
    same = agree == checked == graph.nodes
    rows = [
        [
            f"{graph.links:,}",
            f"{graph.nodes:,}",
            f"{len(graph.sizes):,}",
            partitions,
            f"{rounds} (then one that changed nothing)",
            f"{wall:,.1f} s",
            f"{peak / GIB:.2f} GiB",
            f"{agree:,} of {graph.nodes:,}",
        ]
    ]
    columns = ["links", "nodes", "components", "partitions", "rounds changing links", "wall", "largest worker"]
    columns.append("as union-find")
    print(results.table("Components stages on a synthetic graph", columns, rows))
    print(f"changed per round: {', '.join(f'{name[-2:]}: {counters[name]:,}' for name in changed)}")
    print(f"union-find check: {time.perf_counter() - checking:.1f} s in this process")
    budget = 1.2 * memory
    print(f"no worker above 1.2x --memory ({budget / GIB:.2f} GiB): {verdict(results.check('memory', peak <= budget))}")
    print(f"every node's component as union-find's: {verdict(results.check('components', same))}")
    results.write()


if __name__ == "__main__":
    main()
