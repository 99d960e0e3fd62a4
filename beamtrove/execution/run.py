"""Runs a pipeline and waits for it: build, run, wait, collect the stats, write ``stats.json``.

A run that fails or is interrupted before it publishes leaves the output
folder as it was (see :mod:`beamtrove.execution.output`) and removes what it
staged; one interrupted while publishing leaves the publish for the next run
into the folder to finish; an interrupted resumable run keeps the inputs it
completed. ``stats.json`` is written only by a run that succeeded; a
resumable run's stats total every input the output holds, whichever run
completed it.

What ``beamtrove run`` does, and what tests and elastic shard workers (through
``beamtrove run``) rely on. The runner is the one the options name, the
DirectRunner by default; a Prism or Flink run is pointed at the local copies
``beamtrove runners setup`` obtained, so nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.build import Built, build
from beamtrove.execution.jobs.staged.run import run_staged
from beamtrove.execution.output import discard_staging
from beamtrove.execution.resume import completed_totals
from beamtrove.execution.run_result import RunInterrupted, RunResult, run_stats, write_run_report
from beamtrove.execution.runner_parts import use_local_runner_parts
from beamtrove.fs import filesystem, is_hidden, join
from beamtrove.layout import REPORT_FILE, STATS_FILE
from beamtrove.metrics import collect_stats
from beamtrove.options import BeamtroveOptions, ResumeOptions, StagedOptions
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.processes import stops_interrupt
from beamtrove.progress import ProgressBoard
from beamtrove.resources import missing_on_worker
from beamtrove.stats import order_steps, write_stats

__all__ = ["run_pipeline"]

_LOGGER = logging.getLogger(__name__)


def run_pipeline(spec: PipelineSpec, options: PipelineOptions) -> RunResult:
    """Builds, runs and waits for the pipeline, then publishes its results with their ``stats.json``.

    An ordinary run writes ``stats.json`` and ``report.html`` beside its
    staged results and publishes them together; a resumable run writes them
    into its output folder. The output folder is locked from the build to
    the end of the run.

    Raises:
        ConfigurationError: The pipeline cannot be built with these options
            (nothing ran).
        RunInterrupted: The run was interrupted.
    """
    if spec.runs_staged:
        staged = options.view_as(StagedOptions)
        if staged.staged:
            return run_staged(spec, options)
        given = [flag for flag, value in (("--workers", staged.workers), ("--memory", staged.memory)) if value]
        if given:
            raise ConfigurationError(f"{' and '.join(given)} set how a --staged run goes: add --staged, or drop them.")
    use_local_runner_parts(options)
    built = build(spec, options, publish_in_pipeline=False)
    plan = built.output
    started = time.monotonic()
    with _interrupts_noted() as interrupted:
        try:
            # Inside the try: Ctrl-C can land as the board ends too, once the run has published its outputs.
            with _progress_board(spec, built, options):
                result = built.pipeline.run()
                state = result.wait_until_finish()
                stats = run_stats(
                    spec,
                    options,
                    str(state),
                    built.flow.funnel,
                    collect_stats(result, built.pipeline, built.flow.funnel, built.flow.writers),
                    runner=options.view_as(StandardOptions).runner or "DirectRunner",
                    wall_seconds=round(time.monotonic() - started, 3),
                )
                if state == PipelineState.DONE:
                    stats_path, report_path = _finish(built, stats, options)
        except BaseException as error:
            # Said before the plan is abandoned, which removes the staging folder the message looks at; a store that
            # fails as it is looked at still leaves the plan abandoned.
            try:
                said = _interrupted(built) if interrupted else None
            finally:
                plan.abandon()
            # A runner reports an interrupt as the error of the step it stopped.
            if said:
                raise RunInterrupted(said) from None
            missing = missing_on_worker(error)
            if missing:
                raise ConfigurationError(missing) from None
            raise
    if state != PipelineState.DONE:
        plan.abandon()
        return RunResult(str(state), stats, "")
    plan.release()
    return RunResult(str(state), stats, stats_path, report_path)


def _finish(built: Built, stats: dict[str, Any], options: PipelineOptions) -> tuple[str, str]:
    """Writes the stats and the report of a run that succeeded and publishes them with its results; their paths."""
    plan = built.output
    if options.view_as(ResumeOptions).resumable:
        # Each input removed its own staging folder; their common parent goes once all are done.
        discard_staging(plan.output, plan.storage_options)
        totals = completed_totals(plan.output)
        steps = order_steps(totals["steps"], built.flow.funnel, built.flow.writers)
        stats.update(inputs_completed=totals["inputs"], run_steps=stats["steps"], steps=steps)
        return write_stats(stats, plan.output), write_run_report(plan.output, plan.output)
    _check_written(built, stats["steps"])
    write_stats(stats, plan.write_to, plan.storage_options)
    report = write_run_report(plan.write_to, plan.output)
    plan.publish()
    return join(plan.output, STATS_FILE), report and join(plan.output, REPORT_FILE)


def _check_written(built: Built, steps: dict[str, Any]) -> None:
    """Fails the run when files its writers made are not in the folder this process publishes from.

    Workers that do not share the output folder with this process (containers
    of a DOCKER environment, remote workers given a local path) write on their
    own disks: the run would publish nothing and report success.

    Raises:
        ConfigurationError: Fewer files are in the staging folder than the writers counted.
    """
    plan = built.output
    writers = (built.flow.sink.label, *built.flow.writers)
    made = sum(steps.get(writer, {}).get("counters", {}).get("files", 0) for writer in writers)
    if not made:
        return
    fs, path = filesystem(plan.write_to, plan.storage_options)
    root = path.rstrip("/") + "/"
    found = sum(not is_hidden(file[len(root) :]) for file in fs.find(path) if file.startswith(root))
    if found < made:
        written = f"{made} file{'' if made == 1 else 's'}"
        raise ConfigurationError(
            f"The workers wrote {written}, of which {found} reached {plan.output}: the workers do not share "
            "that folder with this machine (containers of a DOCKER environment, or remote workers, write on their "
            "own disks). Give an --output that this machine and every worker reach: shared storage, or gs:// on "
            "Dataflow."
        )


def _progress_board(spec: PipelineSpec, built: Built, options: PipelineOptions) -> ProgressBoard:
    """Shows the run's progress: inputs done of those it reads, documents read and kept, ETA."""
    steps = built.flow.steps
    # Documents pass a step that compares them across the input only at its end: before then none is kept.
    kept_step = steps[-1].name if steps and all(step.per_document for step in steps) else None
    return ProgressBoard(
        spec.name,
        total_files=len(built.inputs),
        total_bytes=sum(file.size for file in built.inputs),
        read_step=built.flow.read_label,
        kept_step=kept_step,
        interval=options.view_as(BeamtroveOptions).progress_interval,
    )


class _AfterInterrupt(logging.Filter):
    """Silences the log once the run is interrupted: steps stopped mid-record report errors that are not."""

    def __init__(self, received: list[int]):
        super().__init__()
        self._received = received

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._received


@contextlib.contextmanager
def _interrupts_noted() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM interrupt as Ctrl-C does, and the signals received are listed."""
    with stops_interrupt() as received:
        quiet = _AfterInterrupt(received)
        handlers = logging.getLogger().handlers
        for handler in handlers:
            handler.addFilter(quiet)
        try:
            yield received
        finally:
            for handler in handlers:
                handler.removeFilter(quiet)


def _interrupted(built: Built) -> str:
    """What an interrupted run leaves in its output folder, for the line that ends the command; read before the
    run's plan is abandoned."""
    output = built.output.output
    if built.output.published():
        return f"interrupted as the run ended: it had finished, and {output} holds all it wrote."
    if built.output.committed():
        return (
            f"interrupted while publishing into {output}: this run had finished, and the next `beamtrove run` with "
            f"--output {output} finishes publishing its outputs."
        )
    if built.output.staged:
        return f"interrupted: nothing was written to {output}; it is as it was before the run."
    done, total = completed_totals(output)["inputs"], len(built.flow.reader.files)
    return f"interrupted after {done} of {total} inputs; rerun the same command to continue."
