"""``beamtrove elastic``: prepare, worker, status, retry, merge, verify, slurm-template."""

from __future__ import annotations

import argparse
import json
import sys
import time

from beamtrove.elastic.jobdir import ElasticError
from beamtrove.elastic.manifest import prepare_job
from beamtrove.elastic.merge import merge_job, retry_shards, shard_states, verify_job
from beamtrove.elastic.slurm import SLURM_ARRAY_TEMPLATE
from beamtrove.elastic.worker import run_worker

__all__ = ["main"]

_STATES = ("done", "running", "stale", "pending", "failed")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="beamtrove elastic",
        description="Independent workers over a shared job directory: no cluster needed.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser(
        "prepare",
        help="cut the input into shards and publish the job directory",
        usage="beamtrove elastic prepare --pipeline NAME --input PATH --job-dir DIR --num-shards N "
        "[--lock-timeout S] [--max-retries R] [--attempt-timeout S] [-- PIPELINE AND RUNNER OPTIONS]",
        description="Scans the input (plain JSONL: one unit per record; WARC or compressed JSONL: one unit per "
        "file), cuts N contiguous byte-balanced shards in sorted path order and publishes the job directory "
        "atomically. Options after -- go to the pipeline (as `beamtrove run PIPELINE` takes them) and to the "
        "local DirectRunner of each worker.",
    )
    prepare.add_argument("--pipeline", required=True, help="a shard-safe pipeline: fineweb, extract or convert")
    prepare.add_argument("--input", action="append", required=True, help="files, directories or globs; repeatable")
    prepare.add_argument("--job-dir", required=True, help="the job directory to create, on shared storage")
    prepare.add_argument("--num-shards", type=int, required=True, help="how many shards to cut")
    prepare.add_argument(
        "--lock-timeout",
        type=float,
        default=300.0,
        help="seconds without heartbeat before another worker takes a shard over (default: 300)",
    )
    prepare.add_argument(
        "--max-retries", type=int, default=2, help="failed attempts retried before a shard fails (default: 2)"
    )
    prepare.add_argument(
        "--attempt-timeout",
        type=float,
        help="seconds one attempt may run before it is stopped and counted as failed (default: no limit)",
    )
    worker = commands.add_parser("worker", help="claim and process shards until none is left")
    worker.add_argument("--job-dir", required=True)
    worker.add_argument("--max-shards", type=int, help="stop after processing this many shards")
    worker.add_argument("--host", help="host name recorded in locks and done records (default: this machine's)")
    worker.add_argument("--poll-interval", type=float, help="seconds between looks while all shards are taken")
    status = commands.add_parser("status", help="state of every shard; exit 1 while the job is incomplete")
    status.add_argument("--job-dir", required=True)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--all", action="store_true", help="list done shards too")
    retry = commands.add_parser("retry", help="re-queue failed (or stale) shards, archiving their history")
    retry.add_argument("--job-dir", required=True)
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-failed", action="store_true")
    which.add_argument("--shard-id", action="append")
    merge = commands.add_parser("merge", help="verify every shard and concatenate their documents in order")
    merge.add_argument("--job-dir", required=True)
    merge.add_argument("--output", required=True, help="the merged JSONL file (gzip when it ends in .gz)")
    merge.add_argument("--overwrite", action="store_true", help="replace an existing output")
    verify = commands.add_parser("verify", help="check every done output; exit 1 unless complete and intact")
    verify.add_argument("--job-dir", required=True)
    verify.add_argument("--expect-hosts", type=int, help="require shards completed by at least this many hosts")
    commands.add_parser("slurm-template", help="print a Slurm array script running one worker per task")
    return parser


def _status(job_dir: str, as_json: bool, show_all: bool) -> int:
    states = shard_states(job_dir)
    counts = {state: sum(entry["state"] == state for entry in states) for state in _STATES}
    complete = counts["done"] == len(states)
    if as_json:
        print(json.dumps({"complete": complete, "counts": counts, "shards": states}, indent=1))
        return 0 if complete else 1
    print(f"{len(states)} shards: " + ", ".join(f"{counts[state]} {state}" for state in _STATES))
    for entry in states:
        if entry["state"] == "done" and not show_all:
            continue
        detail = entry.get("owner", "")
        if "since" in entry:
            detail += f" for {time.time() - entry['since']:.0f} s"
        if entry["state"] == "done":
            detail += f", {entry['documents']} documents"
        if entry["state"] == "failed":
            detail += f": {(entry['error'].strip().splitlines() or [''])[-1]}"
        print(f"  {entry['id']}  {entry['state']:<8} attempts {entry['attempts']}  {detail}")
    return 0 if complete else 1


def _verify(job_dir: str, expect_hosts: int | None) -> int:
    report = verify_job(job_dir, expect_hosts)
    hosts = ", ".join(f"{host} ({count})" for host, count in sorted(report["hosts"].items()))
    print(f"{report['documents']} documents in done shards, completed by {len(report['hosts'])} host(s): {hosts}")
    for problem in report["problems"]:
        print(f"damaged: {problem}")
    if report["missing"] or report["failed"]:
        print(f"not done: {len(report['missing'])} pending or running, {len(report['failed'])} failed")
    if expect_hosts is not None and len(report["hosts"]) < expect_hosts:
        print(f"expected shards completed by at least {expect_hosts} hosts")
    if report["problems"]:
        return 2
    return 0 if report["ok"] else 1


def main(argv: list[str]) -> int:
    """Runs ``beamtrove elastic ARGV``; returns the exit status."""
    pipeline_args: list[str] = []
    if "--" in argv:
        argv, pipeline_args = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args = _parser().parse_args(argv)
    if pipeline_args and args.command != "prepare":
        print("beamtrove elastic: error: only prepare takes pipeline options after --", file=sys.stderr)
        return 2
    try:
        if args.command == "prepare":
            manifest, created = prepare_job(
                args.job_dir,
                args.pipeline,
                args.input,
                args.num_shards,
                pipeline_args,
                lock_timeout=args.lock_timeout,
                max_retries=args.max_retries,
                attempt_timeout=args.attempt_timeout,
            )
            records = sum(shard["records"] for shard in manifest["shards"])
            verb = "prepared" if created else "already prepared identically; nothing changed:"
            print(
                f"{verb} {args.job_dir}: {len(manifest['shards'])} shards over {len(manifest['inputs'])} input "
                f"file(s), {records} records"
            )
            return 0
        if args.command == "worker":
            return run_worker(
                args.job_dir, max_shards=args.max_shards, host=args.host, poll_interval=args.poll_interval
            )
        if args.command == "status":
            return _status(args.job_dir, args.json, args.all)
        if args.command == "retry":
            requeued = retry_shards(args.job_dir, args.shard_id or (), all_failed=args.all_failed)
            print(f"re-queued {len(requeued)} shard(s): {', '.join(requeued)}")
            return 0
        if args.command == "merge":
            report = merge_job(args.job_dir, args.output, overwrite=args.overwrite)
            print(f"merged {report['documents']} documents into {report['output']}; stats in {report['stats']}")
            return 0
        if args.command == "verify":
            return _verify(args.job_dir, args.expect_hosts)
        print(SLURM_ARRAY_TEMPLATE, end="")
        return 0
    except ElasticError as exc:
        print(f"beamtrove elastic: error: {exc}", file=sys.stderr)
        return 2
