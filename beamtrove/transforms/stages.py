"""A global step declared once as stages between shuffles, run in one pipeline or as file-backed tasks.

A step that compares documents across the input (dedup) is a chain of
per-element work and ``GroupByKey`` s. Declared as :class:`Stage` s, each
stage reads named *datasets*, groups what it needs to itself, and writes
datasets of its own, each with a :data:`KEYED` or :data:`SAME` placement:

* in one pipeline (:func:`apply_stages`, what a step's ``expand`` does), a
  dataset is just a PCollection, so the graph is the ordinary one;
* in a staged run (:mod:`beamtrove.execution.jobs.staged`), every stage runs as
  tasks, one per partition of the data (or one for the whole of it), each a
  small Beam pipeline whose datasets are files: a :data:`KEYED` dataset's
  ``(key, value)`` records go to the partition of their key, so the next
  stage's ``GroupByKey`` in the task for that partition sees every value of
  its keys, and a task holds one partition, not the input.

Both run the same DoFns: a rule (which document is first, which pairs link)
exists once. A step gives its stages from ``staged_form(partitions)``, the
number of partitions a staged run spreads keyed records over (1 in one
pipeline): a step that cuts its own work into slices makes as many as
partitions need (:data:`SLICED`), and its result never depends on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam import coders

__all__ = [
    "KEYED",
    "SAME",
    "SLICED",
    "SPREAD",
    "Stage",
    "StagedForm",
    "applied_outputs",
    "apply_stages",
    "flatten",
    "key_slice",
]

#: Records are ``(key, value)`` pairs; a staged run sends each to the partition of its key.
KEYED = "keyed"
#: Records stay in the partition of the task that wrote them.
SAME = "same"
#: Records are dealt over every partition in turn: what reads an input of a few large files writes them so.
SPREAD = "spread"
#: Records are ``(slice, value)`` pairs, ``slice`` a whole number; a staged run sends each to partition
#: ``slice % partitions``, so a stage that makes a multiple of ``partitions`` slices (the number its step's
#: ``staged_form`` is given) loads every partition alike, where a few hashed keys would crowd some.
SLICED = "sliced"


# Keys are bytes, strings, numbers and tuples of them; Beam's deterministic coder gives equal keys equal bytes
# (pickle does not: it shares repeated objects, so equal tuples can pickle apart).
_KEY_CODER = coders.FastPrimitivesCoder().as_deterministic_coder("staged partition keys")


def key_slice(key: Any, slices: int) -> int:
    """Which of ``slices`` a key falls in: the same for equal keys on every machine and Python."""
    digest = hashlib.blake2b(_KEY_CODER.encode(key), digest_size=8).digest()
    return int.from_bytes(digest, "little") % slices


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a step: datasets in, a piece of Beam graph, datasets out.

    Attributes:
        name: Unique within its step; the prefix of its task names.
        reads: Input tag -> the datasets flattened into it; ``run`` gets one
            PCollection per tag. Empty for a stage that reads on its own (an index).
        run: ``run(pipeline, inputs, sides)`` applies the stage and returns
            its datasets by name; ``sides`` are the :attr:`sides` as PCollections.
        writes: Dataset -> :data:`KEYED`, :data:`SLICED`, :data:`SAME` or :data:`SPREAD`.
        sides: Tag -> a small dataset read whole by every task: one element,
            or a few (a count per bundle that changed links).
        whole: Run as one task over every partition: for what must see every
            record at once and stays small or is only streamed (a Bloom
            filter's bits, an index read, a combine).
        nothing_from_nothing: The stage writes nothing when its reads hold
            nothing (no default value, no count of zero): a staged run finishes
            such a task without building its pipeline. The rounds of connected
            components after convergence cost a look at a listing each.
    """

    name: str
    reads: Mapping[str, Sequence[str]]
    run: Callable[[beam.Pipeline, Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]
    writes: Mapping[str, str]
    sides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    whole: bool = False
    nothing_from_nothing: bool = False

    def idle_with(self, files: Mapping[str, Sequence[str]]) -> bool:
        """Whether a task reading ``files`` (tag -> its files) has nothing to do: the stage gives nothing from
        nothing (:attr:`nothing_from_nothing`), and none of its reads has a file."""
        return self.nothing_from_nothing and bool(self.reads) and not any(files.get(tag) for tag in self.reads)

    def __post_init__(self):
        placements = set(self.writes.values()) - {KEYED, SLICED, SAME, SPREAD}
        if placements:
            raise ValueError(
                f"Stage {self.name}: placements are KEYED, SLICED, SAME or SPREAD (got {sorted(placements)})."
            )


@dataclasses.dataclass(frozen=True)
class StagedForm:
    """A step as stages.

    Attributes:
        stages: In the order they run; each reads only the step's input and what earlier stages wrote.
        input: The dataset the step's documents arrive as.
        kept: The datasets that hold the kept documents.
        excluded: The datasets that hold the excluded documents.
        clusters: The datasets that hold the cluster map (``ClusterMember`` s).
        held_per_input_byte: About how many bytes a task holds per byte of
            the documents of its partition, at its peak: a staged run cuts the
            input into as many partitions as that takes to fit ``--memory``.
    """

    stages: tuple[Stage, ...]
    input: str
    kept: tuple[str, ...]
    excluded: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    held_per_input_byte: float = 6.0

    def __post_init__(self):
        known = {self.input}
        for stage in self.stages:
            needed = {name for names in stage.reads.values() for name in names} | set(stage.sides.values())
            if needed - known:
                raise ValueError(f"Stage {stage.name} reads {sorted(needed - known)} before any stage writes them.")
            known |= set(stage.writes)
        if set(self.kept + self.excluded + self.clusters) - known:
            raise ValueError(f"The step's outputs name datasets no stage writes: {sorted(set(self.kept) - known)}.")


def flatten(pipeline: beam.Pipeline, collections: Sequence[Any], label: str):
    """``collections`` as one PCollection: the one itself, an empty one, or their ``Flatten``."""
    if len(collections) == 1:
        return collections[0]
    if not collections:
        return pipeline | label >> beam.Create([])
    return tuple(collections) | label >> beam.Flatten()


def apply_stages(form: StagedForm, documents) -> dict[str, Any]:
    """Applies every stage of ``form`` to ``documents`` in one graph; returns every dataset by name."""
    pipeline = documents.pipeline
    datasets: dict[str, Any] = {form.input: documents}
    for stage in form.stages:
        inputs = {
            tag: flatten(pipeline, [datasets[name] for name in names], f"{stage.name}{tag.title()}")
            for tag, names in stage.reads.items()
        }
        sides = {tag: datasets[name] for tag, name in stage.sides.items()}
        written = stage.run(pipeline, inputs, sides)
        if set(written) != set(stage.writes):
            raise TypeError(f"Stage {stage.name} wrote {sorted(written)}, it declares {sorted(stage.writes)}.")
        datasets.update(written)
    return datasets


def applied_outputs(form: StagedForm, documents) -> tuple:
    """``(kept, excluded, clusters)`` of ``form`` applied to ``documents`` in one graph, each one PCollection."""
    datasets = apply_stages(form, documents)
    return tuple(
        flatten(documents.pipeline, [datasets[name] for name in names], f"All{part}")
        for part, names in (("Kept", form.kept), ("Excluded", form.excluded), ("Clusters", form.clusters))
    )
