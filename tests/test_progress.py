"""Live progress: worker processes report their totals, the board that launched the run shows them."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time

import pytest

from beamtrove.execution.run import run_pipeline
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.progress import PROGRESS_ADDRESS_VARIABLE, ProgressBoard, format_duration
from tests.conftest import require

_WORKER = """
from beamtrove.progress import count_progress, record_progress
for _ in range(120):
    count_progress("read", "out", 1)
for _ in range(30):
    count_progress("filter", "out", 1)
count_progress("extract", "errors.timeout", 2)
record_progress("read", size=6_000, files=1)
record_progress("read", size=4_000)
"""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _board(stream, interval=10.0, total_files=4, total_bytes=20_000) -> ProgressBoard:
    return ProgressBoard("fineweb", total_files, total_bytes, "read", "filter", interval=interval, stream=stream)


def _wait_for(board: ProgressBoard, files: int) -> None:
    deadline = time.monotonic() + 30
    while board.totals().files < files and time.monotonic() < deadline:
        time.sleep(0.05)


def test_worker_processes_report_to_the_board_that_launched_them():
    stream = io.StringIO()
    with _board(stream) as board:
        for _ in range(2):
            subprocess.run([sys.executable, "-c", _WORKER], check=True)
        _wait_for(board, 2)
        totals = board.totals()
        line = board.line()
    # Each process's totals are sent when a file is finished: 120 + 120 documents read, 2 files, 12 kB + the
    # second process's bytes finished with its file; what came after the last file waits for the next report.
    assert (totals.files, totals.read, totals.kept, totals.errors) == (2, 240, 60, 4)
    assert totals.bytes == 12_000
    assert line.startswith("fineweb: 2/4 inputs · 0.0/0.0 MB (60%) · 240 documents read · 60 kept (25.0%) · 4 errors")
    # The first line is shown as the run starts, before any report.
    assert stream.getvalue().splitlines()[0] == (
        "fineweb: 0/4 inputs · 0.0/0.0 MB (0%) · 0 documents read · 0 kept · 0 s elapsed"
    )


def test_inputs_listed_without_sizes_show_progress_by_inputs_done():
    # A Common Crawl paths file lists its files without their sizes: the share done and the ETA follow the inputs.
    with _board(io.StringIO(), total_bytes=0) as board:
        for _ in range(2):
            subprocess.run([sys.executable, "-c", _WORKER], check=True)
        _wait_for(board, 2)
        line = board.line(now=board._started + 20)  # 20 s after the run started
    assert line.startswith("fineweb: 2/4 inputs · 0.0 MB (50%) · 240 documents read · 60 kept (25.0%) · 4 errors")
    # 2 inputs in 20 s: the other 2 in 20 s more.
    assert line.endswith("20 s elapsed · ETA 20 s")


def test_the_board_only_counts_its_own_run():
    with _board(io.StringIO()) as board:
        host_port, _ = os.environ[PROGRESS_ADDRESS_VARIABLE].rsplit(":", 1)
        # Another run's worker reaching this board's port, and a process of no run.
        for address in (f"{host_port}:{'0' * 32}", None):
            env = {key: value for key, value in os.environ.items() if key != PROGRESS_ADDRESS_VARIABLE}
            if address:
                env[PROGRESS_ADDRESS_VARIABLE] = address
            subprocess.run([sys.executable, "-c", _WORKER], env=env, check=True)
        subprocess.run([sys.executable, "-c", _WORKER], check=True)
        _wait_for(board, 1)
        time.sleep(0.3)
        assert board.totals().files == 1


def test_the_address_is_the_runs_own_and_gone_after_it():
    before = os.environ.get(PROGRESS_ADDRESS_VARIABLE)
    with _board(io.StringIO()):
        during = os.environ[PROGRESS_ADDRESS_VARIABLE]
    assert re.fullmatch(r"127\.0\.0\.1:\d+:[0-9a-f]{32}", during)
    assert os.environ.get(PROGRESS_ADDRESS_VARIABLE) == before


def test_a_terminal_gets_one_line_rewritten_in_place_and_ended():
    terminal = _Terminal()
    with _board(terminal):
        time.sleep(1.2)
    shown = terminal.getvalue()
    assert shown.count("\r\x1b[K") >= 2
    assert shown.endswith("\n") and shown.count("\n") == 1


def test_interval_zero_shows_nothing_and_sets_no_address():
    stream = io.StringIO()
    with _board(stream, interval=0):
        assert PROGRESS_ADDRESS_VARIABLE not in os.environ
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0.4, "0 s"), (42, "42 s"), (185, "3m 05s"), (7620, "2h 07m"), (-3, "0 s")]
)
def test_durations_read_at_a_glance(seconds, shown):
    assert format_duration(seconds) == shown


def test_a_run_shows_its_inputs_and_documents_as_it_goes(data_dir, tmp_path, capsys):
    extract = pipeline_spec("extract")
    warcs = [
        str(require(data_dir / "warc" / name))
        for name in ("cc-main-2020-34_resiliparse_warcfile.warc.gz", "dolma_wget_sample-0000.warc.gz")
    ]
    argv = ["--input", *warcs[:1], "--input", warcs[1], "--output", str(tmp_path / "out")]
    result = run_pipeline(extract, parse(extract, [*argv, "--extractor", "resiliparse", "--progress_interval", "0.2"]))
    lines = capsys.readouterr().err.splitlines()
    progress = [line for line in lines if line.startswith("extract: ")]
    assert progress[0].startswith("extract: 0/2 inputs")
    read = result.stats["steps"]["read"]["counters"]["out"]
    # Both files finished before the run ended, and each process sends its totals as a file finishes.
    size = f"{sum(os.path.getsize(warc) for warc in warcs) / 1e6:.1f}"
    done = f"extract: 2/2 inputs · {size}/{size} MB (100%) · {read} documents read · {read} kept (100.0%)"
    assert progress[-1].startswith(done)


@pytest.mark.slow
def test_a_multi_process_run_shows_what_its_worker_processes_did(data_dir, tmp_path):
    warcs = data_dir / "warc"
    require(warcs / "dolma_wget_sample-0000.warc.gz")
    command = [sys.executable, "-m", "beamtrove", "run", "extract", "--input", f"{warcs}/*.warc.gz"]
    command += ["--output", str(tmp_path / "out"), "--extractor", "resiliparse", "--progress_interval", "1"]
    command += ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    run = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    progress = [line for line in run.stderr.splitlines() if line.startswith("extract: ")]
    # The table goes to stdout, progress to stderr; the last line counts every input the two processes read.
    assert progress[0].startswith("extract: 0/5 inputs") and "step" in run.stdout.splitlines()[0]
    read = next(line.split()[2] for line in run.stdout.splitlines() if line.startswith("read "))
    assert progress[-1].startswith("extract: 5/5 inputs") and f" · {read} documents read · " in progress[-1]


_LOGGING_WORKER = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from beamtrove.progress import count_progress, record_progress
for _ in range(4):
    count_progress("read", "out", 5)
    record_progress("read", size=1_000_000, files=1, interval=float(sys.argv[1]))
    time.sleep(0.3)
"""


@pytest.mark.parametrize(("interval", "lines"), [(0, 0), (0.5, 1)])
def test_a_worker_no_board_shows_logs_its_own_totals_unless_the_interval_is_zero(interval, lines):
    env = {key: value for key, value in os.environ.items() if key != PROGRESS_ADDRESS_VARIABLE}
    worker = subprocess.run(
        [sys.executable, "-c", _LOGGING_WORKER, str(interval)], env=env, capture_output=True, text=True, check=True
    )
    logged = worker.stdout.splitlines()
    # Lines come every interval from the process's start, never before the first interval is over.
    assert len(logged) >= lines if lines else logged == []
    assert all(re.fullmatch(r"process \d+: \d+ documents read from \d files, \d\.0 MB \(.*\)", line) for line in logged)
