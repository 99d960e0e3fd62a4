"""``beamtrove slurm submit``: the job script, the refusals, and a Flink cluster inside a real Slurm job."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import time

import pytest

from beamtrove.cli import main
from beamtrove.execution.runner_parts import JOB_SERVER_MAIN_CLASS, job_server_main_class, part_path, part_present
from beamtrove.execution.slurm_flink import CLUSTER_FAILED, job_script
from tests.conftest import slurm_job_finished, wait_for
from tests.execution.conftest import free_port, job_server_like_jar, processes_mentioning, read_documents


@pytest.fixture
def no_runners(tmp_path, monkeypatch) -> pathlib.Path:
    """An empty runners directory and no $FLINK_HOME: nothing is found unless the test passes it."""
    runners = tmp_path / "runners"
    monkeypatch.setenv("BEAMTROVE_RUNNERS", str(runners))
    monkeypatch.delenv("FLINK_HOME", raising=False)
    return runners


def _script(**overrides) -> str:
    settings = {
        "nodes": 4, "flink_home": "/opt/flink-2.2.1", "job_server_jar": "/opt/js.jar", "work_dir": "/shared/jobs",
        "chdir": "/shared/work", "python": "/venv/bin/python",
    }  # fmt: skip
    settings.update(overrides)
    return job_script(
        "fineweb", ["--input", "/data/crawl dir/*.warc.gz", "--output", "out", "--limit", "5"], **settings
    )


def _bash_array(script: str, name: str) -> list[str]:
    """What bash makes of the script's ``NAME=(...)`` line."""
    line = next(line for line in script.splitlines() if line.startswith(f"{name}=("))
    shown = subprocess.run(["bash", "-c", f'{line}\nprintf "%s\\n" "${{{name}[@]}}"'], capture_output=True,
                           text=True, check=True)  # fmt: skip
    return shown.stdout.splitlines()


def test_the_job_script_starts_flink_across_the_allocation_and_runs_the_pipeline_on_it():
    script = _script(time_limit="02:00:00", partition="cpu", account="proj", mem="64G", sbatch_options=["--qos=hi"])
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    header = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert header == [
        "#SBATCH --job-name=beamtrove-fineweb",
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --time=02:00:00",
        "#SBATCH --partition=cpu",
        "#SBATCH --account=proj",
        "#SBATCH --mem=64G",
        "#SBATCH --exclusive",
        "#SBATCH --qos=hi",
        "#SBATCH --chdir=/shared/work",
        "#SBATCH --output=/shared/jobs/beamtrove-flink-%j.out",
    ]
    # The JobManager: first node of the allocation, a config generated in the job's directory.
    assert 'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in script
    assert "JOBMANAGER=${NODES[0]}" in script
    assert "JOB_DIR=/shared/jobs/$SLURM_JOB_ID" in script
    assert re.search(r'runners flink config --conf-dir "\$JOB_DIR/conf" --jobmanager "\$JOBMANAGER"', script)
    assert '--slots "$SLOTS"' in script and "SLOTS=${SLURM_CPUS_ON_NODE:-1}" in script
    assert '--tmp-dir "$JOB_DIR/tmp"' in script
    assert re.search(r'^"\$PYTHON" -m beamtrove runners flink jobmanager --flink-home "\$FLINK_HOME"', script, re.M)
    # One TaskManager per node, then a wait on the REST API for all of them.
    assert re.search(r'^srun --nodes="\$\{#NODES\[@\]\}" --ntasks="\$\{#NODES\[@\]\}" --ntasks-per-node=1', script,
                     re.M)  # fmt: skip
    assert '-m beamtrove slurm node --flink-home "$FLINK_HOME"' in script
    assert 'runners flink wait --rest "$REST" --taskmanagers "${#NODES[@]}"' in script
    assert "REST=http://$JOBMANAGER:$REST_PORT" in script and "REST_PORT=8081" in script
    # The pipeline on the FlinkRunner, with the worker pools as its SDK environment and the cluster's slots.
    assert re.search(
        r'"\$PYTHON" -m beamtrove "\$\{PIPELINE\[@\]\}" --runner FlinkRunner --flink_master "\$JOBMANAGER:\$REST_PORT"'
        r' \\\n  --flink_job_server_jar "\$JOB_SERVER_JAR" "\$\{EXTRA\[@\]\}"',
        script,
    )
    assert 'EXTRA+=(--environment_type EXTERNAL --environment_config "localhost:$WORKER_POOL_PORT")' in script
    assert "WORKER_POOL_PORT=50000" in script and "ADD_PARALLELISM=1" in script
    assert _bash_array(script, "PIPELINE") == [
        "run", "fineweb", "--input", "/data/crawl dir/*.warc.gz", "--output", "out", "--limit", "5",
    ]  # fmt: skip
    # Stopping: on exit and on signals, TaskManagers (srun passes SIGUSR1 on) then the JobManager.
    assert "trap cleanup EXIT" in script and "trap 'log \"received a stop signal\"; exit 143' TERM INT HUP" in script
    assert 'stop "$TASKMANAGERS_PID" USR1:60 TERM:40 KILL:5' in script
    assert 'stop "$JOBMANAGER_PID" TERM:30 KILL:5' in script
    assert 'echo "$status" > "$JOB_DIR/exit_status"' in script
    assert f"exit {CLUSTER_FAILED}" in script and 'exit "$STATUS"' in script
    assert "PYTHON=/venv/bin/python" in script and "FLINK_HOME=/opt/flink-2.2.1" in script


def test_the_job_stops_before_starting_anything_when_the_job_server_jar_is_missing(tmp_path):
    jar = tmp_path / "runners" / "beam-runners-flink-2.2-job-server.jar"
    script = _script(job_server_jar=str(jar), work_dir=str(tmp_path / "jobs"), python=sys.executable)
    fake_slurm = tmp_path / "bin"
    fake_slurm.mkdir()
    (fake_slurm / "scontrol").write_text("#!/bin/sh\necho node-01\n")
    (fake_slurm / "scontrol").chmod(0o755)
    env = {"PATH": f"{fake_slurm}:/usr/bin:/bin", "SLURM_JOB_ID": "41", "SLURM_JOB_NODELIST": "node-01"}
    job = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert job.returncode == CLUSTER_FAILED, job.stdout + job.stderr
    assert f"no Beam Flink job-server jar at {jar}" in job.stdout
    assert (tmp_path / "jobs" / "41" / "exit_status").read_text().strip() == str(CLUSTER_FAILED)
    assert not (tmp_path / "jobs" / "41" / "conf").exists(), "the Flink cluster was configured before the check"


def test_the_job_script_follows_the_resources_and_options_asked_for():
    script = _script(cpus_per_node=16, worker_pool_port=0, add_parallelism=False, rest_port=18081,
                     taskmanager_memory="24g", work_dir="/shared/my jobs")  # fmt: skip
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    assert "#SBATCH --cpus-per-task=16" in script and "--exclusive" not in script
    assert "WORKER_POOL_PORT=0" in script and "ADD_PARALLELISM=0" in script and "REST_PORT=18081" in script
    assert "TASKMANAGER_MEMORY=24g" in script
    assert "JOB_DIR='/shared/my jobs'/$SLURM_JOB_ID" in script
    assert "#SBATCH --output=/shared/my jobs/beamtrove-flink-%j.out" in script
    with pytest.raises(ValueError, match="--nodes must be at least 1, not 0"):
        _script(nodes=0)


def test_submit_refuses_bad_requests_before_anything_runs(no_runners, tmp_path, capsys):
    def refused(*argv: str) -> str:
        assert main(["slurm", "submit", *argv]) == 2
        output = capsys.readouterr()
        assert output.out == ""
        return output.err

    assert "--nodes must be at least 1, not 0" in refused("convert", "--nodes", "0", "--dry-run")
    assert "--cpus-per-node must be at least 1" in refused("convert", "--nodes", "1", "--cpus-per-node", "0")
    assert "Unknown pipeline 'nosuchpipeline'; available: convert" in refused(
        "nosuchpipeline", "--nodes", "1", "--", "--input", "x"
    )
    assert "unknown options --no_such_option" in refused("convert", "--nodes", "1", "--", "--no_such_option")
    message = refused("convert", "--nodes", "1", "--", "--runner", "DirectRunner", "--flink_master", "h:1")
    assert "--runner, --flink_master among the pipeline options" in message
    message = refused("convert", "--nodes", "2", "--dry-run", "--", "--input", "x")
    assert f"No Flink distribution at the runners directory ({part_path('flink-dist', no_runners)})" in message
    assert "Run `beamtrove runners setup --runner flink-dist` or pass --flink-home DIR." in message
    (tmp_path / "empty").mkdir()
    message = refused("convert", "--nodes", "2", "--flink-home", str(tmp_path / "empty"))
    assert f"No Flink distribution at {tmp_path / 'empty'} (from --flink-home)" in message


@pytest.mark.network
def test_submit_needs_the_job_server_jar_but_a_dry_run_names_where_it_goes(no_runners, flink_home, tmp_path, capsys,
                                                                         monkeypatch):  # fmt: skip
    monkeypatch.setenv("FLINK_HOME", str(flink_home))
    expected = part_path("flink-job-server", no_runners)
    assert main(["slurm", "submit", "convert", "--nodes", "2", "--", "--input", "x"]) == 2
    message = capsys.readouterr().err
    assert (
        f"No Beam Flink job-server jar: the runners directory {no_runners} has none (expected at {expected})" in message
    )
    assert "Run `beamtrove runners setup --runner flink-job-server`" in message and "--job-server-jar JAR" in message
    missing = tmp_path / "missing.jar"
    argv = ["slurm", "submit", "convert", "--nodes", "2", "--job-server-jar", str(missing), "--", "--input", "x"]
    assert main(argv) == 2
    assert f"No job-server jar at {missing} (--job-server-jar)" in capsys.readouterr().err
    # A login node without the jar yet: the dry run prints the script, which names where the jar is expected.
    assert main(["slurm", "submit", "convert", "--nodes", "2", "--dry-run", "--", "--input", "x"]) == 0
    output = capsys.readouterr()
    assert f"JOB_SERVER_JAR={expected}" in output.out and "#SBATCH --nodes=2" in output.out
    assert f"beamtrove: warning: No Beam Flink job-server jar: the runners directory {no_runners}" in output.err
    assert "The job refuses to start until it is there." in output.err

    argv = ["slurm", "submit", "convert", "--nodes", "3", "--time", "1:00:00", "--work-dir", str(tmp_path / "jobs"),
            "--dry-run"]  # fmt: skip
    # A real jar that is not Beam's job server passes with a warning; a jar naming the driver without one.
    python_jar = next((flink_home / "opt").glob("flink-python-*.jar"))
    assert main([*argv, "--job-server-jar", str(python_jar), "--", "--input", "in", "--environment_type", "LOOPBACK",
                 "--parallelism", "4"]) == 0  # fmt: skip
    output = capsys.readouterr()
    assert f"{python_jar} does not look like a Beam Flink job-server jar" in output.err
    assert "#SBATCH --nodes=3" in output.out and "#SBATCH --time=1:00:00" in output.out
    assert f"FLINK_HOME={flink_home.resolve()}" in output.out and f"JOB_SERVER_JAR={python_jar}" in output.out
    assert f"#SBATCH --output={tmp_path / 'jobs'}/beamtrove-flink-%j.out" in output.out
    # The pipeline options chose their SDK environment and parallelism: no worker pools, no --parallelism.
    assert "WORKER_POOL_PORT=0" in output.out and "ADD_PARALLELISM=0" in output.out
    assert not (tmp_path / "jobs").exists()
    jar = job_server_like_jar(tmp_path / "job-server.jar")
    assert main([*argv, "--job-server-jar", str(jar), "--", "--input", "in"]) == 0
    output = capsys.readouterr()
    assert output.err == "" and "WORKER_POOL_PORT=50000" in output.out and "ADD_PARALLELISM=1" in output.out


def _submit(tmp_path: pathlib.Path, flink_home: pathlib.Path, jar: pathlib.Path, *pipeline: str) -> tuple[str, dict]:
    ports = {"rest": free_port(), "rpc": free_port(), "pool": free_port()}
    submitted = subprocess.run(
        [sys.executable, "-m", "beamtrove", "slurm", "submit", "convert", "--nodes", "1", "--cpus-per-node", "1",
         "--time", "00:15:00", "--flink-home", str(flink_home), "--job-server-jar", str(jar),
         "--jobmanager-memory", "1g", "--taskmanager-memory", "1g", "--rest-port", str(ports["rest"]),
         "--rpc-port", str(ports["rpc"]), "--worker-pool-port", str(ports["pool"]), "--startup-timeout", "240",
         "--work-dir", "jobs", "--", *pipeline],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = re.search(r"^submitted Slurm job (\d+)$", submitted.stdout, re.MULTILINE).group(1)
    assert f"log:           {tmp_path / 'jobs' / f'beamtrove-flink-{job_id}.out'}" in submitted.stdout
    return job_id, {**ports, "stderr": submitted.stderr}


def _slurm_exit_code(job_id: str) -> str | None:
    """``ExitCode`` of a finished job from ``scontrol show job`` (sacct needs accounting, which is off here)."""
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False)
    match = re.search(r"\bExitCode=(\d+):\d+", shown.stdout)
    return match.group(1) if match else None


def _nothing_left(job_dir: pathlib.Path, pool_port: int) -> None:
    """No JobManager, TaskManager, node task or worker pool of the job is still running."""
    leftovers = lambda: processes_mentioning(str(job_dir)) + processes_mentioning(f"--service_port={pool_port}")  # noqa: E731
    deadline = time.monotonic() + 20
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert leftovers() == []
    java = subprocess.run(["pgrep", "-a", "java"], capture_output=True, text=True, check=False).stdout
    assert str(job_dir) not in java


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.network
def test_a_slurm_job_brings_flink_up_runs_the_pipeline_and_takes_its_exit_status(slurm, flink_home, tmp_path,
                                                                                movie_reviews):  # fmt: skip
    reviews = tmp_path / "reviews.jsonl"
    texts = list(movie_reviews.items())[:30]
    reviews.write_text("".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in texts))
    served = part_present("flink-job-server")
    # Maven serves no Beam Flink job server here, so unless one was registered the job gets a real jar that is
    # not one (Flink's Python jar): the cluster comes up, the pipeline step runs and fails to start Beam's job
    # server, and that failure must become the job's exit status.
    jar = part_path("flink-job-server") if served else next((flink_home / "opt").glob("flink-python-*.jar"))
    assert (job_server_main_class(jar) == JOB_SERVER_MAIN_CLASS) is served
    job_id, ports = _submit(tmp_path, flink_home, jar, "--input", "reviews.jsonl", "--output", "out")
    wait_for(lambda: slurm_job_finished(job_id), timeout=600, what=f"Slurm job {job_id}")
    log = (tmp_path / "jobs" / f"beamtrove-flink-{job_id}.out").read_text()
    job_dir = tmp_path / "jobs" / job_id

    assert f"job {job_id}: 1 node(s)" in log, log
    assert re.search(r"^0: \S+: TaskManager started \(pid \d+\)$", log, re.MULTILINE), log
    assert re.search(r"^0: \S+: Beam SDK worker pool at localhost:" + str(ports["pool"]) + "$", log, re.MULTILINE)
    assert "1 TaskManager(s) registered at http://" in log
    assert re.search(r"Flink cluster up: 1 TaskManager\(s\) registered with 1 slot\(s\) in total", log), log
    taskmanager_log = next((job_dir / "log").glob("taskmanager-*.log")).read_text()
    assert "Successful registration at resource manager" in taskmanager_log
    running = r"running: beamtrove run convert --input reviews.jsonl --output out --runner FlinkRunner --flink_master "
    assert re.search(running + r"\S+:" + str(ports["rest"]) + f" --flink_job_server_jar {re.escape(str(jar))}", log)
    assert f"--environment_type EXTERNAL --environment_config localhost:{ports['pool']}" in log
    status = int(re.search(r"pipeline exited with status (\d+)", log).group(1))
    if served:
        assert status == 0, log[-5000:]
        documents = read_documents(tmp_path / "out")
        assert sorted(document["id"] for document in documents) == sorted(name for name, _ in texts)
    else:
        assert "does not look like a Beam Flink job-server jar" in ports["stderr"]
        assert status == 1, log[-5000:]
        assert "Really starting service at localhost" in log and f"'java', '-jar', '{jar}'" in log
        assert "RuntimeError: Service failed to start up with error 1" in log
    # The cluster is stopped in order, and the pipeline's status is the job's.
    assert re.search(r"^0: \S+: stopped on SIGUSR1$", log, re.MULTILINE), log
    assert log.index("stopping the TaskManagers") < log.index("stopping the JobManager")
    assert f"Flink cluster stopped; job exit status {status}" in log
    assert (job_dir / "exit_status").read_text().strip() == str(status)
    slurm_code = _slurm_exit_code(job_id)
    if slurm_code is not None:  # scontrol forgets jobs MinJobAge (300 s) after they end
        assert int(slurm_code) == status
    for name in ("jobmanager", "taskmanager"):
        flink_log = next((job_dir / "log").glob(f"{name}-*.log")).read_text()
        assert "RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested." in flink_log, name
    _nothing_left(job_dir, ports["pool"])


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.network
def test_scancel_stops_the_flink_cluster_of_a_job(slurm, flink_home, tmp_path):
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "one document"}\n')
    jar = next((flink_home / "opt").glob("flink-python-*.jar"))
    job_id, ports = _submit(tmp_path, flink_home, jar, "--input", "in.jsonl", "--output", "out")
    log_path = tmp_path / "jobs" / f"beamtrove-flink-{job_id}.out"
    wait_for(lambda: log_path.is_file() and "TaskManager started" in log_path.read_text(), timeout=300,
             what="the TaskManager to start")  # fmt: skip
    subprocess.run(["scancel", job_id], check=True)
    wait_for(lambda: slurm_job_finished(job_id), timeout=300, what=f"Slurm job {job_id} to end")
    log = log_path.read_text()
    assert "received a stop signal" in log, log
    assert "Flink cluster stopped; job exit status 143" in log, log
    assert "pipeline exited with status" not in log
    job_dir = tmp_path / "jobs" / job_id
    assert (job_dir / "exit_status").read_text().strip() == "143"
    _nothing_left(job_dir, ports["pool"])
