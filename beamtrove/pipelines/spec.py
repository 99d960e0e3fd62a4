"""How a pipeline is declared: its name, its options and its flow, once.

A :class:`PipelineSpec` names a pipeline, lists its option classes and
declares its flow: a reader, the steps in the order they run and a sink for
what survives them. Steps come in two kinds:

* a :class:`DocumentStep` handles each record on its own (extraction, a
  filter, a formatter, tokenization): one DoFn, whose main output is what it
  keeps and whose tagged outputs are what it excluded and its dead letters;
* a :class:`GlobalStep` compares records across the whole input (dedup): a
  PTransform over the whole collection.

:meth:`PipelineSpec.flow` resolves the declaration against one run's options
into a :class:`Flow`; :mod:`beamtrove.execution.build` turns that into a Beam
graph, ordinary or per input file (``--resumable``), with the same DoFns in
both. Elastic shard workers and Dataflow templates go through the same
build, so a step added to a declaration runs in every way of running it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import ConfigurationError, did_you_mean
from beamtrove.fs import InputFile
from beamtrove.layout import DEAD_LETTERS, EXCLUDED, KEPT, READ, WRITE_DEAD_LETTERS, write_clusters, write_excluded
from beamtrove.options import (
    BeamtroveOptions,
    OutputFormatOptions,
    ResumeOptions,
    StagedOptions,
    SummaryStatsOptions,
    WordSplitterOptions,
)
from beamtrove.transforms.readers import FileReader
from beamtrove.transforms.step_fn import check_step_fn

__all__ = ["DocumentStep", "Flow", "GlobalStep", "PipelineSpec", "Sink", "Step", "StepOutputs"]


@dataclasses.dataclass(frozen=True)
class StepOutputs:
    """The PCollections a step produced; None where the step has no such output."""

    kept: beam.PCollection
    excluded: beam.PCollection | None = None
    dead_letters: beam.PCollection | None = None
    clusters: beam.PCollection | None = None


@dataclasses.dataclass(frozen=True)
class DocumentStep:
    """A step that handles each record on its own.

    The same DoFn runs as a ``ParDo`` in the Beam graph and, in resumable runs,
    inside the DoFn that processes one input file; it keeps to the protocol of
    :mod:`beamtrove.transforms.step_fn`, checked here. It emits what it keeps as
    its main output, what it drops as ``excluded`` (documents carrying their
    ``filter_reason``) and what it cannot process as ``dead_letters``.

    Attributes:
        name: The step's label in the graph and its stats name; what it
            excludes goes to ``excluded/<name>/``.
        fn: The DoFn.
        excludes: Whether it drops documents to an ``excluded`` output.
        output_type: The type of what it keeps, when that is not a document.
    """

    name: str
    fn: beam.DoFn
    excludes: bool = False
    output_type: type | None = None

    per_document: ClassVar[bool] = True

    def __post_init__(self):
        check_step_fn(self.name, self.fn)

    def apply(self, records: beam.PCollection) -> StepOutputs:
        """Applies the step's ``ParDo`` to ``records``."""
        outputs = records | self.name >> beam.ParDo(self.fn).with_outputs(EXCLUDED, DEAD_LETTERS, main=KEPT)
        if self.output_type is not None:
            outputs[KEPT].element_type = self.output_type
        return StepOutputs(outputs[KEPT], outputs[EXCLUDED] if self.excludes else None, outputs[DEAD_LETTERS])


@dataclasses.dataclass(frozen=True)
class GlobalStep:
    """A step that compares records across the whole input, so it needs all of it at once.

    Attributes:
        transform: A :class:`~beamtrove.transforms.dedup.DedupStep`: returns ``.kept`` and ``.excluded`` (and
            ``.clusters``), and names the step.
        cluster_map: Makes the writer of ``.clusters`` into a folder; None
            when the step's cluster map is not written.
    """

    transform: beam.PTransform
    cluster_map: Callable[[str], beam.PTransform] | None = None

    per_document: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """The step's one name: its label in the graph, its stats name, its folder under ``excluded/`` and
        ``clusters/``."""
        return self.transform.step

    def apply(self, records: beam.PCollection) -> StepOutputs:
        """Applies the step's transform to ``records``."""
        result = records | self.name >> self.transform
        return StepOutputs(result.kept, result.excluded, None, result.clusters if self.cluster_map else None)


Step = DocumentStep | GlobalStep


@dataclasses.dataclass(frozen=True)
class Sink:
    """Where a pipeline's kept records go.

    Attributes:
        label: The writer's label in the graph and its stats name.
        transform: The writer.
        documents_dir: Set when the sink writes documents as JSONL part files
            into this folder, the layout that resumable runs (one file per
            input) and elastic shard workers (merged by id) rely on.
        whole_input: Whether the sink orders or compares the whole input
            (token shards, an index), so a staged run cannot stream into it.
    """

    label: str
    transform: beam.PTransform
    documents_dir: str | None = None
    whole_input: bool = False


@dataclasses.dataclass(frozen=True)
class Flow:
    """A pipeline's declaration resolved against one run's options.

    Attributes:
        output: The run's output folder, where ``stats.json`` goes.
        write_to: Where the run's writers write: ``output``, or the staging
            folder its outputs are published from (see
            :mod:`beamtrove.execution.output`).
        read_label: The reader's label and stats name.
        reader: The reader, with its input matched.
        steps: The steps, in the order they run.
        sink: Where what survives the steps goes.
    """

    output: str
    write_to: str
    read_label: str
    reader: FileReader
    steps: tuple[Step, ...]
    sink: Sink

    @property
    def funnel(self) -> tuple[str, ...]:
        """The stats names of what records pass through, in order: the reader, the steps, the sink."""
        return (
            self.read_label,
            *(step.name for step in self.steps),
            self.sink.label,
        )

    @property
    def writers(self) -> tuple[str, ...]:
        """The stats names of the writers of what steps set aside: excluded documents, cluster maps, dead letters."""
        excluded = [write_excluded(step.name) for step in self.steps if not step.per_document or step.excludes]
        clusters = [write_clusters(step.name) for step in self.steps if not step.per_document and step.cluster_map]
        return (*excluded, *clusters, WRITE_DEAD_LETTERS)


def _output_option(options: PipelineOptions) -> str | None:
    return options.view_as(BeamtroveOptions).output


@dataclasses.dataclass(frozen=True)
class PipelineSpec:
    """One pipeline, declared once; every way of running it builds from this.

    Attributes:
        name: What ``beamtrove run NAME`` calls it.
        description: One sentence for ``--help`` and template listings.
        options: Its option classes, its own first. Every pipeline also takes
            :class:`~beamtrove.options.BeamtroveOptions`, and a resumable one
            :class:`~beamtrove.options.ResumeOptions`.
        reader: Makes the reader from the options, matching the input now.
        steps: Make the steps, in flow order; one may return None to leave its
            step out of a run (a dedup step ``--dedup`` does not name).
        sink: Makes the sink from the options, the run's output folder and the
            matched input files.
        read_label: The reader's label and stats name.
        output: The run's output folder from the options: ``--output`` unless
            the pipeline puts its results elsewhere.
        global_steps: Why the pipeline needs its whole input at once, or None
            when it is shard-safe: its result over an input is the union of its
            results over parts of it, so elastic shard workers can run it.
        resumable: Whether it takes ``--resumable`` (one output per input file).
        summary_stats: Whether it takes ``--summary_stats``: DataTrove's
            summary statistics of the documents it keeps, written to
            ``<output>/summary_stats/``.
        compares_documents: Whether its steps compare documents with each
            other (dedup, a token order): it then reports the ids several
            documents share (:class:`~beamtrove.transforms.ids.ReportSharedIds`).
        output_formats: The formats ``--output_format`` chooses among, the
            default first; empty when the pipeline writes one format.
        runs_staged: Whether it takes ``--staged``: every global step it
            may run, and its sink when that needs the whole input, has a
            staged form (:class:`~beamtrove.transforms.stages.StagedForm`).
        defaults: Its own defaults of options it shares with other pipelines
            (``{"word_splitter": "language"}``): :func:`~beamtrove.option_parsing.parse`
            gives them as if they came first on its command line.
        refuses: Options of its option classes that it has no use for, each
            with why: :func:`~beamtrove.option_parsing.parse` refuses them
            rather than let them do nothing.
    """

    name: str
    description: str
    options: tuple[type, ...]
    reader: Callable[[PipelineOptions], FileReader]
    steps: tuple[Callable[[PipelineOptions], Step | None], ...]
    sink: Callable[[PipelineOptions, str, Sequence[InputFile]], Sink]
    read_label: str = READ
    output: Callable[[PipelineOptions], str | None] = _output_option
    global_steps: str | None = None
    resumable: bool = False
    summary_stats: bool = False
    compares_documents: bool = False
    output_formats: tuple[str, ...] = ()
    runs_staged: bool = False
    defaults: Mapping[str, str] = dataclasses.field(default_factory=dict)
    refuses: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def shard_safe(self) -> bool:
        """Whether elastic shard workers can run it (every step per document)."""
        return self.global_steps is None

    @property
    def option_classes(self) -> tuple[type, ...]:
        """Every option class the pipeline takes, in the order of its help."""
        classes = (
            *self.options,
            *((OutputFormatOptions,) if self.output_formats else ()),
            *((ResumeOptions,) if self.resumable else ()),
            *((SummaryStatsOptions, WordSplitterOptions) if self.summary_stats else ()),
            *((StagedOptions,) if self.runs_staged else ()),
            BeamtroveOptions,
        )
        return tuple(dict.fromkeys(classes))

    def output_format(self, options: PipelineOptions) -> str:
        """The format the run writes: ``--output_format``, else the first of :attr:`output_formats`.

        Raises:
            ConfigurationError: A format the pipeline does not write.
        """
        chosen = options.view_as(OutputFormatOptions).output_format
        if chosen is None:
            return self.output_formats[0]
        if chosen not in self.output_formats:
            suggestion = did_you_mean(chosen, self.output_formats)
            raise ConfigurationError(
                f"{self.name} writes --output_format {' or '.join(self.output_formats)}, not {chosen!r}"
                + (f"; did you mean {suggestion!r}?" if suggestion else ".")
            )
        return chosen

    def run_output(self, options: PipelineOptions) -> str:
        """The run's output folder.

        Raises:
            ValueError: The options name none.
        """
        output = self.output(options)
        if not output:
            raise ValueError(f"{self.name} needs --output.")
        return output

    def flow(self, options: PipelineOptions, write_to: str | None = None) -> Flow:
        """The flow for one run: the reader and steps built, the input matched, writers writing to ``write_to``.

        ``write_to`` is the run's output folder unless given.

        Raises:
            ValueError: Missing or contradictory options.
            FileNotFoundError: The input, a model or a list does not exist.
        """
        output = self.run_output(options)
        write_to = write_to or output
        reader = self.reader(options)
        steps = tuple(step for make in self.steps if (step := make(options)) is not None)
        if self.shard_safe and not all(step.per_document for step in steps):
            raise TypeError(f"The {self.name} pipeline is declared shard-safe but has a global step.")
        return Flow(output, write_to, self.read_label, reader, steps, self.sink(options, write_to, reader.files))
