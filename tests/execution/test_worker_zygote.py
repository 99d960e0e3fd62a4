"""SDK workers forked from the zygote: the runner's environment, directory and streams, and nothing left running."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.execution import worker_zygote
from beamtrove.execution.direct_runner import pipeline_runner
from beamtrove.execution.worker_zygote import WorkerZygote, shared_zygote
from beamtrove.resources import load_once
from tests.conftest import require

_MARK = "BEAMTROVE_ZYGOTE_TEST_MARK"
_TWO_WORKERS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


def _where_it_ran(_) -> tuple[int, str | None, str]:
    return os.getppid(), os.environ.get(_MARK), os.getcwd()


def _run_where(values: int) -> beam.PTransform:
    return beam.Create(range(values)) | beam.Reshuffle() | beam.Map(_where_it_ran) | beam.Distinct()


def test_workers_are_forked_from_the_zygote_with_the_runners_environment_and_directory(monkeypatch, tmp_path):
    zygote = shared_zygote()
    # Set after the zygote started: a worker has what the runner has when it asks, not what the zygote had.
    monkeypatch.setenv(_MARK, "set later")
    monkeypatch.chdir(tmp_path)
    options = PipelineOptions(_TWO_WORKERS)
    with TestPipeline(runner=pipeline_runner(options), options=options) as pipeline:
        assert_that(pipeline | _run_where(40), equal_to([(zygote.pid, "set later", str(tmp_path))]))


@pytest.mark.slow
def test_a_killed_zygote_is_replaced_by_the_next_run():
    killed = shared_zygote()
    os.kill(killed.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while killed.usable:
        assert time.monotonic() < deadline, "the runner never learned that its zygote died"
        time.sleep(0.05)
    options = PipelineOptions(_TWO_WORKERS)
    with TestPipeline(runner=pipeline_runner(options), options=options) as pipeline:
        parents = pipeline | _run_where(10) | beam.Map(lambda where: where[0])
        assert_that(parents, equal_to([shared_zygote().pid]))
    assert shared_zygote().pid != killed.pid


class _LoaderOfShared(beam.DoFn):
    """Emits which process loaded its shared resource: the zygote when it preloaded it, else the worker itself."""

    def __init__(self, key: str, preload_fails: bool = False):
        self._key = key
        self._preload_fails = preload_fails

    def preload(self) -> None:
        if self._preload_fails:
            raise OSError("the resource cannot be read here")
        load_once(self._key, os.getpid)

    def setup(self):
        self._loaded_by = load_once(self._key, os.getpid)

    def process(self, _):
        # A worker is a child of the zygote it was forked from.
        yield self._loaded_by == os.getpid(), self._loaded_by == os.getppid()


def _loaded_where(key: str, preload_fails: bool = False) -> beam.PTransform:
    return beam.Create(range(40)) | beam.Reshuffle() | beam.ParDo(_LoaderOfShared(key, preload_fails)) | beam.Distinct()


def test_the_zygote_loads_what_dofns_share_before_it_forks_their_workers():
    options = PipelineOptions(_TWO_WORKERS)
    with TestPipeline(runner=pipeline_runner(options), options=options) as pipeline:
        # Loaded neither by the worker that runs the DoFn nor by the runner: by the zygote they were forked from.
        assert_that(pipeline | _loaded_where("preloaded"), equal_to([(False, True)]))


def test_a_resource_the_zygote_cannot_load_is_loaded_by_each_worker():
    options = PipelineOptions(_TWO_WORKERS)
    with TestPipeline(runner=pipeline_runner(options), options=options) as pipeline:
        assert_that(pipeline | _loaded_where("not preloaded", preload_fails=True), equal_to([(True, False)]))


def test_one_process_runs_leave_the_zygote_out(monkeypatch):
    monkeypatch.setattr(worker_zygote, "_shared", None)
    options = PipelineOptions([])
    with TestPipeline(runner=pipeline_runner(options), options=options) as pipeline:
        pipeline | beam.Create([1]) | beam.ParDo(_LoaderOfShared("in process"))
    assert worker_zygote._shared is None


@pytest.fixture
def zygote():
    started = WorkerZygote()
    yield started
    started.close()


def test_a_worker_writes_to_the_stderr_the_runner_has_when_it_asks(zygote, tmp_path):
    # The zygote's stderr is the one this process had when it started; the worker's is the one it has now.
    stderr = tmp_path / "stderr"
    saved = os.dup(2)
    with stderr.open("wb") as redirected:
        os.dup2(redirected.fileno(), 2)
    try:
        # No control address in the environment: Beam's harness fails at once, as a new process's would.
        pid = zygote.start_worker({"PATH": os.environ["PATH"]}, str(tmp_path))
        exit_code = zygote.wait(pid)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert exit_code == 1
    assert "KeyError: 'CONTROL_API_SERVICE_DESCRIPTOR'" in stderr.read_text()


def test_kill_ends_a_worker_that_would_wait_for_its_runner_forever(zygote, tmp_path):
    unreachable = {**os.environ, "CONTROL_API_SERVICE_DESCRIPTOR": 'url: "localhost:1"', "PIPELINE_OPTIONS": "{}"}
    pid = zygote.start_worker(unreachable, str(tmp_path))
    time.sleep(1)
    assert pathlib.Path(f"/proc/{pid}").exists()
    zygote.kill(pid)
    assert zygote.wait(pid) == -signal.SIGKILL


def test_closing_the_channel_kills_the_workers_still_running(tmp_path):
    # What a runner's death does: a worker forked as it died would otherwise wait forever to connect to it.
    zygote = WorkerZygote()
    unreachable = {**os.environ, "CONTROL_API_SERVICE_DESCRIPTOR": 'url: "localhost:1"', "PIPELINE_OPTIONS": "{}"}
    pid = zygote.start_worker(unreachable, str(tmp_path))
    zygote.close()
    deadline = time.monotonic() + 30
    while _state(pid) not in ("gone", "State:\tZ (zombie)"):
        assert time.monotonic() < deadline, "the worker outlived its zygote's runner"
        time.sleep(0.05)


def test_a_closed_zygote_exits_by_itself():
    zygote = WorkerZygote()
    # Asked for nothing: the zygote is still importing when its channel closes.
    zygote.close(timeout=120)
    assert zygote._process.returncode == 0
    assert not zygote.usable


def test_a_runner_gone_before_the_zygote_replies_leaves_no_worker_nor_traceback(tmp_path):
    # The runner asked for a worker and died (Ctrl-C as a run starts its workers). The zygote's reply then failed
    # with a broken pipe: it printed that traceback after the run's last line, and its exit waited forever for the
    # worker it had forked, which waited forever for its runner.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    command = [sys.executable, "-m", worker_zygote.__name__, str(theirs.fileno()), worker_zygote.SDK_WORKER_MODULE]
    environment = {**os.environ, _MARK: "runner gone"}
    zygote = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stderr=subprocess.PIPE, env=environment)
    theirs.close()
    unreachable = {**environment, "CONTROL_API_SERVICE_DESCRIPTOR": 'url: "localhost:1"', "PIPELINE_OPTIONS": "{}"}
    worker_zygote._send(ours, {"environment": unreachable, "cwd": str(tmp_path)}, worker_zygote._STREAMS)
    ours.close()
    _, err = zygote.communicate(timeout=60)
    assert (zygote.returncode, err.decode()) == (0, "")
    _assert_all_end("runner gone")


def _state(pid: int) -> str:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return "gone"
    return next(line for line in status.splitlines() if line.startswith("State:"))


# --- the command: its zygote and workers end with it, however it ends ---


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds ``mark``: a run's command and everything it started."""
    pids = []
    for environ in pathlib.Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"{_MARK}={mark}".encode() in environ.read_bytes().split(b"\0") and "zombie" not in _state(
                int(environ.parent.name)
            ):
                pids.append(int(environ.parent.name))
        except OSError:
            continue
    return pids


def _assert_all_end(mark: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while left := _marked(mark):
        assert time.monotonic() < deadline, f"still running {within} s after the command ended: {left}"
        time.sleep(0.1)


def _fineweb(data_dir, output, mark: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", str(require(data_dir / "warc")),
               "--output", str(output), *_TWO_WORKERS]  # fmt: skip
    environment = {**os.environ, _MARK: mark}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, start_new_session=True
    )


def _wait_for_workers(process: subprocess.Popen, mark: str) -> None:
    # The command, its zygote and two workers (and the workers' extraction processes).
    while len(_marked(mark)) < 4:
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)


def test_a_run_leaves_no_zygote_or_worker_behind(data_dir, tmp_path):
    process = _fineweb(data_dir, tmp_path / "out", "finished")
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode()[-3000:]
    _assert_all_end("finished")


@pytest.mark.slow
def test_a_run_stopped_by_ctrl_c_says_so_last_and_leaves_no_zygote_or_worker_behind(data_dir, tmp_path):
    # A terminal's Ctrl-C reaches the whole process group: the command, the zygote and the workers. Each of these
    # came from one moment of the run: a zygote whose reply to a runner that had gone failed printed its traceback
    # and then waited forever for the worker it had forked; a worker whose channels closed under it mid-bundle
    # printed their traceback. Ctrl-C lands at five moments from the one the run is built (its staging folder made):
    # on 2 idle cores, workers start 0.9 s after it and the run ends 2.5 s after it; a run that ended first is fine.
    # The zygote's hang came 0.0 s to 0.7 s after it.
    interrupted = 0
    for tenths in range(0, 17, 4):
        mark = f"ctrl-c-{tenths}"
        output = tmp_path / mark
        process = _fineweb(data_dir, output, mark)
        while not (output / ".beamtrove-staging").exists():
            assert process.poll() is None, process.communicate()
            time.sleep(0.01)
        time.sleep(tenths / 10)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
        if process.returncode != 0:
            interrupted += 1
            assert process.returncode == 130, err.decode()
            assert "Traceback" not in err.decode(), (tenths, err.decode())
            assert err.decode().strip().splitlines()[-1].startswith("beamtrove: interrupted"), (tenths, err.decode())
        _assert_all_end(mark)
    assert interrupted, "every run ended before its Ctrl-C"


@pytest.mark.slow
def test_a_killed_run_leaves_no_zygote_or_worker_behind(data_dir, tmp_path):
    process = _fineweb(data_dir, tmp_path / "out", "killed")
    _wait_for_workers(process, "killed")
    process.kill()
    process.communicate(timeout=120)
    _assert_all_end("killed")
