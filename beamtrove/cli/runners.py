"""``beamtrove runners`` and ``beamtrove slurm``: obtain Prism and Flink, start Flink, run on Flink inside Slurm."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from beamtrove.cli.parsing import command, group
from beamtrove.configuration import ConfigurationError
from beamtrove.execution import runner_parts, runner_setup
from beamtrove.execution.flink import flink_process, parse_properties, wait_for_taskmanagers, write_flink_config

__all__ = ["add_commands"]

# The arguments of each command that go, under the same names, to the function it calls.
_FLINK_CONFIG_SETTINGS = (
    "jobmanager", "rest_port", "rpc_port", "slots", "parallelism", "tmp_dir", "jobmanager_memory", "taskmanager_memory",
)  # fmt: skip
_SUBMIT_SETTINGS = (
    "nodes", "dry_run", "flink_home", "job_server_jar", "work_dir", "cpus_per_node", "worker_pool_port", "time_limit",
    "partition", "account", "mem", "sbatch_options", "rest_port", "rpc_port", "jobmanager_memory",
    "taskmanager_memory", "startup_timeout",
)  # fmt: skip
_RUNNER_GROUPS = {"prism": ("prism",), "flink": ("flink-job-server", "flink-dist"), "all": runner_parts.PARTS}


def _slurm_flink():
    """The Slurm + Flink module: it checks and builds pipelines, so it imports Beam, which the other commands skip."""
    # It imports Beam: only the slurm commands that check or build a pipeline pay for it.
    from beamtrove.execution import slurm_flink  # noqa: PLC0415

    return slurm_flink


def _settings(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {name: getattr(args, name) for name in names}


def _setup(args: argparse.Namespace, _: list[str]) -> int:
    """Obtain the runners into $BEAMTROVE_RUNNERS (default ~/.cache/beamtrove/runners).

    Prism comes from `go install`, Beam's Flink job-server jar from `mvn
    dependency:copy` (or a jar built elsewhere, --job-server-jar), a Flink
    distribution from `pip download apache-flink-libraries`; each is recorded
    in runners.json. Parts already present are reused unless --force. Exits 1
    when a requested part failed.
    """
    parts = [part for runner in args.runner or ["all"] for part in _RUNNER_GROUPS.get(runner, (runner,))]
    if args.job_server_jar and "flink-job-server" not in parts:
        raise ConfigurationError("--job-server-jar needs --runner flink, flink-job-server or all")
    try:
        results = runner_setup.setup_runners(
            parts, args.dir, args.force, args.flink_version, args.job_server_jar, args.downloads
        )
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    table, errors = runner_setup.format_setup(results, args.dir)
    print(table)
    if errors:
        print(errors, file=sys.stderr)
    return 1 if errors else 0


def _path(args: argparse.Namespace, _: list[str]) -> int:
    """Print where each runner part is and whether it is present."""
    states = runner_parts.part_states(args.dir, args.flink_version)
    if args.json:
        print(json.dumps(states, indent=2))
        return 0
    print(f"runners directory {states['runners_dir']} (Beam {states['beam_version']})")
    for part, row in states["parts"].items():
        print(f"{part:<17} {row['status']:<8} {row['path']}")
        if row["status"] == "failed":
            print(f"{'':<17} {'':<8} last attempt: {row['error']}")
    return 0


def _flink_config(args: argparse.Namespace, _: list[str]) -> int:
    """Write config.yaml and log4j.properties for a standalone cluster."""
    extra = parse_properties(args.define)
    print(write_flink_config(args.conf_dir, **_settings(args, _FLINK_CONFIG_SETTINGS), extra=extra))
    return 0


def _flink_process(args: argparse.Namespace, _: list[str]) -> int:
    """Replace this process with a Flink JobManager or TaskManager JVM."""
    home = args.flink_home or os.environ.get("FLINK_HOME") or runner_parts.part_path("flink-dist")
    try:
        process = flink_process(args.role, home, args.conf_dir, args.log_file, parse_properties(args.define))
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        raise ConfigurationError(str(exc)) from None
    sys.stdout.flush()
    sys.stderr.flush()
    # The JVM replaces this process, so whoever started it signals Flink itself.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execve(process.command[0], process.command, process.env)
    return 1  # not reached


def _flink_wait(args: argparse.Namespace, _: list[str]) -> int:
    """Wait until the TaskManagers are registered; print the cluster's task slots."""

    def waiting(line: str) -> None:
        print(f"waiting for the Flink cluster: {line}", file=sys.stderr, flush=True)

    try:
        registered = wait_for_taskmanagers(args.rest, args.taskmanagers, args.timeout, 1.0, args.watch_pid, waiting)
    except TimeoutError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    slots = sum(int(manager.get("slotsNumber", 0)) for manager in registered)
    print(f"{len(registered)} TaskManager(s) registered at {args.rest} with {slots} slot(s)", file=sys.stderr)
    print(slots)
    return 0


def _submit(args: argparse.Namespace, pipeline_argv: list[str]) -> int:
    """Sbatch one pipeline on a Flink cluster started inside the job.

    The job script starts a standalone Flink cluster across the allocation
    (JobManager on the first node, one TaskManager per node), runs `beamtrove
    run PIPELINE` on it with the FlinkRunner, stops the cluster and exits with
    the pipeline's status. --dry-run prints the script instead; it needs
    neither Slurm nor the job-server jar yet.
    """
    try:
        submission = _slurm_flink().submit(args.pipeline, pipeline_argv, **_settings(args, _SUBMIT_SETTINGS))
    except RuntimeError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    for warning in submission.warnings:
        print(f"beamtrove: warning: {warning}", file=sys.stderr)
    if submission.job_id is None:
        print(submission.script, end="")
        return 0
    print(f"submitted Slurm job {submission.job_id}\n  script:        {submission.script_path}")
    print(f"  log:           {submission.work_dir / f'beamtrove-flink-{submission.job_id}.out'}")
    print(f"  job directory: {submission.work_dir / submission.job_id}")
    return 0


def _node(args: argparse.Namespace, _: list[str]) -> int:
    """Run what each node's srun task runs: a TaskManager and a worker pool, until stopped."""
    return _slurm_flink().run_node(args.flink_home, args.job_dir, args.worker_pool_port)


def _runners_commands(commands) -> None:
    subcommands = group(commands, "runners", "Obtain Prism and Flink from package registries, so runs download nothing")
    setup = command(subcommands, "setup", _setup)
    setup.add_argument(
        "--runner",
        choices=("prism", "flink", "all", *runner_parts.PARTS[1:]),
        action="append",
        help="prism; flink (= flink-job-server and flink-dist); flink-job-server; flink-dist; all (the default); "
        "repeatable",
    )
    setup.add_argument("--force", action="store_true", help="obtain parts again even when present")
    setup.add_argument("--job-server-jar", metavar="JAR", help="register this Beam Flink job-server jar")
    setup.add_argument("--downloads", metavar="DIR", help="keep downloaded archives here and reuse them")
    path = command(subcommands, "path", _path)
    path.add_argument("--json", action="store_true", help="print JSON")
    for parser in (setup, path):
        parser.add_argument("--dir", help="the runners directory (default: $BEAMTROVE_RUNNERS or ~/.cache/...)")
        parser.add_argument(
            "--flink-version", choices=sorted(runner_parts.FLINK_RELEASES), help="Flink minor version (default: newest)"
        )
    flink = group(subcommands, "flink", "Start and watch a standalone Flink cluster from the distribution")
    config = command(flink, "config", _flink_config)
    config.add_argument("--conf-dir", required=True)
    config.add_argument("--jobmanager", default="localhost", help="host the JobManager is reached at")
    config.add_argument("--rest-port", type=int, default=8081)
    config.add_argument("--rpc-port", type=int, default=6123)
    config.add_argument("--slots", type=int, default=1, help="task slots per TaskManager")
    config.add_argument("--parallelism", type=int, help="default parallelism (default: --slots)")
    config.add_argument("--tmp-dir", help="Flink's temporary directory")
    config.add_argument("--jobmanager-memory", default="1600m")
    config.add_argument("--taskmanager-memory", default="1728m")
    config.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="any other setting")
    for role in ("jobmanager", "taskmanager"):
        process = command(flink, role, _flink_process)
        process.set_defaults(role=role)
        process.add_argument("--conf-dir", required=True, help="directory holding config.yaml")
        process.add_argument("--log-file", required=True)
        process.add_argument("--flink-home", help="default: $FLINK_HOME, else the runners directory's flink-dist")
        process.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="setting for this process")
    wait = command(flink, "wait", _flink_wait)
    wait.add_argument("--rest", required=True, help="http://HOST:PORT of the JobManager")
    wait.add_argument("--taskmanagers", type=int, required=True)
    wait.add_argument("--timeout", type=float, default=300.0)
    wait.add_argument("--watch-pid", type=int, action="append", default=[], help="stop waiting when this pid exits")


def _slurm_commands(commands) -> None:
    subcommands = group(commands, "slurm", "Run a pipeline on a Flink cluster inside a Slurm job")
    submit = command(subcommands, "submit", _submit, pipeline_options=True)
    submit.add_argument("pipeline", help="the pipeline to run (as beamtrove run takes it)")
    submit.add_argument("--nodes", type=int, required=True, help="nodes; each runs one TaskManager")
    submit.add_argument("--time", dest="time_limit", help="Slurm time limit, e.g. 04:00:00")
    submit.add_argument("--partition", help="Slurm partition")
    submit.add_argument("--account", help="Slurm account")
    submit.add_argument("--cpus-per-node", type=int, help="CPUs (and slots) per node; default: whole nodes")
    submit.add_argument("--mem", help="memory per node, as sbatch --mem takes it")
    submit.add_argument(
        "--sbatch-option", dest="sbatch_options", action="append", default=[], help="another #SBATCH option"
    )
    submit.add_argument("--flink-home", help="Flink distribution (default: $FLINK_HOME, else the runners directory's)")
    submit.add_argument("--job-server-jar", help="Beam Flink job-server jar (default: the runners directory's)")
    submit.add_argument("--work-dir", default="beamtrove-flink", help="shared directory for the job's files")
    submit.add_argument("--rest-port", type=int, default=8081, help="JobManager REST port (default: 8081)")
    submit.add_argument("--rpc-port", type=int, default=6123, help="JobManager RPC port (default: 6123)")
    submit.add_argument("--worker-pool-port", type=int, default=50000, help="port of each node's SDK worker pool")
    submit.add_argument("--jobmanager-memory", default="1600m", help="JobManager process size (default: 1600m)")
    submit.add_argument("--taskmanager-memory", default="4g", help="TaskManager process size (default: 4g)")
    submit.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to wait for the TaskManagers")
    submit.add_argument("--dry-run", action="store_true", help="print the script instead of submitting it")
    node = command(subcommands, "node", _node)
    node.add_argument("--flink-home", required=True)
    node.add_argument("--job-dir", required=True)
    node.add_argument("--worker-pool-port", type=int, default=0)


def add_commands(commands) -> None:
    """Adds ``runners`` and ``slurm`` to the tree."""
    _runners_commands(commands)
    _slurm_commands(commands)
