"""Helpers of the runner tests: the runners command, a Flink distribution, ports, processes, a stand-in jar."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pathlib
import socket
import subprocess
import sys
import zipfile

import pytest
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PipelineOptions, PrismRunnerOptions
from apache_beam.runners.portability import prism_runner

from beamtrove.execution.runner_parts import JOB_SERVER_MAIN_CLASS, part_path, part_present, use_local_runner_parts
from tests.conftest import beamtrove_here

_OBTAINED: dict[str, pathlib.Path] = {}


@pytest.fixture
def prism_tries(monkeypatch) -> list[str]:
    """Each time Beam tries to run a pipeline on Prism; the try fails as a download fails offline."""
    tries = []

    def run_on_prism(self, pipeline, options):
        tries.append("prism")
        raise RuntimeError("Unable to fetch remote prism binary")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", run_on_prism)
    return tries


def runners_command(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs ``beamtrove runners ARGS``: in this process, or with ``env`` (and ``timeout``) in a new one."""
    if env is None:
        return beamtrove_here("runners", *args)
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", "runners", *args],
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


def children_of(pid: int) -> list[int]:
    """Pids of the child processes of ``pid`` (none once it has ended)."""
    found = []
    with contextlib.suppress(OSError):
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def running(pids: list[int]) -> list[int]:
    """Those of ``pids`` whose processes still run (a zombie, dead but not yet waited for, does not)."""
    alive = []
    for pid in pids:
        with contextlib.suppress(OSError):
            # The state follows the command name, which is in parentheses and may hold spaces.
            if pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
                alive.append(pid)
    return alive


def shared_bytes(pid: int) -> int:
    """The bytes of memory process ``pid`` shares with others (the kernel's ``Shared_Clean`` + ``Shared_Dirty``)."""
    fields = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return sum(int(fields[name].split()[0]) << 10 for name in ("Shared_Clean", "Shared_Dirty"))


def job_server_like_jar(path: pathlib.Path) -> pathlib.Path:
    """A minimal jar whose manifest names the Beam Flink job-server driver (setup checks no more than that)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nMain-Class: {JOB_SERVER_MAIN_CLASS}\n\n")
    return path


def local_parts(argv: list[str], runners_dir: pathlib.Path | None = None) -> dict[str, str]:
    """The runner part options ``use_local_runner_parts`` sets on a run with ``argv``."""
    options = PipelineOptions(argv)
    views = {"prism_location": PrismRunnerOptions, "flink_job_server_jar": FlinkRunnerOptions}
    before = {name: getattr(options.view_as(view), name) for name, view in views.items()}
    use_local_runner_parts(options, runners_dir)
    after = {name: getattr(options.view_as(view), name) for name, view in views.items()}
    return {name: value for name, value in after.items() if value != before[name]}


@pytest.fixture(scope="module")
def flink_home(tmp_path_factory) -> pathlib.Path:
    return obtained_flink_home(tmp_path_factory)
