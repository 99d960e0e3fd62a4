"""Builds a pipeline's Beam graph from its declaration: the one place a pipeline is built.

:func:`build` resolves a :class:`~beamtrove.pipelines.spec.PipelineSpec`
against a run's options and applies its flow to a Beam pipeline, in one of
two shapes:

* ordinary: the reader, each step as its own transform (what it excludes
  written to ``excluded/<step>/``, cluster maps to ``clusters/<step>/``), the
  sink, and every dead letter to ``dead_letters/``, all staged and published
  into the output folder by a last step once every writer is done;
* per input (``--resumable``): the same steps' DoFns run over each input file
  on its own inside :class:`~beamtrove.transforms.per_input.ProcessInputs`,
  which finalizes the file's outputs and then its completion marker.

Both apply the output folder contract of :mod:`beamtrove.execution.output`.
Every local run, elastic shard, Dataflow template launch and offline Dataflow
graph builds through here, and any construction error reaches its caller as
one :class:`~beamtrove.options.ConfigurationError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.direct_runner import pipeline_runner, settle_direct_workers
from beamtrove.execution.output import OutputPlan, Publish, check_auxiliary_inputs, check_separate, plan_output
from beamtrove.execution.resume import configuration, pending_inputs, read_digests
from beamtrove.execution.runner_checks import check_runner_options
from beamtrove.fs import InputFile, join
from beamtrove.layout import (
    CLUSTERS_DIR,
    DOCUMENTS_DIR,
    PROCESS_INPUTS,
    SUMMARY_STATS_DIR,
    WRITE_DEAD_LETTERS,
    write_clusters,
    write_excluded,
)
from beamtrove.options import BeamtroveOptions, ResumeOptions, paths_read
from beamtrove.pipelines.common import dead_letters_writer, excluded_writer
from beamtrove.pipelines.spec import Flow, PipelineSpec
from beamtrove.pipelines.summary_stats import SUMMARY_STATS_STEP, summary_stats_transform
from beamtrove.transforms.ids import SHARED_IDS_STEP, ReportSharedIds
from beamtrove.transforms.per_input import ProcessInputs

__all__ = ["Built", "build"]

# What building can raise for bad options, inputs or assets: a missing file, an unreachable bucket, a
# filesystem library that is not installed (s3fs for s3://).
_CONSTRUCTION_ERRORS = (ValueError, OSError, ImportError)


@dataclasses.dataclass(frozen=True)
class Built:
    """A pipeline ready to run, the flow it was built from (its reader, steps and sink), and its output plan.

    Attributes:
        pipeline: The Beam pipeline.
        flow: Its reader, steps and sink.
        output: Where it writes and how it publishes.
        inputs: The input files this run reads: all of the reader's, or those
            a resumable run has not completed yet.
    """

    pipeline: beam.Pipeline
    flow: Flow
    output: OutputPlan
    inputs: tuple[InputFile, ...]


def build(
    spec: PipelineSpec, options: PipelineOptions, *, inspect_output: bool = True, publish_in_pipeline: bool = True
) -> Built:
    """Builds the pipeline ``spec`` declares for ``options``, without running it.

    Construction checks everything it can before any work: inputs are
    matched, models and lists found, the output folder checked against the
    inputs and cleared of what killed runs left (unless ``inspect_output``
    is off: a graph built offline or a dry run never looks at it). The
    output is locked for the run until ``built.output`` is released or
    abandoned. With ``publish_in_pipeline`` off, an ordinary run's last step
    does not publish: its caller calls ``built.output.publish()``.

    Raises:
        ConfigurationError: The options, inputs or assets do not let the
            pipeline run; the message says what to fix.
    """
    pipeline = beam.Pipeline(runner=pipeline_runner(options), options=options)
    resume = options.view_as(ResumeOptions)
    plan = None
    try:
        check_runner_options(options)
        plan = plan_output(
            spec.run_output(options),
            overwrite=options.view_as(BeamtroveOptions).overwrite,
            resumable=resume.resumable,
            restart=resume.restart,
            inspect=inspect_output,
            offers_resumable=spec.resumable,
        )
        flow = spec.flow(options, plan.write_to)
        # In the options the pipeline runs with (its own copy), before the steps are applied: the runner preloads
        # their models for the workers it will fork.
        settle_direct_workers(pipeline.options, flow.reader.files, flow.reader.units_of_work)
        if inspect_output:
            check_separate(flow.reader.patterns, flow.reader.files, flow.output)
            check_auxiliary_inputs(paths_read(options, spec.option_classes), flow.output)
        summary = (
            summary_stats_transform(options, join(plan.write_to, SUMMARY_STATS_DIR)) if spec.summary_stats else None
        )
        if resume.resumable:
            if summary is not None:
                raise ValueError(
                    "--summary_stats is computed by ordinary runs, not --resumable ones (each input is finished on its "
                    "own): compute them afterwards with `beamtrove run stats --input OUTPUT --output STATS`."
                )
            inputs = _apply_per_input(pipeline, spec, flow, options)
        else:
            inputs = flow.reader.files
            written = _apply(pipeline, flow, options, summary, report_shared_ids=spec.compares_documents)
            flattened = written | "FlattenWritten" >> beam.Flatten()
            if publish_in_pipeline:
                flattened | "Publish" >> Publish(plan)
        if inspect_output:
            plan.stage()
    except BaseException as exc:
        if plan is not None:
            plan.abandon()
        if isinstance(exc, _CONSTRUCTION_ERRORS) and not isinstance(exc, ConfigurationError):
            raise ConfigurationError(str(exc)) from exc
        raise
    return Built(pipeline, flow, plan, tuple(inputs))


def _apply(
    pipeline: beam.Pipeline,
    flow: Flow,
    options: PipelineOptions,
    summary: beam.PTransform | None,
    *,
    report_shared_ids: bool = False,
) -> list[beam.PCollection]:
    """Applies the flow, and ``summary`` to what it keeps; returns what every writer wrote."""
    records, read_errors = pipeline | flow.read_label >> flow.reader.with_dead_letters()
    if report_shared_ids:
        records | SHARED_IDS_STEP >> ReportSharedIds()
    dead_letters = [read_errors]
    written = []
    for step in flow.steps:
        outputs = step.apply(records)
        if outputs.excluded is not None:
            excluded = excluded_writer(flow.write_to, step.name, options)
            written.append(outputs.excluded | write_excluded(step.name) >> excluded)
        if outputs.clusters is not None:
            cluster_map = step.cluster_map(join(flow.write_to, CLUSTERS_DIR, step.name))
            written.append(outputs.clusters | write_clusters(step.name) >> cluster_map)
        if outputs.dead_letters is not None:
            dead_letters.append(outputs.dead_letters)
        records = outputs.kept
    written.append(records | flow.sink.label >> flow.sink.transform)
    if summary is not None:
        written.append(records | SUMMARY_STATS_STEP >> summary)
    all_dead_letters = dead_letters | "FlattenDeadLetters" >> beam.Flatten()
    written.append(all_dead_letters | WRITE_DEAD_LETTERS >> dead_letters_writer(flow.write_to))
    return written


def _apply_per_input(
    pipeline: beam.Pipeline, spec: PipelineSpec, flow: Flow, options: PipelineOptions
) -> Sequence[InputFile]:
    """Applies the flow one input file at a time; returns the inputs it will process (those not completed)."""
    common = options.view_as(BeamtroveOptions)
    if common.skip or common.limit is not None:
        raise ValueError("--skip and --limit count documents across all inputs; they do not apply to --resumable.")
    if not all(step.per_document for step in flow.steps) or flow.sink.documents_dir != join(flow.output, DOCUMENTS_DIR):
        raise TypeError(f"The {spec.name} pipeline takes --resumable but cannot run one input file at a time.")
    # What the options name to read is part of what a resumed output was made with: by content, not by name.
    config = {**configuration(spec.name, options, spec.options), "reads": read_digests(options, spec.options)}
    restart = options.view_as(ResumeOptions).restart
    pending, config_sha256 = pending_inputs(flow.reader.files, flow.output, config, restart=restart)
    # Read outside a graph, the reader counts under its own label: the flow's, as in an ordinary run.
    flow.reader.label = flow.read_label
    steps = [(step.name, step.fn) for step in flow.steps]
    pipeline | PROCESS_INPUTS >> ProcessInputs(flow.reader, pending, steps, flow.output, config_sha256)
    return pending
