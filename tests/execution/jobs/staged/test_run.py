"""``beamtrove run --staged`` as a user meets it: stopped while it publishes, rerun with other files, killed,
interrupted, on a full disk, on nothing, and with more workers than it can use."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pytest

from beamtrove.cli import main
from beamtrove.layout import JOB_DIR
from tests.conftest import DATA, beamtrove, require, wait_for
from tests.execution.conftest import children_of, running, shared_bytes
from tests.execution.jobs.staged.conftest import (
    EVERY_STEP,
    EXACT,
    MEMORY,
    assert_same_run,
    dedup_argv,
    run_rows,
    staged,
)

_FINISHED = "finished publishing the outputs of a run stopped while publishing them"
_UNDONE = "removed what a run that did not finish had staged; the folder holds what it held before that run"
#: The steps of a staged run's publish, before its commit point and after.
_UNCOMMITTED = ("laid out", "sealing")
_COMMITTED = ("sealed", "moved_aside documents", "moved_aside documents noted", "moved_in documents", "published")


def _stopped_at(step: str, argv: list[str]) -> subprocess.CompletedProcess:
    """Runs ``beamtrove ARGV`` in a process of its own that SIGKILLs itself at ``step`` of its publish."""
    env = {**os.environ, "BEAMTROVE_TEST_PUBLISH_STOP_AT": step}
    command = [sys.executable, "-m", "beamtrove", *argv]
    stopped = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert stopped.returncode == -signal.SIGKILL, stopped.stderr[-3000:]
    return stopped


def _old_run(one_pipeline: pathlib.Path, output: pathlib.Path) -> dict:
    """A copy of another run's folder in ``output``: what a staged run with --overwrite replaces; its rows."""
    shutil.copytree(one_pipeline, output)
    return run_rows(output)


def _check_stop(step, corpus, one_pipeline, one_pipeline_exact, tmp_path) -> None:
    output = tmp_path / "out"
    old = _old_run(one_pipeline, output)
    argv = dedup_argv(corpus, output, *EXACT, *staged(2), "--overwrite")
    _stopped_at(step, argv)
    if step in _UNCOMMITTED:
        # The old output is whole: nothing of the new one was moved in.
        assert run_rows(output) == old, step
    rerun = beamtrove(*argv)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (_UNDONE if step in _UNCOMMITTED else _FINISHED) in rerun.stderr, step
    assert_same_run(output, one_pipeline_exact)
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in one_pipeline_exact.iterdir())


@pytest.mark.slow  # the default suite publishes staged runs whole and refuses damaged files before a merge
def test_a_staged_publish_stopped_before_it_commits_loses_nothing(corpus, one_pipeline, one_pipeline_exact, tmp_path):
    # What lost every output: the files moved out of the job before the publish committed, and the rerun found
    # its tasks done with nothing left to publish.
    _check_stop("sealing", corpus, one_pipeline, one_pipeline_exact, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("step", [_UNCOMMITTED[0], *_COMMITTED])
def test_a_staged_publish_stopped_at_any_step_leaves_the_old_or_new_output_whole(
    step, corpus, one_pipeline, one_pipeline_exact, tmp_path
):
    _check_stop(step, corpus, one_pipeline, one_pipeline_exact, tmp_path)


@pytest.mark.slow  # the default suite checks the same files before an elastic merge (test_staged.py)
def test_files_damaged_before_the_publish_are_redone(corpus, one_pipeline_exact, tmp_path):
    output = tmp_path / "out"
    argv = dedup_argv(corpus, output, *EXACT, *staged(2))
    _stopped_at("sealing", argv)
    # The write task's documents, cut short in the job directory before a rerun publishes them.
    (documents,) = (output / JOB_DIR).glob("attempts/write-*/*/output/documents/*.jsonl.gz")
    documents.write_bytes(documents.read_bytes()[:100])
    rerun = beamtrove(*argv)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "trying again the tasks that failed or were damaged: write-00000" in rerun.stderr
    # 2 MiB cuts these reviews into partitions too small to pay for their tasks' start: the run says so.
    small = r"--memory 2MiB cuts 1\.\d+MiB of documents into \d partitions of \d+KiB each, in \d+ tasks: a task takes"
    assert re.search(small, rerun.stderr) and "a larger --memory runs this job faster" in rerun.stderr
    assert_same_run(output, one_pipeline_exact)


def _ds_files(folder: pathlib.Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file() and ".ds" in path.name}


# The default suite refuses a changed file in the workers of a staged job (test_worker.py) and in a resumable run
# (test_resume.py); this is the whole user's story, three runs of it.
@pytest.mark.slow
def test_a_tokenizer_replaced_between_runs_starts_the_job_over(corpus, tmp_path):
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copy(require(DATA / "tokenizers" / "gpt2" / "tokenizer.json"), tokenizer)
    output = tmp_path / "out"
    argv = ["run", "tokenize", "--input", str(corpus), "--output", str(output), "--tokenizer", str(tokenizer)]
    argv += ["--progress_interval", "0", "--staged", "--memory", MEMORY]
    _stopped_at("sealing", argv)
    other = require(DATA / "tokenizers" / "gpt-neox-olmo-dolma" / "tokenizer.json")
    shutil.copy(other, tokenizer)
    rerun = beamtrove(*argv)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "holds a staged job of another configuration, input or files read: starting over" in rerun.stderr
    clean = tmp_path / "clean"
    assert main(["run", "tokenize", "--input", str(corpus), "--output", str(clean), "--tokenizer", str(tokenizer)]) == 0
    tokens = _ds_files(output)
    assert tokens and tokens == _ds_files(clean)


@pytest.mark.slow
def test_workers_are_bounded_by_the_tasks_there_are(corpus, one_pipeline_exact, tmp_path, caplog):
    output = tmp_path / "out"
    # 1 GiB holds the whole input: one partition, one task per stage, so one worker.
    assert main(dedup_argv(corpus, output, *EXACT, "--staged", "--workers", "8", "--memory", "1GiB")) == 0
    assert "--workers 8: starting 1, the most tasks a stage of this job runs at once (1)" in caplog.text
    assert json.loads((output / "stats.json").read_text())["staged"]["workers"] == 1
    assert_same_run(output, one_pipeline_exact)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--workers", "2"], "--workers set how a --staged run goes: add --staged, or drop them."),
        (["--memory", "1GiB"], "--memory set how a --staged run goes: add --staged, or drop them."),
        (
            ["--staged", "--memory", "1 gigabyte"],
            "--memory must be a number of bytes (such as 1073741824, 512MiB or 1GiB) of at least 1048576 (got "
            "'1 gigabyte').",
        ),
    ],
)
def test_staged_options_are_refused_where_they_mean_nothing(corpus, tmp_path, capsys, options, message):
    output = tmp_path / "out"
    assert main(dedup_argv(corpus, output, *EXACT, *options)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)
    assert not output.exists()


def test_staged_is_an_option_of_the_pipelines_that_run_staged_only(corpus, tmp_path, capsys):
    argv = ["run", "fineweb", "--input", str(corpus), "--output", str(tmp_path / "out"), "--staged"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: --staged is an option of the dedup and dedup_index and fineweb2 and merge_tokens and "
        "tokenize pipeline, not of fineweb (see beamtrove run fineweb --help)."
    )


@pytest.mark.slow
def test_an_empty_input_gives_what_the_one_pipeline_gives(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "part-0.jsonl").write_text("")
    one, stage = tmp_path / "one", tmp_path / "staged"
    assert main(dedup_argv(empty, one, *EXACT)) == 0
    assert main(dedup_argv(empty, stage, *EXACT, "--staged")) == 0
    assert run_rows(stage) == run_rows(one) == {"documents": []}
    # A run folder that kept nothing, given as input, is an empty input too.
    chained = tmp_path / "chained"
    assert main(dedup_argv(one, chained, *EXACT, "--staged")) == 0
    assert run_rows(chained) == {"documents": []}


def test_ctrl_c_stops_the_workers_and_says_so_in_one_line(corpus, tmp_path):
    output = tmp_path / "out"
    # More workers than the machine has cores for: what set off the OOM killer once.
    argv = dedup_argv(corpus, output, *EVERY_STEP, "--staged", "--workers", "1024", "--memory", MEMORY)
    job = output / JOB_DIR
    run = subprocess.Popen(
        [sys.executable, "-m", "beamtrove", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: run.poll() is not None or list(job.glob("done/*.json")), what="a task done")
        assert run.poll() is None, "the run ended before the test could interrupt it"
        workers = children_of(run.pid)
        assert workers
        # What a terminal does on Ctrl-C: SIGINT to every process of the foreground group.
        os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err + out
    bounded = re.search(
        r"--workers 1024: starting (\d+), (this machine's cores|the most tasks a stage of this job)", err
    )
    assert bounded and int(bounded[1]) <= len(os.sched_getaffinity(0)), err
    assert err.strip().splitlines()[-1] == (
        f"beamtrove: interrupted: nothing was written to {output}; {job} keeps the tasks done, and the same command "
        "again goes on from them."
    )
    wait_for(lambda: not running(workers), timeout=30, what="the workers to end")
    assert not list(job.glob("locks/*.lock"))
    statuses = {json.loads(path.read_text())["status"] for path in job.glob("attempts/*/*/attempt.json")}
    assert "running" not in statuses and "failed" not in statuses


def test_workers_killed_fail_the_run_saying_why_and_how_to_go_on(corpus, tmp_path):
    output = tmp_path / "out"
    argv = dedup_argv(corpus, output, *EVERY_STEP, *staged(2))
    job = output / JOB_DIR
    run = subprocess.Popen([sys.executable, "-m", "beamtrove", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: run.poll() is not None or list(job.glob("done/*.json")), what="a task done")
        workers = wait_for(lambda: children_of(run.pid), what="the workers")
        # Forked from the run, which has imported Beam and the pipeline's modules: they share those pages with it.
        for worker in workers:
            assert (
                pathlib.Path(f"/proc/{worker}/cmdline").read_bytes()
                == pathlib.Path(f"/proc/{run.pid}/cmdline").read_bytes()
            )
            assert shared_bytes(worker) > 64 << 20
        # What the kernel's OOM killer does.
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        out, _ = run.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            run.kill()
    assert run.returncode == 1
    last = out.decode().strip().splitlines()[-1]
    assert last.startswith("FAILED in ") and "; nothing was written to the output: 2 worker(s) were killed by " in last
    assert "SIGKILL (the kernel's OOM killer does this when memory runs out: give a smaller --memory or fewer " in last
    assert last.endswith("tasks done: rerun the same command to go on from them")
    assert f"{job} keeps the " in last


@pytest.fixture
def full_disk(tmp_path):
    """A 2 MiB file system of its own (tmpfs; needs root), to fill."""
    folder = tmp_path / "small"
    folder.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)]
    mounted = subprocess.run(mount, capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_stops_the_workers_in_a_line_each(corpus, full_disk):
    output = full_disk / "out"
    result = beamtrove(*dedup_argv(corpus, output, *EXACT, "--staged", "--memory", str(1 << 20)))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    full = "stopped, the job directory's file system is full"
    assert 1 <= sum(full in line for line in result.stdout.splitlines()) <= 2
    assert f"the file system of {output / JOB_DIR} has " in result.stdout.strip().splitlines()[-1]
