"""Local runners: obtaining Prism, the Flink job server and a Flink distribution, wiring them into runs."""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile

import pytest
import yaml
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PrismRunnerOptions

from beamtrove.runners import (
    FLINK_RELEASES,
    JOB_SERVER_MAIN_CLASS,
    _unpack_flink,
    beam_version,
    default_flink_minor,
    flink_process,
    job_server_main_class,
    part_path,
    part_present,
    runner_defaults,
    setup_runners,
    wait_for_taskmanagers,
    write_flink_config,
)

_OBTAINED: dict[str, pathlib.Path] = {}


def runners_command(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs ``python -m beamtrove.runners ARGS`` (what ``beamtrove runners ARGS`` runs) in a new process."""
    return subprocess.run(
        [sys.executable, "-m", "beamtrove.runners", *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip


def obtained_flink_home(tmp_path_factory) -> pathlib.Path:
    """The Flink distribution of the runners directory ($BEAMTROVE_RUNNERS), else one set up for the session.

    Setting it up downloads apache-flink-libraries from PyPI (about 300 MB): tests using it are marked network.
    """
    if part_present("flink-dist"):
        return part_path("flink-dist")
    if "flink-dist" not in _OBTAINED:
        directory = tmp_path_factory.mktemp("runners")
        result = runners_command("setup", "--runner", "flink-dist", "--dir", str(directory))
        assert result.returncode == 0, result.stdout + result.stderr
        _OBTAINED["flink-dist"] = part_path("flink-dist", directory)
    return _OBTAINED["flink-dist"]


def read_documents(directory: pathlib.Path) -> list[dict]:
    """The documents of the ``*.jsonl.gz`` files in ``directory``."""
    documents = []
    for path in sorted(directory.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            documents.extend(json.loads(line) for line in lines if line.strip())
    return documents


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def processes_mentioning(text: str) -> list[int]:
    """Pids of the live processes whose command line contains ``text``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def job_server_like_jar(path: pathlib.Path) -> pathlib.Path:
    """A minimal jar whose manifest names the Beam Flink job-server driver (setup checks no more than that)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nMain-Class: {JOB_SERVER_MAIN_CLASS}\n\n")
    return path


@pytest.fixture(scope="module")
def flink_home(tmp_path_factory) -> pathlib.Path:
    return obtained_flink_home(tmp_path_factory)


def _executable(path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_runner_defaults_point_prism_and_flink_runs_at_what_is_present(tmp_path, monkeypatch):
    runners = tmp_path / "runners"
    monkeypatch.setenv("BEAMTROVE_RUNNERS", str(runners))
    for argv in (["--runner", "PrismRunner"], ["--runner", "FlinkRunner"], [], ["--runner", "DirectRunner"]):
        assert runner_defaults(argv) == []
    prism = _executable(runners / f"prism-{beam_version()}" / "prism")
    jar = part_path("flink-job-server", runners)
    jar.parent.mkdir(parents=True)
    job_server_like_jar(jar)
    assert jar.name == f"beam-runners-flink-{default_flink_minor()}-job-server-{beam_version()}.jar"

    for spelling in ("PrismRunner", "prism", "Prism", "apache_beam.runners.portability.prism_runner.PrismRunner"):
        assert runner_defaults(["--input", "x", "--runner", spelling]) == ["--prism_location", str(prism)]
    assert runner_defaults(["--runner=PrismRunner"]) == ["--prism_location", str(prism)]
    assert runner_defaults(["--runner", "PrismRunner", "--prism_location", "/opt/prism"]) == []
    for spelling in ("FlinkRunner", "flink", "--runner=FlinkRunner"):
        argv = [spelling] if spelling.startswith("--") else ["--runner", spelling]
        assert runner_defaults(argv) == ["--flink_job_server_jar", str(jar)]
    assert runner_defaults(["--runner", "FlinkRunner", "--flink_job_server_jar", "/opt/js.jar"]) == []
    # A jar for another Flink version is not passed to a run that asks for that version.
    other = next(minor for minor in FLINK_RELEASES if minor != default_flink_minor())
    assert runner_defaults(["--runner", "FlinkRunner", "--flink_version", other]) == []
    # The DirectRunner tries Prism on its own and falls back when it cannot; it is left alone.
    assert runner_defaults([]) == []
    assert runner_defaults(["--runner", "DirectRunner"]) == []
    assert runner_defaults(["--runner", "DataflowRunner"]) == []

    argv = ["--runner", "PrismRunner"]
    assert PipelineOptions(argv + runner_defaults(argv)).view_as(PrismRunnerOptions).prism_location == str(prism)
    argv = ["--runner", "FlinkRunner"]
    assert PipelineOptions(argv + runner_defaults(argv)).view_as(FlinkRunnerOptions).flink_job_server_jar == str(jar)
    # An explicit directory wins over the environment.
    assert runner_defaults(["--runner", "PrismRunner"], tmp_path / "elsewhere") == []


def test_write_flink_config_writes_yaml_flink_reads(tmp_path):
    path = write_flink_config(
        tmp_path / "conf", jobmanager="node-01", rest_port=18081, rpc_port=16123, slots=8, parallelism=32,
        tmp_dir=tmp_path / "t", taskmanager_memory="4g", extra={"heartbeat.timeout": 120000},
    )  # fmt: skip
    settings = yaml.safe_load(path.read_text())
    assert settings["jobmanager.rpc.address"] == settings["rest.address"] == "node-01"
    assert (settings["rest.port"], settings["jobmanager.rpc.port"]) == (18081, 16123)
    assert (settings["taskmanager.numberOfTaskSlots"], settings["parallelism.default"]) == (8, 32)
    assert settings["io.tmp.dirs"] == str(tmp_path / "t")
    assert settings["taskmanager.memory.process.size"] == "4g"
    assert settings["heartbeat.timeout"] == 120000
    assert "${sys:log.file}" in (tmp_path / "conf" / "log4j.properties").read_text()
    # A host name YAML would otherwise read as a number or a boolean stays a string.
    assert yaml.safe_load(write_flink_config(tmp_path / "c2", jobmanager="on").read_text())["rest.address"] == "on"


def test_setup_refuses_unknown_parts_and_versions(tmp_path):
    with pytest.raises(ValueError, match="Unknown runner part"):
        setup_runners(["spark"], tmp_path)
    with pytest.raises(ValueError, match="Unknown Flink version"):
        setup_runners(["flink-dist"], tmp_path, flink_minor="1.8")
    result = runners_command("setup", "--runner", "prism", "--job-server-jar", "x.jar", "--dir", str(tmp_path))
    assert result.returncode == 2 and "--job-server-jar needs --runner flink" in result.stderr


def test_a_missing_go_or_maven_is_reported_with_what_to_install(tmp_path):
    # PATH holds this Python and nothing else: no go, no mvn.
    env = {**os.environ, "PATH": str(pathlib.Path(sys.executable).parent)}
    assert shutil.which("go", path=env["PATH"]) is None and shutil.which("mvn", path=env["PATH"]) is None
    result = runners_command(
        "setup", "--runner", "prism", "--runner", "flink-job-server", "--dir", str(tmp_path), env=env, timeout=120
    )
    assert result.returncode == 1
    assert re.search(r"^prism\s+failed\s+go not found", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^flink-job-server\s+failed\s+mvn not found", result.stdout, re.MULTILINE)
    assert "what to do: install Go (https://go.dev/dl) and put go on PATH" in result.stderr
    assert "what to do: install Maven and put mvn on PATH; or build the jar from Beam's source tree" in result.stderr
    parts = json.loads((tmp_path / "runners.json").read_text())["parts"]
    assert parts["prism"]["status"] == parts["flink-job-server"]["status"] == "failed"
    assert parts["prism"]["command"] == [
        "go",
        "install",
        f"github.com/apache/beam/sdks/v2/go/cmd/prism@v{beam_version()}",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".setup.lock", "runners.json"]


def test_unpacking_takes_only_the_distribution_and_nothing_outside_it(tmp_path):
    sdist = tmp_path / "apache_flink_libraries-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, data in {
            "apache_flink_libraries-9.9.9/setup.py": b"print('not taken')",
            "apache_flink_libraries-9.9.9/NOTICE": b"notice",
            "apache_flink_libraries-9.9.9/deps/lib/flink-dist-9.9.9.jar": b"PK",
            "apache_flink_libraries-9.9.9/deps/bin/bash-java-utils.jar": b"PK",
        }.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    home = tmp_path / "home"
    home.mkdir()
    _unpack_flink(sdist, home)
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == [
        "NOTICE", "bin/bash-java-utils.jar", "lib/flink-dist-9.9.9.jar",
    ]  # fmt: skip

    escaping = tmp_path / "apache_flink_libraries-6.6.6.tar.gz"
    with tarfile.open(escaping, "w:gz") as archive:
        member = tarfile.TarInfo("apache_flink_libraries-6.6.6/deps/../../../escaped.txt")
        member.size = 1
        archive.addfile(member, io.BytesIO(b"x"))
    target = tmp_path / "home2"
    target.mkdir()
    with pytest.raises(tarfile.TarError):
        _unpack_flink(escaping, target)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()


@pytest.mark.network
def test_job_server_setup_gets_the_jar_or_records_what_maven_said(tmp_path):
    minor = default_flink_minor()
    coordinates = f"org.apache.beam:beam-runners-flink-{minor}-job-server:{beam_version()}"
    jar = part_path("flink-job-server", tmp_path)
    result = runners_command("setup", "--runner", "flink-job-server", "--dir", str(tmp_path), timeout=600)
    record = json.loads((tmp_path / "runners.json").read_text())["parts"]["flink-job-server"]
    if result.returncode == 0:
        # Maven serves the jar: it is there, it is Beam's job server, and runs are pointed at it.
        assert jar.is_file() and job_server_main_class(jar) == JOB_SERVER_MAIN_CLASS
        assert record["status"] == "present" and record["path"] == str(jar) and record["coordinates"] == coordinates
        assert runner_defaults(["--runner", "FlinkRunner"], tmp_path) == ["--flink_job_server_jar", str(jar)]
        return
    # What this machine's Maven does: no Beam Flink job-server artifact is served.
    assert result.returncode == 1, result.stderr
    assert re.search(r"^flink-job-server\s+failed\s+Maven could not provide", result.stdout, re.MULTILINE)
    assert "beamtrove: error: flink-job-server could not be obtained" in result.stderr
    assert "tried: mvn -B -ntp -U org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy" in result.stderr
    assert f"-Dartifact={coordinates}:jar" in result.stderr
    assert f"./gradlew :runners:flink:{minor}:job-server:shadowJar" in result.stderr
    assert "--job-server-jar JAR" in result.stderr and "--flink_job_server_jar JAR" in result.stderr
    assert record["status"] == "failed" and record["coordinates"] == coordinates
    assert record["command"][0] == "mvn" and f"-Dartifact={coordinates}:jar" in record["command"]
    assert coordinates in record["error"]
    assert not jar.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".flink-job-server")]
    listing = runners_command("path", "--dir", str(tmp_path))
    assert re.search(r"^flink-job-server\s+failed\s", listing.stdout, re.MULTILINE)
    assert "last attempt: Maven could not provide" in listing.stdout
    assert runner_defaults(["--runner", "FlinkRunner"], tmp_path) == []


@pytest.mark.network
def test_a_job_server_jar_built_elsewhere_is_registered_and_anything_else_refused(tmp_path, flink_home):
    runners = tmp_path / "runners"
    # Flink's own Python jar is a real jar, but not Beam's job server.
    not_a_job_server = next((flink_home / "opt").glob("flink-python-*.jar"))
    refused = runners_command("setup", "--runner", "flink-job-server", "--job-server-jar", str(not_a_job_server),
                              "--dir", str(runners))  # fmt: skip
    assert refused.returncode == 1
    assert f"{not_a_job_server} is not a Beam Flink job-server jar: it has Main-Class none" in refused.stderr
    assert json.loads((runners / "runners.json").read_text())["parts"]["flink-job-server"]["status"] == "failed"

    built = job_server_like_jar(tmp_path / "beam-runners-flink-job-server-local.jar")
    registered = runners_command(
        "setup", "--runner", "flink-job-server", "--job-server-jar", str(built), "--dir", str(runners)
    )
    assert registered.returncode == 0, registered.stderr
    jar = part_path("flink-job-server", runners)
    assert jar.read_bytes() == built.read_bytes()
    record = json.loads((runners / "runners.json").read_text())["parts"]["flink-job-server"]
    assert record["status"] == "present" and record["source"] == f"local file {built}"
    assert record["main_class"] == JOB_SERVER_MAIN_CLASS and len(record["sha256"]) == 64
    assert runner_defaults(["--runner", "FlinkRunner"], runners) == ["--flink_job_server_jar", str(jar)]
    again = runners_command("setup", "--runner", "flink-job-server", "--dir", str(runners))
    assert again.returncode == 0 and re.search(r"^flink-job-server\s+reused\s", again.stdout, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.network
def test_prism_setup_then_a_pipeline_runs_on_it(tmp_path, movie_reviews):
    runners = tmp_path / "runners"
    prism = part_path("prism", runners)
    reused = part_present("prism")
    if reused:
        # $BEAMTROVE_RUNNERS holds one already: setup must check and reuse it rather than build it again.
        prism.parent.mkdir(parents=True)
        shutil.copy2(part_path("prism"), prism)
    first = runners_command("setup", "--runner", "prism", "--dir", str(runners))
    assert first.returncode == 0, first.stderr
    status = "reused" if reused else "obtained"
    assert re.search(rf"^prism\s+{status}\s+{re.escape(str(prism))}$", first.stdout, re.MULTILINE), first.stdout
    record = json.loads((runners / "runners.json").read_text())["parts"]["prism"]
    assert record["status"] == "present" and record["path"] == str(prism)
    if shutil.which("go"):
        built = subprocess.run(["go", "version", "-m", str(prism)], capture_output=True, text=True, check=True)
        assert re.search(rf"^\s+mod\s+github.com/apache/beam/sdks/v2\s+v{re.escape(beam_version())}\s", built.stdout,
                         re.MULTILINE)  # fmt: skip
    mtime = prism.stat().st_mtime_ns
    second = runners_command("setup", "--runner", "prism", "--dir", str(runners))
    assert second.returncode == 0 and re.search(r"^prism\s+reused\s", second.stdout, re.MULTILINE)
    assert prism.stat().st_mtime_ns == mtime

    reviews = tmp_path / "reviews.jsonl"
    texts = list(movie_reviews.items())[:40]
    reviews.write_text("".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in texts))
    output = tmp_path / "out"
    argv = ["--input", str(reviews), "--output", str(output), "--runner", "PrismRunner", "--environment_type",
            "LOOPBACK"]  # fmt: skip
    extra = runner_defaults(argv, runners)
    assert extra == ["--prism_location", str(prism)]
    run = subprocess.run([sys.executable, "-m", "beamtrove", "run", "convert", *argv, *extra],
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    documents = read_documents(output)
    assert sorted(document["id"] for document in documents) == sorted(name for name, _ in texts)
    stats = json.loads((output / "stats.json").read_text())
    assert stats["runner"] == "PrismRunner" and stats["state"] == "DONE"


@pytest.mark.slow
@pytest.mark.network
def test_the_flink_distribution_runs_a_standalone_cluster(tmp_path, flink_home):
    conf = tmp_path / "conf"
    rest = free_port()
    write_flink_config(
        conf, rest_port=rest, rpc_port=free_port(), slots=2, tmp_dir=tmp_path / "tmp",
        jobmanager_memory="1g", taskmanager_memory="1g",
    )  # fmt: skip
    (tmp_path / "tmp").mkdir()
    # Flink's BashJavaUtils sizes the TaskManager from the configuration.
    taskmanager = flink_process("taskmanager", flink_home, conf, tmp_path / "tm.log")
    assert any(flag.startswith("-Xmx") for flag in taskmanager.command)
    assert "taskmanager.memory.managed.size" in " ".join(taskmanager.command)
    assert "org.apache.flink.runtime.taskexecutor.TaskManagerRunner" in taskmanager.command
    assert taskmanager.env["FLINK_PLUGINS_DIR"] == str(flink_home.resolve() / "plugins")

    processes: dict[str, subprocess.Popen] = {}
    try:
        for role in ("jobmanager", "taskmanager"):
            processes[role] = subprocess.Popen(
                [sys.executable, "-m", "beamtrove.runners", "flink", role, "--flink-home", str(flink_home),
                 "--conf-dir", str(conf), "--log-file", str(tmp_path / f"{role}.log")],
                stdout=(tmp_path / f"{role}.out").open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
        managers = wait_for_taskmanagers(
            f"http://localhost:{rest}", 1, timeout=300, watch_pids=[process.pid for process in processes.values()]
        )
        assert len(managers) == 1 and managers[0]["slotsNumber"] == 2
        with urllib.request.urlopen(f"http://localhost:{rest}/overview", timeout=10) as response:
            overview = json.load(response)
        assert (overview["taskmanagers"], overview["slots-total"]) == (1, 2)
        assert overview["flink-version"] == flink_home.name.removeprefix("flink-")
        # `beamtrove runners flink ROLE` became the JVM: the pid started is the one to signal.
        for role, process in processes.items():
            command = pathlib.Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
            assert pathlib.Path(command[0].decode()).name == "java", role
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    # Both JVMs shut down on SIGTERM (Flink logs it), and nothing of the cluster is left running.
    assert all(process.returncode is not None for process in processes.values())
    assert "RECEIVED SIGNAL 15: SIGTERM" in (tmp_path / "taskmanager.log").read_text()
    assert "RECEIVED SIGNAL 15: SIGTERM" in (tmp_path / "jobmanager.log").read_text()
    deadline = time.monotonic() + 10
    while processes_mentioning(str(conf)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(conf)) == []
