"""``beamtrove elastic``: prepare, worker, status, retry, merge, verify and slurm-template."""

from __future__ import annotations

import argparse
import json

from beamtrove.cli.parsing import command, group
from beamtrove.configuration import ConfigurationError
from beamtrove.execution.jobs.jobdir import JobDir
from beamtrove.execution.jobs.kinds import job_kind
from beamtrove.execution.jobs.shard_output import DEFAULT_SORT_MEMORY
from beamtrove.execution.jobs.status import format_status, retry_tasks, state_counts, task_states
from beamtrove.execution.jobs.worker import run_worker, run_workers, slurm_array_script
from beamtrove.processes import machine_cores, stopped_by

__all__ = ["add_commands"]

# The handlers that prepare, merge or verify a job import their modules when called: those import Beam, which
# reading a job's status, requeueing its tasks, starting a worker and printing the Slurm script do without (start-up
# time); a worker imports what its job's kind needs once it opens the job.


def _prepare(args: argparse.Namespace, pipeline_argv: list[str]) -> int:
    """Cut the input into shards and publish the job directory.

    Scans the input (plain JSONL: one unit per record; WARC or compressed
    JSONL: one unit per file), cuts N contiguous byte-balanced shards in sorted
    path order and publishes the job directory atomically. The options after --
    also set the local DirectRunner of each worker.
    """
    from beamtrove.execution.jobs.prepare import prepare_job  # noqa: PLC0415 - it imports Beam (start-up time)

    limits = {
        "lock_timeout": args.lock_timeout,
        "max_retries": args.max_retries,
        "attempt_timeout": args.attempt_timeout,
    }
    _, created = prepare_job(args.job_dir, args.pipeline, args.input, args.num_shards, pipeline_argv, **limits)
    verb = "prepared" if created else "already prepared identically; nothing changed:"
    print(f"{verb} {args.job_dir}: {job_kind(JobDir(args.job_dir)).describe()}")
    return 0


def _worker(args: argparse.Namespace, _: list[str]) -> int:
    """Claim and run tasks until none is left.

    With --processes N, N workers run side by side, forked from this process
    once it has opened the job and imported what its tasks need; the command
    ends when they all have, with the highest of their exit statuses.
    """
    options = {
        "max_tasks": args.max_tasks,
        "host": args.host,
        "poll_interval": args.poll_interval,
        "sort_memory": args.sort_memory,
    }
    if args.processes < 1:
        raise ConfigurationError(f"--processes {args.processes}: give 1 or more worker processes")
    if args.processes == 1:
        return run_worker(args.job_dir, **options)
    cores = machine_cores()
    if args.processes > cores:
        raise ConfigurationError(
            f"--processes {args.processes}: this machine gives this command {cores} cores; give at most {cores}"
        )
    # The job's kind imports its modules (Beam, the pipeline's) here, once, for every worker forked after.
    job_kind(JobDir(args.job_dir))
    codes, received = run_workers(args.job_dir, args.processes, **options)
    if received:
        return stopped_by(received)[1]
    return max(code if code >= 0 else 128 - code for code in codes)


def _status(args: argparse.Namespace, _: list[str]) -> int:
    """Show the state of every task; exit 1 while the job is incomplete."""
    states = task_states(args.job_dir)
    complete = all(entry["state"] == "done" for entry in states)
    if args.json:
        print(json.dumps({"complete": complete, "counts": state_counts(states), "tasks": states}, indent=1))
    else:
        print(format_status(states, args.all))
    return 0 if complete else 1


def _retry(args: argparse.Namespace, _: list[str]) -> int:
    """Re-queue failed, damaged (or stale) tasks, archiving their history."""
    requeued = retry_tasks(args.job_dir, args.task or (), all_failed=args.all_failed, all_damaged=args.all_damaged)
    print(f"re-queued {len(requeued)} task(s): {', '.join(requeued)}")
    return 0


def _merge(args: argparse.Namespace, _: list[str]) -> int:
    """Verify every task and publish the job's outputs as one run folder."""
    from beamtrove.execution.jobs.merge import merge_job  # noqa: PLC0415 - it imports Beam (start-up time)

    report = merge_job(args.job_dir, args.output, overwrite=args.overwrite)
    print(f"merged {report['documents']} documents into {report['output']}; stats in {report['stats']}")
    return 0


def _verify(args: argparse.Namespace, _: list[str]) -> int:
    """Check every done output and its records against the manifest.

    Exits 0 when complete and intact, 1 when incomplete, 2 when an output is
    damaged or a done record disagrees with the manifest.
    """
    # It imports Beam (start-up time).
    from beamtrove.execution.jobs.merge import format_verification, verify_job  # noqa: PLC0415

    report = verify_job(args.job_dir, args.expect_hosts)
    print(format_verification(report, args.expect_hosts))
    return 2 if report["problems"] or report["mismatches"] else 0 if report["ok"] else 1


def _slurm_template(args: argparse.Namespace, _: list[str]) -> int:
    """Print a Slurm array script that runs one worker per array task."""
    print(slurm_array_script(), end="")
    return 0


def add_commands(commands) -> None:
    """Adds ``elastic`` and its subcommands to the tree."""
    subcommands = group(commands, "elastic", "Independent workers over a shared job directory: no cluster needed")
    prepare = command(subcommands, "prepare", _prepare, pipeline_options=True)
    prepare.add_argument(
        "--pipeline",
        required=True,
        help="a shard-safe pipeline (fineweb, extract, filter, convert), or one with global steps run as staged tasks "
        "(dedup, dedup_index, tokenize, merge_tokens)",
    )
    prepare.add_argument("--input", action="append", required=True, help="files, directories or globs; repeatable")
    prepare.add_argument("--job-dir", required=True, help="the job directory to create, on shared storage")
    prepare.add_argument(
        "--num-shards", type=int, required=True, help="how many shards to cut (a staged job: how many partitions)"
    )
    prepare.add_argument(
        "--lock-timeout",
        type=float,
        default=300.0,
        help="seconds without heartbeat before another worker takes a task over (default: 300)",
    )
    prepare.add_argument("--max-retries", type=int, default=2, help="failed attempts retried per task (default: 2)")
    prepare.add_argument(
        "--attempt-timeout",
        type=float,
        help="seconds one attempt may run before it is stopped and counted as failed (default: no limit)",
    )
    worker = command(subcommands, "worker", _worker)
    worker.add_argument(
        "--processes",
        type=int,
        default=1,
        help="workers to run side by side, forked from this one with the job's modules loaded, so that they share "
        "that memory (default: 1)",
    )
    worker.add_argument("--max-tasks", "--max-shards", type=int, help="stop after running this many tasks")
    worker.add_argument("--host", help="host name recorded in locks and done records (default: this machine's)")
    worker.add_argument("--poll-interval", type=float, help="seconds between looks while all tasks are taken")
    worker.add_argument(
        "--sort-memory",
        type=int,
        default=DEFAULT_SORT_MEMORY,
        metavar="BYTES",
        help="bytes of documents held while sorting a shard's output by id; a larger shard is sorted in runs "
        "spilled to its attempt directory, then merged (default: 268435456 = 256 MiB, at least 65536)",
    )
    status = command(subcommands, "status", _status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--all", action="store_true", help="list done tasks too")
    retry = command(subcommands, "retry", _retry)
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-failed", action="store_true", help="every failed task")
    which.add_argument(
        "--all-damaged", action="store_true", help="every done task whose files are missing or changed (see status)"
    )
    which.add_argument(
        "--task", "--shard-id", action="append", help="a failed, damaged, stale or pending task; repeatable"
    )
    merge = command(subcommands, "merge", _merge)
    merge.add_argument(
        "--output",
        required=True,
        help="the run folder to write, as `beamtrove run` writes one: documents/, excluded/, dead_letters/, "
        "stats.json, report.html",
    )
    merge.add_argument("--overwrite", action="store_true", help="replace what the folder holds once the merge succeeds")
    verify = command(subcommands, "verify", _verify)
    verify.add_argument("--expect-hosts", type=int, help="require tasks completed by at least this many hosts")
    for parser in (worker, status, retry, merge, verify):
        parser.add_argument("--job-dir", required=True, help="the job directory")
    command(subcommands, "slurm-template", _slurm_template)
