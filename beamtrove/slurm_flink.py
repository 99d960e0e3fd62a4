"""``beamtrove slurm submit``: one pipeline on a standalone Flink cluster that lives inside one Slurm job.

The job script this module writes starts, inside its allocation:

* the JobManager on the allocation's first node (where Slurm runs the batch
  script), with a Flink configuration generated in the job's directory;
* one TaskManager per node through ``srun --ntasks-per-node=1``, each next to
  a Beam SDK worker pool (the pipeline's Python code runs in the pool's
  workers: ``--environment_type EXTERNAL --environment_config
  localhost:PORT``), unless the pipeline options choose their own
  ``--environment_type``;

waits until every TaskManager is registered (the JobManager's REST API),
runs ``python -m beamtrove run PIPELINE --runner FlinkRunner --flink_master
JM:PORT --flink_job_server_jar JAR ...``, then stops the cluster (also on
``scancel`` or at the time limit) and exits with the pipeline's status.

The job's directory, ``<work dir>/<job id>/``, holds ``conf/`` (the Flink
configuration), ``log/`` (JobManager, TaskManager and worker-pool logs),
``tmp/`` (Flink's temporary directories, one per node) and ``exit_status``
(the job's exit status: the pipeline's, 3 when the cluster did not come up,
143 when the job was stopped).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence

from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PortableOptions, StandardOptions

from beamtrove import __version__
from beamtrove.options import unknown_options
from beamtrove.pipelines import PIPELINES, load_pipeline
from beamtrove.runners import (
    JOB_SERVER_MAIN_CLASS,
    beam_version,
    default_runners_dir,
    flink_process,
    is_flink_home,
    job_server_main_class,
    part_path,
    part_present,
)

__all__ = ["CLUSTER_FAILED", "SubmitError", "job_script", "main"]

#: The job's exit status when the Flink cluster did not come up (no pipeline ran).
CLUSTER_FAILED = 3
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)
_CHILD_GRACE_SECONDS = 30.0

_SCRIPT = r"""#!/bin/bash
# beamtrove: a standalone Flink cluster across this Slurm allocation runs one pipeline, then stops.
# Written by `beamtrove slurm submit` (beamtrove {{version}}, Beam {{beam_version}}) on {{written}}.
# The batch script runs on the allocation's first node: the JobManager and the pipeline's client run there,
# and every node runs one TaskManager{{worker_pool_note}}. The job's directory
#   {{work_dir_raw}}/<job id>/
# holds conf/ (the Flink configuration), log/ (Flink's logs), tmp/ and exit_status: the pipeline's exit
# status, {{cluster_failed}} when the Flink cluster did not come up, 143 when the job was stopped.
#SBATCH --job-name=beamtrove-{{pipeline}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node=1
{{sbatch_options}}#SBATCH --chdir={{chdir}}
#SBATCH --output={{work_dir_raw}}/beamtrove-flink-%j.out
set -uo pipefail

PYTHON={{python}}
FLINK_HOME={{flink_home}}
JOB_SERVER_JAR={{job_server_jar}}
REST_PORT={{rest_port}}
RPC_PORT={{rpc_port}}
WORKER_POOL_PORT={{worker_pool_port}}  # 0: no worker pools, the pipeline options choose the SDK environment
JOBMANAGER_MEMORY={{jobmanager_memory}}
TASKMANAGER_MEMORY={{taskmanager_memory}}
STARTUP_TIMEOUT={{startup_timeout}}
ADD_PARALLELISM={{add_parallelism}}  # 1: run with --parallelism = the cluster's task slots
PIPELINE=({{pipeline_args}})

JOB_DIR={{work_dir}}/$SLURM_JOB_ID
mkdir -p "$JOB_DIR/log" "$JOB_DIR/tmp"
log() { printf '[beamtrove-flink %s] %s\n' "$(date '+%F %T')" "$*"; }
runners() { "$PYTHON" -m beamtrove.runners "$@"; }

mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
JOBMANAGER=${NODES[0]}
if [[ -n "${SLURMD_NODENAME:-}" && "$SLURMD_NODENAME" != "$JOBMANAGER" ]]; then
  log "the batch script runs on $SLURMD_NODENAME, not on the first node $JOBMANAGER: the JobManager runs here"
  JOBMANAGER=$SLURMD_NODENAME
fi
SLOTS=${SLURM_CPUS_ON_NODE:-1}
REST=http://$JOBMANAGER:$REST_PORT
JOBMANAGER_PID=
TASKMANAGERS_PID=
PIPELINE_PID=

# stop PID SIGNAL:SECONDS...: sends each signal in turn until the process is gone, waiting SECONDS after each.
stop() {
  local pid=$1 step signal seconds
  shift
  for step in "$@"; do
    kill -0 "$pid" 2>/dev/null || break
    signal=${step%%:*} seconds=${step##*:}
    kill -s "$signal" "$pid" 2>/dev/null
    for ((tick = 0; tick < seconds * 4; tick++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
  done
  wait "$pid" 2>/dev/null
  return 0
}

cleanup() {
  local status=$?
  trap - EXIT TERM INT HUP
  if [[ -n "$PIPELINE_PID" ]]; then
    log "stopping the pipeline"
    stop "$PIPELINE_PID" INT:30 TERM:10 KILL:5
  fi
  if [[ -n "$TASKMANAGERS_PID" ]]; then
    # srun passes SIGUSR1 on to every node's task, which stops its TaskManager and worker pool;
    # SIGTERM makes srun end the step by force.
    log "stopping the TaskManagers"
    stop "$TASKMANAGERS_PID" USR1:60 TERM:40 KILL:5
  fi
  if [[ -n "$JOBMANAGER_PID" ]]; then
    log "stopping the JobManager"
    stop "$JOBMANAGER_PID" TERM:30 KILL:5
  fi
  echo "$status" > "$JOB_DIR/exit_status"
  log "Flink cluster stopped; job exit status $status"
  exit "$status"
}
trap cleanup EXIT
trap 'log "received a stop signal"; exit 143' TERM INT HUP

log "job $SLURM_JOB_ID: ${#NODES[@]} node(s) (${NODES[*]}); JobManager on $JOBMANAGER; $SLOTS slot(s) per TaskManager"
runners flink config --conf-dir "$JOB_DIR/conf" --jobmanager "$JOBMANAGER" --rest-port "$REST_PORT" \
  --rpc-port "$RPC_PORT" --slots "$SLOTS" --parallelism $((${#NODES[@]} * SLOTS)) --tmp-dir "$JOB_DIR/tmp" \
  --jobmanager-memory "$JOBMANAGER_MEMORY" --taskmanager-memory "$TASKMANAGER_MEMORY" >/dev/null ||
  exit {{cluster_failed}}

# Started directly (not through the runners function): the process becomes the JobManager's JVM, so $! is its pid.
"$PYTHON" -m beamtrove.runners flink jobmanager --flink-home "$FLINK_HOME" --conf-dir "$JOB_DIR/conf" \
  --log-file "$JOB_DIR/log/jobmanager-$JOBMANAGER.log" >"$JOB_DIR/log/jobmanager-$JOBMANAGER.out" 2>&1 &
JOBMANAGER_PID=$!
log "JobManager started (pid $JOBMANAGER_PID, log $JOB_DIR/log/jobmanager-$JOBMANAGER.log)"

srun --nodes="${#NODES[@]}" --ntasks="${#NODES[@]}" --ntasks-per-node=1 --overlap --label \
  "$PYTHON" -m beamtrove.slurm_flink node --flink-home "$FLINK_HOME" --job-dir "$JOB_DIR" \
  --worker-pool-port "$WORKER_POOL_PORT" &
TASKMANAGERS_PID=$!

log "waiting up to $STARTUP_TIMEOUT s for ${#NODES[@]} TaskManager(s) at $REST"
TOTAL_SLOTS=$(runners flink wait --rest "$REST" --taskmanagers "${#NODES[@]}" --timeout "$STARTUP_TIMEOUT" \
  --watch-pid "$JOBMANAGER_PID" --watch-pid "$TASKMANAGERS_PID") || {
  log "the Flink cluster did not come up; see $JOB_DIR/log/"
  exit {{cluster_failed}}
}
log "Flink cluster up: ${#NODES[@]} TaskManager(s) registered with $TOTAL_SLOTS slot(s) in total; REST API at $REST"

EXTRA=()
if ((ADD_PARALLELISM)); then
  EXTRA+=(--parallelism "$TOTAL_SLOTS")
fi
if ((WORKER_POOL_PORT)); then
  EXTRA+=(--environment_type EXTERNAL --environment_config "localhost:$WORKER_POOL_PORT")
fi
# Beam's job server reads the cluster's configuration (default parallelism) from here.
export FLINK_CONF_DIR=$JOB_DIR/conf
log "running: beamtrove ${PIPELINE[*]} --runner FlinkRunner --flink_master $JOBMANAGER:$REST_PORT" \
  "--flink_job_server_jar $JOB_SERVER_JAR ${EXTRA[*]}"
"$PYTHON" -m beamtrove "${PIPELINE[@]}" --runner FlinkRunner --flink_master "$JOBMANAGER:$REST_PORT" \
  --flink_job_server_jar "$JOB_SERVER_JAR" "${EXTRA[@]}" &
PIPELINE_PID=$!
wait "$PIPELINE_PID"
STATUS=$?
PIPELINE_PID=
log "pipeline exited with status $STATUS"
exit "$STATUS"
"""


class SubmitError(ValueError):
    """A ``beamtrove slurm submit`` request that cannot work; the message says what to fix."""


def _resolve_flink_home(flink_home: str | None) -> pathlib.Path:
    candidate = flink_home or os.environ.get("FLINK_HOME") or str(part_path("flink-dist"))
    origin = "--flink-home" if flink_home else ("$FLINK_HOME" if os.environ.get("FLINK_HOME") else "runners")
    home = pathlib.Path(candidate).expanduser().resolve()
    if not is_flink_home(home):
        where = f"{home} (from {origin})" if origin != "runners" else f"the runners directory ({home})"
        raise SubmitError(
            f"No Flink distribution at {where}: it needs lib/flink-dist-*.jar and bin/bash-java-utils.jar. "
            f"Run `beamtrove runners setup --runner flink-dist` or pass --flink-home DIR."
        )
    return home


def _resolve_job_server_jar(job_server_jar: str | None) -> tuple[str, str | None]:
    """The job-server jar to pass Beam and a warning about it, if any."""
    if job_server_jar and re.match(r"^https?://", job_server_jar):
        return job_server_jar, None
    if job_server_jar:
        jar = pathlib.Path(job_server_jar).expanduser().resolve()
        if not jar.is_file():
            raise SubmitError(
                f"No job-server jar at {jar} (--job-server-jar). Run `beamtrove runners setup --runner "
                f"flink-job-server` or pass the path of a Beam Flink job-server jar."
            )
    elif part_present("flink-job-server"):
        jar = part_path("flink-job-server")
    else:
        raise SubmitError(
            f"No Beam Flink job-server jar: the runners directory {default_runners_dir()} has none. Run "
            f"`beamtrove runners setup --runner flink-job-server` (Maven must serve "
            f"beam-runners-flink-*-job-server {beam_version()}), or build it from Beam's source and pass "
            f"--job-server-jar JAR."
        )
    main_class = job_server_main_class(jar)
    warning = None
    if main_class != JOB_SERVER_MAIN_CLASS:
        warning = (
            f"{jar} does not look like a Beam Flink job-server jar (its manifest names Main-Class "
            f"{main_class or 'none'}, not {JOB_SERVER_MAIN_CLASS}): the pipeline will likely fail to start."
        )
    return str(jar), warning


def _check_pipeline(name: str, pipeline_argv: list[str]) -> tuple[bool, bool]:
    """Validates the pipeline and its options; returns (add --parallelism, start worker pools)."""
    try:
        load_pipeline(name)
    except ValueError as exc:
        raise SubmitError(f"{exc} Pipelines: {', '.join(sorted(PIPELINES))}.") from exc
    unknown = unknown_options(pipeline_argv)
    if unknown:
        raise SubmitError(f"unknown pipeline options {' '.join(unknown)} (see beamtrove run {name} --help)")
    options = PipelineOptions(pipeline_argv)
    flink = options.view_as(FlinkRunnerOptions)
    taken = {
        "--runner": options.view_as(StandardOptions).runner is not None,
        "--flink_master": flink.flink_master != "[auto]",
        "--flink_job_server_jar": flink.flink_job_server_jar is not None,
        "--flink_submit_uber_jar": flink.flink_submit_uber_jar,
    }
    given = [flag for flag, present in taken.items() if present]
    if given:
        raise SubmitError(
            f"{', '.join(given)} among the pipeline options: beamtrove slurm submit sets the runner, the Flink "
            f"master and the job-server jar itself (use --job-server-jar for the jar)."
        )
    return flink.parallelism == -1, options.view_as(PortableOptions).environment_type is None


def job_script(
    pipeline: str,
    pipeline_argv: Sequence[str],
    *,
    nodes: int,
    flink_home: str | os.PathLike,
    job_server_jar: str,
    work_dir: str | os.PathLike,
    time_limit: str | None = None,
    partition: str | None = None,
    account: str | None = None,
    cpus_per_node: int | None = None,
    mem: str | None = None,
    sbatch_options: Sequence[str] = (),
    rest_port: int = 8081,
    rpc_port: int = 6123,
    worker_pool_port: int = 50000,
    jobmanager_memory: str = "1600m",
    taskmanager_memory: str = "4g",
    startup_timeout: float = 300.0,
    add_parallelism: bool = True,
    python: str | None = None,
    chdir: str | os.PathLike | None = None,
) -> str:
    """The sbatch script that runs ``beamtrove run PIPELINE`` on a Flink cluster inside the allocation.

    Args:
        pipeline: The pipeline's name.
        pipeline_argv: Its options (inputs, outputs, filters, Beam options).
        nodes: Nodes to allocate; each runs one TaskManager.
        flink_home: The Flink distribution every node starts Flink from.
        job_server_jar: Beam's Flink job-server jar (path or http(s) URL).
        work_dir: Directory (shared by the nodes) holding the job's log and directories.
        time_limit: ``--time``.
        partition: ``--partition``.
        account: ``--account``.
        cpus_per_node: ``--cpus-per-task`` of the one task per node; whole
            nodes (``--exclusive``) when None. It is also each TaskManager's slot count.
        mem: ``--mem`` (memory per node).
        sbatch_options: More ``#SBATCH`` options, e.g. ``--qos=high``.
        rest_port: The JobManager's REST port.
        rpc_port: The JobManager's RPC port.
        worker_pool_port: Port of each node's Beam SDK worker pool; 0 starts none
            (for pipeline options that choose their own ``--environment_type``).
        jobmanager_memory: The JobManager's process size.
        taskmanager_memory: Each TaskManager's process size.
        startup_timeout: Seconds to wait for all TaskManagers.
        add_parallelism: Run the pipeline with ``--parallelism`` = the cluster's slots.
        python: The Python interpreter of the nodes (default: this one).
        chdir: The job's working directory (default: the current directory).

    Returns:
        The script's text.
    """
    if nodes < 1:
        raise SubmitError(f"--nodes must be at least 1, not {nodes}.")
    options = [f"--time={time_limit}" if time_limit else "", f"--partition={partition}" if partition else ""]
    options += [f"--account={account}" if account else "", f"--mem={mem}" if mem else ""]
    options.append(f"--cpus-per-task={cpus_per_node}" if cpus_per_node else "--exclusive")
    options += list(sbatch_options)
    values = {
        "version": __version__,
        "beam_version": beam_version(),
        "written": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "worker_pool_note": " and one Beam SDK worker pool" if worker_pool_port else "",
        "cluster_failed": str(CLUSTER_FAILED),
        "pipeline": re.sub(r"[^A-Za-z0-9_.-]", "_", pipeline),
        "nodes": str(nodes),
        "sbatch_options": "".join(f"#SBATCH {option}\n" for option in options if option),
        "chdir": str(pathlib.Path(chdir or os.getcwd()).resolve()),
        "work_dir_raw": str(pathlib.Path(work_dir).resolve()),
        "work_dir": shlex.quote(str(pathlib.Path(work_dir).resolve())),
        "python": shlex.quote(python or sys.executable),
        "flink_home": shlex.quote(str(flink_home)),
        "job_server_jar": shlex.quote(str(job_server_jar)),
        "rest_port": str(int(rest_port)),
        "rpc_port": str(int(rpc_port)),
        "worker_pool_port": str(int(worker_pool_port)),
        "jobmanager_memory": shlex.quote(jobmanager_memory),
        "taskmanager_memory": shlex.quote(taskmanager_memory),
        "startup_timeout": str(int(startup_timeout)),
        "add_parallelism": "1" if add_parallelism else "0",
        "pipeline_args": " ".join(shlex.quote(argument) for argument in ["run", pipeline, *pipeline_argv]),
    }
    script = _SCRIPT
    for key, value in values.items():
        script = script.replace("{{" + key + "}}", value)
    leftover = re.search(r"\{\{\w+\}\}", script)
    if leftover:
        raise AssertionError(f"unfilled job script placeholder {leftover.group(0)}")
    return script


def _submit(args: argparse.Namespace, pipeline_argv: list[str]) -> int:
    try:
        if args.nodes < 1:
            raise SubmitError(f"--nodes must be at least 1, not {args.nodes}.")
        if args.cpus_per_node is not None and args.cpus_per_node < 1:
            raise SubmitError(f"--cpus-per-node must be at least 1, not {args.cpus_per_node}.")
        add_parallelism, worker_pools = _check_pipeline(args.pipeline, pipeline_argv)
        flink_home = _resolve_flink_home(args.flink_home)
        jar, warning = _resolve_job_server_jar(args.job_server_jar)
        work_dir = pathlib.Path(args.work_dir).resolve()
        script = job_script(
            args.pipeline, pipeline_argv, nodes=args.nodes, flink_home=flink_home, job_server_jar=jar,
            work_dir=work_dir, time_limit=args.time, partition=args.partition, account=args.account,
            cpus_per_node=args.cpus_per_node, mem=args.mem, sbatch_options=args.sbatch_option,
            rest_port=args.rest_port, rpc_port=args.rpc_port,
            worker_pool_port=args.worker_pool_port if worker_pools else 0,
            jobmanager_memory=args.jobmanager_memory, taskmanager_memory=args.taskmanager_memory,
            startup_timeout=args.startup_timeout, add_parallelism=add_parallelism,
        )  # fmt: skip
    except SubmitError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    if warning:
        print(f"beamtrove: warning: {warning}", file=sys.stderr)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("beamtrove: warning: no java here; the nodes need Java 11+ on PATH or JAVA_HOME.", file=sys.stderr)
    if args.dry_run:
        print(script, end="")
        return 0
    if shutil.which("sbatch") is None:
        print("beamtrove: error: sbatch not found: run this on a Slurm login node (or use --dry-run).", file=sys.stderr)
        return 2
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    script_path = work_dir / f"beamtrove-flink-{args.pipeline}-{stamp}-{os.getpid()}.sbatch"
    script_path.write_text(script, encoding="utf-8")
    submitted = subprocess.run(["sbatch", "--parsable", str(script_path)], capture_output=True, text=True, check=False)
    if submitted.returncode:
        print(f"beamtrove: error: sbatch refused {script_path}: {submitted.stderr.strip()}", file=sys.stderr)
        return 1
    job_id = submitted.stdout.strip().split(";")[0]
    print(f"submitted Slurm job {job_id}")
    print(f"  script:        {script_path}")
    print(f"  log:           {work_dir / f'beamtrove-flink-{job_id}.out'}")
    print(f"  job directory: {work_dir / job_id}")
    return 0


def _node(args: argparse.Namespace) -> int:
    """One node's task: a TaskManager (and a worker pool) until a stop signal, then stops them."""
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    job_dir = pathlib.Path(args.job_dir).resolve()
    tmp = job_dir / "tmp" / host
    tmp.mkdir(parents=True, exist_ok=True)
    logs = job_dir / "log"
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    for signum in _STOP_SIGNALS:
        signal.signal(signum, on_signal)
    # srun hands the SIGUSR1 that stops the cluster to every process of the step, and a JVM dies of it on the
    # spot. The children inherit an ignored SIGUSR1 (exec keeps SIG_IGN), so only this process acts on it and
    # stops them in order.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    children: dict[str, subprocess.Popen] = {}
    try:
        if args.worker_pool_port:
            # The pool starts its SDK workers as `python`: this interpreter's, first on PATH.
            env = {
                **os.environ,
                "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            }
            with (logs / f"worker-pool-{host}.log").open("ab") as pool_log:
                children["worker pool"] = subprocess.Popen(
                    [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                     f"--service_port={args.worker_pool_port}"],
                    stdout=pool_log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )  # fmt: skip
            print(f"{host}: Beam SDK worker pool at localhost:{args.worker_pool_port}", flush=True)
        process = flink_process(
            "taskmanager", args.flink_home, job_dir / "conf", logs / f"taskmanager-{host}.log",
            properties={"io.tmp.dirs": str(tmp)},
        )  # fmt: skip
        with (logs / f"taskmanager-{host}.out").open("ab") as output:
            children["TaskManager"] = subprocess.Popen(
                process.command, env=process.env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        signal.signal(signal.SIGUSR1, on_signal)
        print(f"{host}: TaskManager started (pid {children['TaskManager'].pid})", flush=True)
        exited = None
        while not stop.wait(0.5):
            exited = next((name for name, child in children.items() if child.poll() is not None), None)
            if exited:
                print(f"{host}: the {exited} exited with status {children[exited].returncode}", flush=True)
                break
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"{host}: could not start the TaskManager: {exc}", flush=True)
        exited = "start"
    finally:
        _stop_children(children)
    if received:
        print(f"{host}: stopped on {received[0]}", flush=True)
    return 1 if exited else 0


def _stop_children(children: dict[str, subprocess.Popen]) -> None:
    """Stops the TaskManager (SIGTERM) and the worker pool (SIGINT, which ends its workers too)."""
    for name, child in children.items():
        if child.poll() is None:
            child.send_signal(signal.SIGINT if name == "worker pool" else signal.SIGTERM)
    for child in children.values():
        try:
            child.wait(timeout=_CHILD_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beamtrove slurm", description="Run pipelines on Flink inside Slurm jobs.")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser(
        "submit",
        help="sbatch one pipeline on a Flink cluster started inside the job",
        usage="beamtrove slurm submit PIPELINE --nodes N [--time T] [--partition P] [--flink-home DIR] "
        "[--job-server-jar JAR] [--dry-run] [...] -- PIPELINE OPTIONS",
        description="Writes an sbatch script that starts a standalone Flink cluster across the allocation "
        "(JobManager on the first node, one TaskManager per node), runs `beamtrove run PIPELINE` on it with the "
        "FlinkRunner, stops the cluster and exits with the pipeline's status; submits it (or prints it with "
        "--dry-run). Options after -- go to the pipeline.",
    )
    submit.add_argument("pipeline", help="the pipeline to run (as beamtrove run takes it)")
    submit.add_argument("--nodes", type=int, required=True, help="nodes; each runs one TaskManager")
    submit.add_argument("--time", help="Slurm time limit, e.g. 04:00:00")
    submit.add_argument("--partition", help="Slurm partition")
    submit.add_argument("--account", help="Slurm account")
    submit.add_argument(
        "--cpus-per-node",
        type=int,
        help="CPUs (and TaskManager slots) per node; default: whole nodes (--exclusive), slots = their CPUs",
    )
    submit.add_argument("--mem", help="memory per node, as sbatch --mem takes it")
    submit.add_argument(
        "--sbatch-option", action="append", default=[], metavar="OPTION", help="another #SBATCH option; repeatable"
    )
    submit.add_argument("--flink-home", help="Flink distribution (default: $FLINK_HOME, else the runners directory's)")
    submit.add_argument("--job-server-jar", help="Beam Flink job-server jar (default: the runners directory's)")
    submit.add_argument(
        "--work-dir",
        default="beamtrove-flink",
        help="shared directory for the job's log, config and Flink directories (default: ./beamtrove-flink)",
    )
    submit.add_argument("--rest-port", type=int, default=8081, help="JobManager REST port (default: 8081)")
    submit.add_argument("--rpc-port", type=int, default=6123, help="JobManager RPC port (default: 6123)")
    submit.add_argument(
        "--worker-pool-port", type=int, default=50000, help="port of each node's Beam SDK worker pool (default: 50000)"
    )
    submit.add_argument("--jobmanager-memory", default="1600m", help="JobManager process size (default: 1600m)")
    submit.add_argument("--taskmanager-memory", default="4g", help="TaskManager process size (default: 4g)")
    submit.add_argument(
        "--startup-timeout", type=float, default=300.0, help="seconds to wait for the TaskManagers (default: 300)"
    )
    submit.add_argument("--dry-run", action="store_true", help="print the script instead of submitting it")
    node = commands.add_parser("node", help="what each node's srun task runs: a TaskManager and a worker pool")
    node.add_argument("--flink-home", required=True)
    node.add_argument("--job-dir", required=True)
    node.add_argument("--worker-pool-port", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``beamtrove slurm``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, pipeline_argv = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = _parser().parse_args(ours)
    if args.command == "submit":
        return _submit(args, pipeline_argv)
    if pipeline_argv:
        print("beamtrove: error: beamtrove slurm node takes no options after --", file=sys.stderr)
        return 2
    return _node(args)


if __name__ == "__main__":
    sys.exit(main())
