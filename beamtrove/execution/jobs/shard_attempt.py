"""A shard's attempt: ``beamtrove run`` over its input in a child process, its documents collected; and the merge of
shard outputs into one run folder. What a worker or a merge of a shard job does, and reading a job's status does not.
"""

from __future__ import annotations

import functools
import pathlib
import posixpath
import runpy
import sys
from typing import TYPE_CHECKING, Any

import orjson

from beamtrove.execution.direct_workers import direct_workers_given
from beamtrove.execution.jobs.scan import shard_inputs
from beamtrove.execution.jobs.shard_output import collect_documents
from beamtrove.execution.jobs.task import Attempt, TaskFailed
from beamtrove.fs import join, put_file
from beamtrove.input_ranges import write_input_ranges
from beamtrove.layout import CLUSTERS_DIR, DEAD_LETTERS_DIR, DOCUMENTS_DIR, EXCLUDED_DIR, STATS_FILE, SUMMARY_STATS_DIR
from beamtrove.option_parsing import parse
from beamtrove.pipelines.spec import Flow
from beamtrove.processes import PythonChild
from beamtrove.run_output import RunOutput
from beamtrove.transforms.summary.merge import merge_summary_stats
from beamtrove.transforms.writers.base import SHARD, FilenameTemplate

if TYPE_CHECKING:
    from beamtrove.execution.jobs.shards import ShardJob

__all__ = ["SHARD_DOCUMENTS", "flow", "lay_out", "run"]

SHARD_DOCUMENTS = "documents.jsonl.gz"
_LOG_TAIL_LINES = 20
_INPUTS_FILE = "inputs.json"


def _log_tail(log: pathlib.Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
    except FileNotFoundError:
        return ""


def _run_beamtrove(argv: list[str]) -> None:
    """``beamtrove <argv>``, as ``python -m beamtrove`` runs it, on the modules the worker imported."""
    sys.argv = ["beamtrove", *argv]
    runpy.run_module("beamtrove", run_name="__main__", alter_sys=True)


def run(kind: ShardJob, task: str, attempt: Attempt) -> dict[str, Any]:
    """Runs ``beamtrove run`` over the shard in a child process and collects its documents; the done record's fields.

    Raises:
        TaskFailed: The run failed, timed out, or its output could not be collected.
    """
    shard = kind.shard(task)
    inputs = attempt.directory / _INPUTS_FILE
    output = attempt.directory / "output"
    log = attempt.directory / "log.txt"
    write_input_ranges(shard_inputs(kind.manifest, shard), str(inputs))
    runner_args = kind.manifest["runner_args"]
    if not direct_workers_given(runner_args):
        # One process per attempt, as many attempts as workers: a node's workers share its cores.
        runner_args = [*runner_args, "--direct_running_mode=in_memory"]
    args = [*kind.manifest["pipeline"]["args"], *runner_args]
    argv = ["run", kind.spec.name, *args, "--input_ranges", str(inputs), "--output", str(output)]
    kind.echo(f"{task}: {shard['records']} records, {shard['bytes']} B")
    # Forked from the worker, which has imported Beam and beamtrove already; the lock's heartbeat thread starts
    # after the fork.
    command = [sys.executable, "-m", "beamtrove", *argv]
    child = PythonChild(functools.partial(_run_beamtrove, argv), command, output=log)
    attempt.save(command=child.command, child_pid=child.pid, forked=child.forked)
    limit = kind.manifest["attempt_timeout"]
    try:
        with attempt.beating():
            exit_code = child.wait(limit)
        if exit_code is None:
            child.kill()
            attempt.save(exit_code=child.wait())
            raise TaskFailed(f"stopped after the attempt timeout of {limit:g} s; end of {log}:\n{_log_tail(log)}")
    except KeyboardInterrupt:
        child.kill()
        child.wait()
        raise
    attempt.save(exit_code=exit_code)
    if exit_code != 0:
        raise TaskFailed(f"exit code {exit_code}; end of {log}:\n{_log_tail(log)}")
    try:
        return _collect(kind, shard, attempt.directory, output, attempt)
    except (OSError, ValueError) as exc:
        raise TaskFailed(f"collecting the output failed: {type(exc).__name__}: {exc}") from exc


def _collect(
    kind: ShardJob, shard: dict[str, Any], attempt_dir: pathlib.Path, output: pathlib.Path, attempt: Attempt
) -> dict[str, Any]:
    # The run's flow says where it put its documents and stats (the fineweb pipeline's --dump moves them).
    argv = [*kind.manifest["pipeline"]["args"], "--input_ranges", str(attempt_dir / _INPUTS_FILE)]
    flow = kind.spec.flow(parse(kind.spec, [*argv, "--output", str(output)]))
    target = attempt_dir / SHARD_DOCUMENTS
    fields, sort_runs = collect_documents(flow.sink.documents_dir, target, kind.sort_memory)
    attempt.save(sort_runs=sort_runs, **fields)
    stats_path = pathlib.Path(join(flow.output, STATS_FILE))
    steps = orjson.loads(stats_path.read_bytes())["steps"] if stats_path.exists() else None
    return {
        "output": str(target.relative_to(kind.job.path)),
        **fields,
        "run_output": str(pathlib.Path(flow.output).relative_to(kind.job.path)),
        "stats": steps,
        "records_read": None if steps is None else steps.get(flow.read_label, {}).get("counters", {}).get("in", 0),
        "input_sha256": shard["sha256"],
    }


def flow(kind: ShardJob, output: str) -> Flow:
    """The pipeline's flow as the job's options build it over the first shard, writing into ``output``: its funnel
    and writers are every shard's."""
    first = kind.job.read_done(next(iter(kind.task_ids()))[0])
    ranges = kind.job.path / first["attempt"] / _INPUTS_FILE
    args = [*kind.manifest["pipeline"]["args"], "--input_ranges", str(ranges), "--output", output]
    return kind.spec.flow(parse(kind.spec, args))


def lay_out(kind: ShardJob, folder: str) -> None:
    """Puts the shards' outputs into ``folder`` as the parts of one run, in manifest order.

    The documents of each shard that kept any (sorted by id within it) are one
    ``documents/part-NNNNN.jsonl.gz``, so reading the parts in name order gives the shards one after the
    other; what their steps excluded, their cluster maps and dead letters are the parts of
    ``excluded/<step>/``, ``clusters/<step>/`` and ``dead_letters/``, shard after shard; their summary
    statistics are added up into ``summary_stats/``. Files are copied (the output may be on an object store).
    """
    dones = kind.done_records()
    parts: dict[str, list[str]] = {
        DOCUMENTS_DIR: [str(kind.job.path / done["output"]) for done in dones if done["records"]]
    }
    runs = [RunOutput(str(kind.job.path / done["run_output"])) for done in dones if done["stats"] is not None]
    for run in runs:
        for step in run.excluded_steps():
            parts.setdefault(join(EXCLUDED_DIR, step), []).extend(file.url for file in run.excluded(step).files)
        for step in run.cluster_steps():
            parts.setdefault(join(CLUSTERS_DIR, step), []).extend(file.url for file in run.clusters(step).files)
        parts.setdefault(DEAD_LETTERS_DIR, []).extend(file.url for file in run.dead_letters().files)
    for where, files in parts.items():
        for number, source in enumerate(files):
            # The parts of a shard's run end as its writer named them (.jsonl.gz, .jsonl, ...).
            extension = posixpath.basename(source).split(".", 1)[1]
            name = FilenameTemplate.with_shard(f"part-${{{SHARD}}}.{extension}", number)
            put_file(source, join(folder, where, name))
    summaries = [run.path(SUMMARY_STATS_DIR) for run in runs if run.holds(SUMMARY_STATS_DIR)]
    if summaries:
        merge_summary_stats(summaries, join(folder, SUMMARY_STATS_DIR))
