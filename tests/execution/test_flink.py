"""A standalone Flink cluster from the distribution: its configuration and processes."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from beamtrove.execution.flink import flink_process, parse_properties, wait_for_taskmanagers, write_flink_config
from tests.execution.conftest import free_port, processes_mentioning


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


def test_properties_are_key_value_pairs():
    assert parse_properties(["io.tmp.dirs=/scratch/a=b", "empty="]) == {"io.tmp.dirs": "/scratch/a=b", "empty": ""}
    assert parse_properties(None) == {}
    for bad in ("no-equals", "=value"):
        with pytest.raises(ValueError, match="-D takes key=value"):
            parse_properties([bad])


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
                [sys.executable, "-m", "beamtrove", "runners", "flink", role, "--flink-home", str(flink_home),
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
