"""The stages of a staged run, resolved from a pipeline's flow: read, each step's stages, write.

* ``read``: one task per input shard runs the flow's reader.
* A per-document step is one stage of its own; a global step contributes
  the stages of its :class:`~beamtrove.transforms.stages.StagedForm`, its
  datasets named ``<NN>-<step>/<dataset>``, its input the datasets that hold
  what the step before it kept. A sink that needs the whole input (token
  shards, an index) contributes its stages the same way.
* ``write``: one task writes what the last step kept, what every step
  excluded, the cluster maps and the dead letters with the pipeline's own
  writers, as ``beamtrove run`` lays them out. It only streams records to
  files, so it holds no more than one record and the writers' buffers.

Stages that stay within a partition run fused in the same tasks
(:func:`fused`). Every worker resolves the same plan from the manifest's
pipeline arguments, and each task builds its stage anew, writing what is not
a dataset (the run's own files) into its attempt.
"""

from __future__ import annotations

import functools
import itertools
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import join
from beamtrove.layout import (
    CLUSTERS_DIR,
    DEAD_LETTERS,
    EXCLUDED,
    KEPT,
    WRITE_DEAD_LETTERS,
    write_clusters,
    write_excluded,
)
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.pipelines.common import dead_letters_writer, excluded_writer
from beamtrove.pipelines.spec import Flow, GlobalStep, PipelineSpec
from beamtrove.transforms.ids import SHARED_IDS_STEP, ReportSharedIds
from beamtrove.transforms.stages import SAME, SPREAD, Stage, StagedForm, flatten

__all__ = ["READ", "WRITE", "JobPlan", "held_per_input_byte", "refuse_unstaged"]

READ, WRITE = "read", "write"
_READ_DOCUMENTS, _READ_DEAD_LETTERS = f"{READ}/documents", f"{READ}/{DEAD_LETTERS}"
_DOCUMENTS, _DEAD_LETTERS = "documents", "dead_letters"
_EXCLUDED_TAG, _CLUSTERS_TAG = "excluded:", "clusters:"


def refuse_unstaged(flow: Flow, pipeline: str) -> None:
    """Refuses a flow with a global step, or a sink needing the whole input, that has no staged form.

    Raises:
        ConfigurationError: One has none; the message names it and says how to run the pipeline instead.
    """
    steps = [step for step in flow.steps if isinstance(step, GlobalStep)]
    missing = [step.name for step in steps if not hasattr(step.transform, "staged_form")]
    if flow.sink.whole_input and not hasattr(flow.sink.transform, "staged_form"):
        missing.append(flow.sink.label)
    if missing:
        raise ConfigurationError(
            f"The {pipeline} pipeline's {', '.join(missing)} has no staged form yet, so it cannot run as staged tasks "
            f"(--staged, or an elastic job): run it in one piece, with `beamtrove run {pipeline}` without --staged."
        )


def held_per_input_byte(flow: Flow) -> float:
    """The most bytes a task of ``flow``'s staged forms holds per byte of its partition's documents."""
    forms = [step.transform.staged_form() for step in flow.steps if isinstance(step, GlobalStep)]
    if flow.sink.whole_input:
        forms.append(flow.sink.transform.staged_form())
    return max((form.held_per_input_byte for form in forms), default=StagedForm.held_per_input_byte)


def input_ranges_file(job_path: pathlib.Path, partition: int) -> pathlib.Path:
    """Where the job lists the input byte ranges of one read task."""
    return job_path / "inputs" / f"{partition:05d}.json"


class JobPlan:
    """The stages of one staged job and the datasets between them.

    Args:
        job_path: The job directory.
        manifest: Its manifest: the pipeline's name and arguments, the
            output folder and the number of partitions.

    Raises:
        ConfigurationError: The pipeline cannot run staged with these options.
    """

    def __init__(self, job_path: pathlib.Path, manifest: Mapping[str, Any]):
        self.job_path = job_path
        self.manifest = manifest
        self.spec: PipelineSpec = pipeline_spec(manifest["pipeline"]["name"])
        self.args: list[str] = list(manifest["pipeline"]["args"])
        self.output: str = manifest["output"]
        self.partitions: int = manifest["partitions"]
        # What the plan's own flow would write, it never does: tasks build their stages writing into their attempts.
        self.flow = self.flow_for(0, str(job_path / "plan"))
        refuse_unstaged(self.flow, self.spec.name)
        # An input of fewer files than partitions is read in fewer tasks: what follows the read runs in every
        # partition's task rather than in those few.
        self._read_alone = len(manifest["shards"]) < self.partitions
        self.stages: tuple[Stage, ...] = fused(
            tuple(self._stages(self.flow, 0, str(job_path / "plan"))), read_alone=self._read_alone
        )
        self.producers = {dataset: stage for stage in self.stages for dataset in stage.writes}
        # The stages every task of a worker runs as they are: those that neither read the input (each read task its
        # own shard) nor lay files out for the run (the write stage, a staged sink's), which are built per task.
        sink = f"{len(self.flow.steps) + 1:02d}-{self.flow.sink.label}"
        self._resolved = {
            stage.name: stage
            for stage in self.stages[1:]
            if stage.name != WRITE and not (self.sink_staged and sink in stage.name)
        }

    def stage_for(self, name: str, partition: int, write_to: str) -> Stage:
        """The stage ``name`` for the task of ``partition``, writing what is not a dataset into ``write_to``.

        Resolved once per plan, unless it reads the input or lays files out for the run: those are built for the
        task, from the pipeline's flow over its input and writing into ``write_to``.
        """
        if name in self._resolved:
            return self._resolved[name]
        stages = tuple(self._stages(self.flow_for(0, write_to), partition, write_to))
        return next(stage for stage in fused(stages, read_alone=self._read_alone) if stage.name == name)

    def options(self, partition: int):
        """The pipeline's options in the read task of ``partition``.

        A job whose input holds nothing has no read task: its options name the input as it was given.
        """
        if not self.manifest["shards"]:
            given = [f"--input={pattern}" for pattern in self.manifest["patterns"]]
            return parse(self.spec, [*self.args, *given, "--output", self.output])
        ranges = str(input_ranges_file(self.job_path, partition))
        return parse(self.spec, [*self.args, "--input_ranges", ranges, "--output", self.output])

    def flow_for(self, partition: int, write_to: str | None = None) -> Flow:
        """The flow over the input of one read task, its writers writing to ``write_to``."""
        try:
            return self.spec.flow(self.options(partition), write_to)
        except (ValueError, OSError) as exc:
            raise ConfigurationError(str(exc)) from exc

    def tasks(self, stage: Stage) -> int:
        """How many tasks the stage runs: one per input shard, per partition, or one."""
        # The read stage comes first, fused or not, and reads the input shards.
        if stage.name == self.stages[0].name:
            return len(self.manifest["shards"])
        return 1 if stage.whole else self.partitions

    def _stages(self, flow: Flow, partition: int, write_to: str):
        read = functools.partial(self.read, partition=partition, write_to=write_to)
        yield Stage(READ, {}, read, {_READ_DOCUMENTS: SPREAD, _READ_DEAD_LETTERS: SAME})
        kept: tuple[str, ...] = (_READ_DOCUMENTS,)
        shared_ids = (
            _renamed(ReportSharedIds().staged_form(self.partitions), SHARED_IDS_STEP, kept)
            if self.spec.compares_documents
            else iter(())
        )
        # Its keys first, in the read's tasks; its counts last, beside the last step's.
        yield from itertools.islice(shared_ids, 1)
        self.excluded: dict[str, tuple[str, ...]] = {}
        self.clusters: dict[str, tuple[str, ...]] = {}
        dead_letters = [_READ_DEAD_LETTERS]
        for number, step in enumerate(flow.steps, 1):
            prefix = f"{number:02d}-{step.name}"
            if step.per_document:
                writes = {f"{prefix}/{KEPT}": SAME, f"{prefix}/{EXCLUDED}": SAME, f"{prefix}/{DEAD_LETTERS}": SAME}
                yield Stage(prefix, {_DOCUMENTS: kept}, _PerDocument(step, prefix), writes)
                kept = (f"{prefix}/{KEPT}",)
                if step.excludes:
                    self.excluded[step.name] = (f"{prefix}/{EXCLUDED}",)
                dead_letters.append(f"{prefix}/{DEAD_LETTERS}")
                continue
            form = step.transform.staged_form(self.partitions)
            yield from _renamed(form, prefix, kept)
            self.excluded[step.name] = _named(form.excluded, form, prefix, kept)
            if step.cluster_map is not None:
                self.clusters[step.name] = _named(form.clusters, form, prefix, kept)
            kept = _named(form.kept, form, prefix, kept)
        self.kept = kept
        self.sink_staged = flow.sink.whole_input
        if self.sink_staged:
            # The sink's own stages lay out what it writes in their tasks' attempts.
            prefix = f"{len(flow.steps) + 1:02d}-{flow.sink.label}"
            yield from _renamed(flow.sink.transform.staged_form(self.partitions), prefix, kept)
        yield from shared_ids
        reads = {
            _DOCUMENTS: kept,
            _DEAD_LETTERS: tuple(dead_letters),
            **{f"{_EXCLUDED_TAG}{name}": datasets for name, datasets in self.excluded.items()},
            **{f"{_CLUSTERS_TAG}{name}": datasets for name, datasets in self.clusters.items()},
        }
        yield Stage(WRITE, reads, functools.partial(self.write, write_to=write_to), {}, whole=True)

    def read(
        self,
        pipeline: beam.Pipeline,
        inputs: Mapping[str, Any],
        sides: Mapping[str, Any],
        *,
        partition: int,
        write_to: str,
    ):
        """Applies the read stage of one partition: the flow's reader over its input shard."""
        # Built to write where the task writes: a flow's sink may look at its folder (token files of a run before).
        flow = self.flow_for(partition, write_to)
        documents, dead_letters = pipeline | flow.read_label >> flow.reader.with_dead_letters()
        return {_READ_DOCUMENTS: documents, _READ_DEAD_LETTERS: dead_letters}

    def write(self, pipeline: beam.Pipeline, inputs: Mapping[str, Any], sides: Mapping[str, Any], *, write_to: str):
        """Applies the write stage: every output of the run written into ``write_to`` by the pipeline's writers."""
        flow = self.flow_for(0, write_to)
        options = self.options(0)
        if not self.sink_staged:
            inputs[_DOCUMENTS] | flow.sink.label >> flow.sink.transform
        for step in flow.steps:
            if step.name in self.excluded:
                excluded = excluded_writer(write_to, step.name, options)
                inputs[f"{_EXCLUDED_TAG}{step.name}"] | write_excluded(step.name) >> excluded
            if step.name in self.clusters:
                cluster_map = step.cluster_map(join(write_to, CLUSTERS_DIR, step.name))
                inputs[f"{_CLUSTERS_TAG}{step.name}"] | write_clusters(step.name) >> cluster_map
        inputs[_DEAD_LETTERS] | WRITE_DEAD_LETTERS >> dead_letters_writer(write_to)
        return {}


def _named(names: Sequence[str], form: StagedForm, prefix: str, kept: tuple[str, ...]) -> tuple[str, ...]:
    """A step's datasets by their job names: its input is what the step before it kept."""
    return tuple(dataset for name in names for dataset in (kept if name == form.input else (f"{prefix}/{name}",)))


def _renamed(form: StagedForm, prefix: str, kept: tuple[str, ...]):
    """A step's stages with their datasets renamed into the job's, its input being ``kept``."""
    for stage in form.stages:
        yield Stage(
            f"{prefix}-{stage.name}",
            {tag: _named(names, form, prefix, kept) for tag, names in stage.reads.items()},
            _Prefixed(stage, prefix),
            {f"{prefix}/{name}": placement for name, placement in stage.writes.items()},
            {tag: _named((name,), form, prefix, kept)[0] for tag, name in stage.sides.items()},
            stage.whole,
            stage.nothing_from_nothing,
        )


def _fusable(group: list[Stage], stage: Stage, read_alone: bool) -> bool:
    """Whether ``stage`` can run in the tasks of ``group``: it reads only what they hold for its partition."""
    if stage.whole or stage.name == WRITE or group[0].whole or (read_alone and group[0].name == READ):
        return False
    made_here = {dataset: placement for member in group for dataset, placement in member.writes.items()}
    read = {name for names in stage.reads.values() for name in names}
    # A stage that stays within a partition may take the records its task read or kept, wherever they would be dealt.
    staying = all(made_here.get(name, SAME) in (SAME, SPREAD) for name in read)
    return staying and not set(stage.sides.values()) & set(made_here)


def fused(stages: Sequence[Stage], *, read_alone: bool = False) -> tuple[Stage, ...]:
    """``stages`` with each run of stages that stay within a partition fused into one, to run in the same tasks.

    A stage that reads only what the stages before it kept in the same
    partition (a filter's kept documents, the next step's keys) needs no
    files between them: the fused stage passes those datasets on in memory
    and writes only what a later stage reads.

    Args:
        stages: In the order they run.
        read_alone: Fuse nothing into the read stage: it has fewer tasks than
            there are partitions (an input of fewer files), and the work of
            the stages after it is shared by every partition's task instead,
            for the cost of writing the documents read and reading them again.
    """
    groups: list[list[Stage]] = []
    for stage in stages:
        if groups and _fusable(groups[-1], stage, read_alone):
            groups[-1].append(stage)
        else:
            groups.append([stage])
    result = []
    for number, group in enumerate(groups):
        if len(group) == 1:
            result.append(group[0])
            continue
        later = groups[number + 1 :]
        read_later = {
            name for member in (m for g in later for m in g) for names in member.reads.values() for name in names
        }
        read_later |= {name for g in later for member in g for name in member.sides.values()}
        result.append(_fuse(group, read_later))
    return tuple(result)


def _fuse(group: list[Stage], read_later: set[str]) -> Stage:
    made_here = {dataset for member in group for dataset in member.writes}
    reads = {
        f"{number}/{tag}": outside
        for number, member in enumerate(group)
        for tag, names in member.reads.items()
        if (outside := tuple(name for name in names if name not in made_here))
    }
    sides = {f"{number}/{tag}": name for number, member in enumerate(group) for tag, name in member.sides.items()}
    writes = {
        dataset: placement for member in group for dataset, placement in member.writes.items() if dataset in read_later
    }
    name = "+".join([group[0].name, *(member.name.split("-", 1)[-1] for member in group[1:])])
    quiet = all(member.nothing_from_nothing for member in group)
    return Stage(name, reads, _Fused(group, writes), writes, sides, nothing_from_nothing=quiet)


class _Fused:
    """Stages run one after the other in one task, what one writes passed in memory to the next."""

    def __init__(self, members: Sequence[Stage], writes: Mapping[str, str]):
        self._members = members
        self._writes = writes

    def __call__(self, pipeline, inputs, sides):
        datasets: dict[str, Any] = {}
        for number, member in enumerate(self._members):
            member_inputs = {}
            for tag, names in member.reads.items():
                parts = [datasets[name] for name in names if name in datasets]
                if f"{number}/{tag}" in inputs:
                    parts.append(inputs[f"{number}/{tag}"])
                member_inputs[tag] = flatten(pipeline, parts, f"{member.name}{tag.title()}")
            member_sides = {tag: sides[f"{number}/{tag}"] for tag in member.sides}
            # Each under its own name: two steps' stages may name their transforms alike.
            applied = _ApplyStage(member, member_sides)
            datasets.update((member_inputs or pipeline) | member.name >> applied)
        return {dataset: datasets[dataset] for dataset in self._writes}


class _ApplyStage(beam.PTransform):
    def __init__(self, stage: Stage, sides: Mapping[str, Any]):
        super().__init__()
        self._stage = stage
        self._sides = sides

    def expand(self, inputs):
        # A stage that reads on its own (the input, an index) is applied to the pipeline itself.
        if isinstance(inputs, beam.pvalue.PBegin):
            return dict(self._stage.run(inputs.pipeline, {}, self._sides))
        return dict(self._stage.run(next(iter(inputs.values())).pipeline, inputs, self._sides))


class _Prefixed:
    """A step's stage, its datasets renamed into the job's."""

    def __init__(self, stage: Stage, prefix: str):
        self._stage = stage
        self._prefix = prefix

    def __call__(self, pipeline, inputs, sides):
        written = self._stage.run(pipeline, inputs, sides)
        return {f"{self._prefix}/{name}": collection for name, collection in written.items()}


class _PerDocument:
    """A per-document step as a stage: its kept, excluded and dead letter outputs."""

    def __init__(self, step, prefix: str):
        self._step = step
        self._prefix = prefix

    def __call__(self, pipeline, inputs, sides):
        outputs = self._step.apply(inputs[_DOCUMENTS])
        excluded = outputs.excluded if outputs.excluded is not None else flatten(pipeline, [], "NoExcluded")
        dead_letters = outputs.dead_letters if outputs.dead_letters is not None else flatten(pipeline, [], "NoDead")
        return {
            f"{self._prefix}/{KEPT}": outputs.kept,
            f"{self._prefix}/{EXCLUDED}": excluded,
            f"{self._prefix}/{DEAD_LETTERS}": dead_letters,
        }
