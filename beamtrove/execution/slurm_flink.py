"""``beamtrove slurm``: one pipeline on a standalone Flink cluster that lives inside one Slurm job.

:func:`submit` writes (and sbatches) the job script; :func:`run_node` is what
the script runs on each node. The job script starts, inside its allocation:

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

import dataclasses
import datetime
import importlib.resources
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

from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions, StandardOptions

from beamtrove import __version__
from beamtrove.configuration import ConfigurationError
from beamtrove.execution.flink import flink_process, is_flink_home
from beamtrove.execution.runner_parts import (
    JOB_SERVER_MAIN_CLASS,
    beam_version,
    default_runners_dir,
    job_server_main_class,
    part_path,
    part_present,
)
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.progress import utc_timestamp

__all__ = ["CLUSTER_FAILED", "Submission", "SubmitError", "job_script", "run_node", "submit"]

#: The job's exit status when the Flink cluster did not come up (no pipeline ran).
CLUSTER_FAILED = 3
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)
_CHILD_GRACE_SECONDS = 30.0
# The job script, with {{placeholders}} that job_script fills in.
_SCRIPT_TEMPLATE = "flink_job.sbatch"


class SubmitError(ConfigurationError):
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


def _resolve_job_server_jar(job_server_jar: str | None, dry_run: bool) -> tuple[str, str | None]:
    """The job-server jar to pass Beam and a warning about it, if any.

    A dry run on a machine without the jar yet (a login node before
    ``beamtrove runners setup``) names where it is expected; the job itself
    checks that it is there before starting anything.
    """
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
        missing = (
            f"No Beam Flink job-server jar: the runners directory {default_runners_dir()} has none (expected at "
            f"{part_path('flink-job-server')}). Run `beamtrove runners setup --runner flink-job-server` (Maven must "
            f"serve beam-runners-flink-*-job-server {beam_version()}), or build it from Beam's source and pass "
            f"--job-server-jar JAR."
        )
        if not dry_run:
            raise SubmitError(missing)
        return str(part_path("flink-job-server")), f"{missing} The job refuses to start until it is there."
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
        options = parse(pipeline_spec(name), pipeline_argv)
    except ConfigurationError as exc:
        raise SubmitError(str(exc)) from exc
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
        "written": utc_timestamp(),
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
    script = importlib.resources.files(__package__).joinpath(_SCRIPT_TEMPLATE).read_text(encoding="utf-8")
    for key, value in values.items():
        script = script.replace("{{" + key + "}}", value)
    leftover = re.search(r"\{\{\w+\}\}", script)
    if leftover:
        raise AssertionError(f"unfilled job script placeholder {leftover.group(0)}")
    return script


@dataclasses.dataclass(frozen=True)
class Submission:
    """A job script, and the Slurm job it became unless it was a dry run.

    Attributes:
        script: The sbatch script.
        warnings: What the user should know before the job runs.
        work_dir: The shared directory of the job's log and directories.
        job_id: The Slurm job id; None for a dry run.
        script_path: Where the script was written; None for a dry run.
    """

    script: str
    warnings: list[str]
    work_dir: pathlib.Path
    job_id: str | None = None
    script_path: pathlib.Path | None = None


def submit(
    pipeline: str,
    pipeline_argv: list[str],
    *,
    nodes: int,
    dry_run: bool = False,
    flink_home: str | None = None,
    job_server_jar: str | None = None,
    work_dir: str | os.PathLike = "beamtrove-flink",
    cpus_per_node: int | None = None,
    worker_pool_port: int = 50000,
    **job_settings,
) -> Submission:
    """Writes the job script of ``beamtrove run PIPELINE`` on Flink and, unless ``dry_run``, sbatches it.

    Args:
        pipeline: The pipeline to run.
        pipeline_argv: Its options, without runner, Flink master or job-server jar.
        nodes: Nodes to allocate; each runs one TaskManager.
        dry_run: Only write the script (no Slurm needed, nor the job-server jar yet).
        flink_home: The Flink distribution; default ``$FLINK_HOME``, else the runners directory's.
        job_server_jar: Beam's Flink job-server jar; default the runners directory's.
        work_dir: Shared directory for the job's log and directories.
        cpus_per_node: CPUs and TaskManager slots per node; whole nodes when None.
        worker_pool_port: Port of each node's SDK worker pool, unless the
            pipeline options choose their own environment.
        **job_settings: The other arguments of :func:`job_script` (time
            limit, partition, ports, memory, ...).

    Raises:
        SubmitError: A request that cannot work, or no ``sbatch`` here.
        RuntimeError: sbatch refused the script.
    """
    if nodes < 1:
        raise SubmitError(f"--nodes must be at least 1, not {nodes}.")
    if cpus_per_node is not None and cpus_per_node < 1:
        raise SubmitError(f"--cpus-per-node must be at least 1, not {cpus_per_node}.")
    add_parallelism, worker_pools = _check_pipeline(pipeline, pipeline_argv)
    home = _resolve_flink_home(flink_home)
    jar, warning = _resolve_job_server_jar(job_server_jar, dry_run)
    warnings = [warning] if warning else []
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        warnings.append("no java here; the nodes need Java 11+ on PATH or JAVA_HOME.")
    work = pathlib.Path(work_dir).resolve()
    script = job_script(
        pipeline, pipeline_argv, nodes=nodes, flink_home=home, job_server_jar=jar, work_dir=work,
        cpus_per_node=cpus_per_node, worker_pool_port=worker_pool_port if worker_pools else 0,
        add_parallelism=add_parallelism, **job_settings,
    )  # fmt: skip
    if dry_run:
        return Submission(script, warnings, work)
    if shutil.which("sbatch") is None:
        raise SubmitError("sbatch not found: run this on a Slurm login node (or use --dry-run).")
    work.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    script_path = work / f"beamtrove-flink-{pipeline}-{stamp}-{os.getpid()}.sbatch"
    script_path.write_text(script, encoding="utf-8")
    submitted = subprocess.run(["sbatch", "--parsable", str(script_path)], capture_output=True, text=True, check=False)
    if submitted.returncode:
        raise RuntimeError(f"sbatch refused {script_path}: {submitted.stderr.strip()}")
    return Submission(script, warnings, work, submitted.stdout.strip().split(";")[0], script_path)


def run_node(flink_home: str | os.PathLike, job_dir: str | os.PathLike, worker_pool_port: int = 0) -> int:
    """One node's task (``beamtrove slurm node``): a TaskManager, and a worker pool, until a stop signal.

    Returns:
        0 when stopped by a signal, 1 when a process exited on its own or
        could not start.
    """
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    job_dir = pathlib.Path(job_dir).resolve()
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
        if worker_pool_port:
            # The pool starts its SDK workers as `python`: this interpreter's, first on PATH.
            env = {
                **os.environ,
                "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            }
            with (logs / f"worker-pool-{host}.log").open("ab") as pool_log:
                children["worker pool"] = subprocess.Popen(
                    [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                     f"--service_port={worker_pool_port}"],
                    stdout=pool_log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )  # fmt: skip
            print(f"{host}: Beam SDK worker pool at localhost:{worker_pool_port}", flush=True)
        process = flink_process(
            "taskmanager", flink_home, job_dir / "conf", logs / f"taskmanager-{host}.log",
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
