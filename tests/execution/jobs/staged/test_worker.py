"""Staged workers trust nothing they did not check: damaged files and records are redone, changed inputs refused,
and a stop signal frees the task at once."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
from collections.abc import Callable

import pytest

from beamtrove.cli import main
from beamtrove.execution.jobs import JobDir
from beamtrove.execution.jobs.worker import run_worker
from tests.conftest import DATA, require, wait_for
from tests.execution.jobs.conftest import start_worker
from tests.execution.jobs.staged.conftest import EXACT, assert_same_run

READ_TASKS = "read+IdAndOrigin+exact-Key"


def _prepare(corpus: pathlib.Path, job: pathlib.Path, *options: str) -> None:
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(corpus), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "3", *options, "--", *EXACT]) == 0


def _log(job: pathlib.Path, host: str) -> str:
    return (job.parent / f"worker-{host}.log").read_text()


def _merge(job: pathlib.Path, output: pathlib.Path) -> pathlib.Path:
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(output)]) == 0
    return output


@pytest.mark.slow
def test_damaged_files_and_records_are_redone_before_anything_reads_them(corpus, one_pipeline_exact, tmp_path):
    job = tmp_path / "job"
    _prepare(corpus, job)
    assert start_worker(job, "reader", "--max-shards", "3").wait(timeout=300) == 0
    read = sorted(path.stem for path in (job / "done").glob(f"{READ_TASKS}-*.json"))
    assert len(read) == 3 and len(list((job / "done").iterdir())) == 3
    # A same-size edit to a partition file of the first read task: its size still matches its done record.
    damaged = max((job / "attempts" / read[0]).glob("*/data/**/*.rec"), key=lambda path: path.stat().st_size)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))
    # The second read task's done record is cut short, as by a full disk.
    (job / "done" / f"{read[1]}.json").write_text('{"task": ')
    assert start_worker(job, "rest").wait(timeout=300) == 0
    log = _log(job, "rest")
    assert f"{read[1]}: its done record cannot be read; running it again" in log
    assert f"does not have the SHA-256 its record gives ({read[0]}); running {read[0]} again first" in log
    # Each was redone once, and no task failed or read the edited file.
    attempts = {task: len(list((job / "attempts" / task).iterdir())) for task in read}
    assert attempts == {read[0]: 1, read[1]: 1, read[2]: 1}
    assert not list((job / "failed").iterdir())
    assert_same_run(_merge(job, tmp_path / "merged"), one_pipeline_exact)


@pytest.mark.slow
def test_a_redone_task_makes_those_that_read_its_files_run_again(corpus, one_pipeline_exact, tmp_path, capsys):
    job = tmp_path / "job"
    _prepare(corpus, job)
    assert start_worker(job, "first").wait(timeout=300) == 0
    # A same-size edit after every task read the file: verify finds it, retry requeues its task.
    damaged = max((job / "attempts" / f"{READ_TASKS}-00001").glob("*/data/**/*.rec"), key=lambda p: p.stat().st_size)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["elastic", "verify", "--job-dir", str(job)]) == 2
    assert main(["elastic", "retry", "--job-dir", str(job), "--all-damaged"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"re-queued 1 task(s): {READ_TASKS}-00001"
    assert main(["elastic", "status", "--job-dir", str(job)]) == 1
    status = capsys.readouterr().out
    assert "made from files of a task redone since: workers run it again" in status
    assert start_worker(job, "second").wait(timeout=300) == 0
    log = _log(job, "second")
    redone = {line.split(":", 1)[0] for line in log.splitlines() if "running it again" in line}
    # Every task after the read stage read the redone task's files, directly or through another task.
    assert redone == {path.stem for path in (job / "done").iterdir() if not path.stem.startswith(READ_TASKS)}
    assert_same_run(_merge(job, tmp_path / "merged"), one_pipeline_exact)


@pytest.mark.slow
def test_sigterm_frees_the_task_at_once_without_spending_an_attempt(corpus, one_pipeline_exact, tmp_path):
    job = tmp_path / "job"
    _prepare(corpus, job, "--max-retries", "0")
    worker = start_worker(job, "preempted")
    attempt = wait_for(lambda: next((job / "attempts").glob("*/*/attempt.json"), None), what="a task's attempt")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 143
    log = _log(job, "preempted")
    assert "stopped by SIGTERM; the task it was running is free for other workers" in log
    assert "Traceback" not in log
    assert json.loads(attempt.read_text())["status"] == "interrupted"
    assert not list((job / "locks").glob("*.lock"))
    # With no retries allowed, the interrupted attempt must not count as the task's one attempt.
    assert start_worker(job, "next").wait(timeout=300) == 0
    assert_same_run(_merge(job, tmp_path / "merged"), one_pipeline_exact)


def _ctrl_c_at(said: str) -> Callable[[str], None]:
    """A worker's progress lines: Ctrl-C comes the first time one of them holds ``said``, as it is printed."""

    def echo(line: str) -> None:
        if said in line:
            raise KeyboardInterrupt

    return echo


def test_ctrl_c_as_an_attempt_starts_or_ends_leaves_no_attempt_running(corpus, tmp_path):
    job = tmp_path / "job"
    _prepare(corpus, job, "--max-retries", "0")
    # Just after the attempt's first record ("running") is written: it was left so once, which spends an attempt.
    assert run_worker(job, host="first", echo=_ctrl_c_at("started")) == 130
    [first] = (job / "attempts").glob("*/*/attempt.json")
    task = first.parent.parent.name
    assert json.loads(first.read_text())["status"] == "interrupted"
    assert JobDir(job).spent_attempts(task) == []
    assert not list((job / "locks").iterdir())
    # Just after the task's done record: the attempt finished its task, and stays succeeded.
    assert run_worker(job, host="second", echo=_ctrl_c_at(": done,")) == 130
    statuses = {
        path.parent.name: json.loads(path.read_text())["status"] for path in job.glob(f"attempts/{task}/*/attempt.json")
    }
    assert sorted(statuses.values()) == ["interrupted", "succeeded"]
    done = json.loads((job / "done" / f"{task}.json").read_text())
    assert statuses[pathlib.Path(done["attempt"]).name] == "succeeded"
    assert not list((job / "locks").iterdir())


@pytest.mark.slow
def test_an_input_changed_after_prepare_is_refused(corpus, tmp_path):
    copy = tmp_path / "input"
    shutil.copytree(corpus, copy)
    job = tmp_path / "job"
    _prepare(copy, job)
    edited = copy / "part-0.jsonl"
    stat = edited.stat()
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert start_worker(job, "touched").wait(timeout=120) == 2
    assert f"Input {edited} changed since prepare (size or modification time)" in _log(job, "touched")
    # The same size and time, other bytes: the read task compares its input's SHA-256 first.
    data = bytearray(edited.read_bytes())
    data[100] = ord("Q") if data[100] != ord("Q") else ord("R")
    edited.write_bytes(bytes(data))
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert start_worker(job, "edited").wait(timeout=120) == 2
    assert "changed since the job was prepared although sizes and times did not" in _log(job, "edited")
    assert not list((job / "done").iterdir()) and not list((job / "failed").iterdir())


def test_a_tokenizer_replaced_after_prepare_is_refused(corpus, tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copy(require(DATA / "tokenizers" / "gpt2" / "tokenizer.json"), tokenizer)
    job = tmp_path / "job"
    prepare = ["elastic", "prepare", "--pipeline", "tokenize", "--input", str(corpus), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "2", "--", "--tokenizer", str(tokenizer)]) == 0
    shutil.copy(require(DATA / "tokenizers" / "gpt-neox-olmo-dolma" / "tokenizer.json"), tokenizer)
    assert start_worker(job, "node").wait(timeout=120) == 2
    assert f"--tokenizer {tokenizer} holds other contents than when the job was prepared" in _log(job, "node")
    assert not list((job / "done").iterdir())
