"""The output folder contract, tried as a user would break it: reruns, overlaps, hostile paths, interrupts."""

from __future__ import annotations

import contextlib
import datetime
import gzip
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import fsspec
import pytest

from beamtrove.cli import main
from beamtrove.configuration import ConfigurationError
from beamtrove.execution.lease import Lease
from beamtrove.execution.output import LOCK_TIMEOUT_SECONDS, OutputPlan, plan_output, recover_output
from beamtrove.execution.output_lock import lock_output
from beamtrove.fs import filesystem, is_hidden
from tests.conftest import beamtrove_here, child_processes, jsonl_rows, make_warc_set, permissions_bind, require

_FAST_EXTRACTION = ("--extractor", "resiliparse", "--extract_timeout", "0")


@pytest.fixture
def warcs(data_dir) -> str:
    return str(require(data_dir / "warc") / "*.warc.gz")


def _extract(warcs: str, output, *args: str) -> int:
    return main(["run", "extract", "--input", warcs, "--output", str(output), *_FAST_EXTRACTION, *args])


def _files(output) -> list[str]:
    return sorted(str(path.relative_to(output)) for path in output.rglob("*") if path.is_file())


def test_a_rerun_into_a_used_output_is_refused_until_overwrite_replaces_it(warcs, tmp_path, capsys):
    output = tmp_path / "out"
    assert _extract(warcs, output) == 0
    before = jsonl_rows(output / "documents")
    assert len(before) == 83

    assert _extract(warcs, output, "--limit", "10") == 2
    assert "already holds documents, report.html, stats.json" in capsys.readouterr().err
    assert jsonl_rows(output / "documents") == before

    assert _extract(warcs, output, "--limit", "10", "--overwrite") == 0
    assert _extract(warcs, tmp_path / "fresh", "--limit", "10") == 0
    assert jsonl_rows(output / "documents") == jsonl_rows(tmp_path / "fresh" / "documents")
    assert _files(output) == _files(tmp_path / "fresh")

    # A run that writes no document leaves no documents folder, not the old one.
    assert _extract(warcs, output, "--limit", "0", "--overwrite") == 0
    assert _files(output) == ["report.html", "stats.json"]


@pytest.mark.slow
def test_an_overwriting_dedup_run_leaves_nothing_of_the_steps_it_no_longer_runs(review_jsonl, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(output)]
    assert main([*argv, "--dedup", "minhash", "--cluster_map"]) == 0
    assert (output / "clusters" / "minhash").is_dir()
    assert main([*argv, "--dedup", "exact", "--overwrite"]) == 0
    assert not (output / "clusters").exists() and not (output / "excluded" / "minhash").exists()
    assert len(jsonl_rows(output / "documents")) == 600


@pytest.mark.slow
def test_a_failed_overwrite_leaves_the_previous_output_as_it_was(warcs, tmp_path, capsys):
    output = tmp_path / "out"
    assert _extract(warcs, output) == 0
    files = {name: (output / name).read_bytes() for name in _files(output)}
    # Construction fails (no such model) after the output was planned: nothing of the old output is touched.
    argv = ["run", "fineweb", "--input", warcs, "--output", str(output), "--overwrite", "--lid_model", "/nowhere.bin"]
    assert main(argv) == 2
    assert {name: (output / name).read_bytes() for name in _files(output)} == files

    # A run interrupted once it has started writing its own outputs publishes none of them.
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", warcs, "--output", str(output),
               "--overwrite", "--languages", "all"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    staging = output / ".beamtrove-staging"
    while not any(path.suffix == ".gz" for path in staging.rglob("*")):
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=120)
    assert process.returncode == 130
    assert {name: (output / name).read_bytes() for name in _files(output)} == files


def test_a_resumable_run_refuses_the_output_of_an_ordinary_run(warcs, tmp_path, capsys):
    output = tmp_path / "out"
    assert _extract(warcs, output) == 0
    assert _extract(warcs, output, "--resumable") == 2
    message = capsys.readouterr().err
    assert "from a run that was not --resumable" in message and "--restart" in message
    assert _files(output) == ["documents/part-00000.jsonl.gz", "report.html", "stats.json"]
    assert _extract(warcs, output, "--resumable", "--overwrite") == 2
    assert "--restart" in capsys.readouterr().err

    assert _extract(warcs, output, "--resumable", "--restart") == 0
    assert "documents/part-00000.jsonl.gz" not in _files(output)
    ids = [row["id"] for row in jsonl_rows(output / "documents")]
    assert len(ids) == len(set(ids)) == 83


def test_inputs_and_outputs_never_overlap(warcs, tmp_path, capsys):
    documents = tmp_path / "docs"
    assert _extract(warcs, documents) == 0
    rows = documents / "documents"
    convert = ["run", "convert", "--input", str(rows), "--input_format", "jsonl"]
    assert main([*convert, "--output", str(rows), "--overwrite"]) == 2
    assert "is inside --output" in capsys.readouterr().err
    assert main([*convert, "--output", str(rows / "converted")]) == 2
    assert "is inside the input folder" in capsys.readouterr().err
    assert main([*convert, "--input", str(rows / "*.jsonl.gz"), "--output", str(rows / "x")]) == 2
    assert "is inside the input folder" in capsys.readouterr().err
    assert _files(documents) == ["documents/part-00000.jsonl.gz", "report.html", "stats.json"]


def test_a_run_folder_given_as_input_reads_its_documents_only(warcs, tmp_path, caplog):
    run = tmp_path / "run"
    argv = ["run", "fineweb", "--input", warcs, "--output", str(run), *_FAST_EXTRACTION, "--languages", "all"]
    assert main(argv) == 0
    kept = jsonl_rows(run / "documents")
    assert (run / "excluded").is_dir() and kept

    # No --input_format: a folder's format is that of its files.
    assert main(["run", "convert", "--input", str(run), "--output", str(tmp_path / "copy")]) == 0
    assert f"reading its documents only, from {run / 'documents'}" in caplog.text
    assert sorted(row["id"] for row in jsonl_rows(tmp_path / "copy")) == sorted(row["id"] for row in kept)


@pytest.mark.parametrize("dump", ["../../elsewhere", "/tmp/abs", "a/b", "..", ".hidden", "x y"])
def test_a_dump_must_be_one_folder_name(warcs, tmp_path, capsys, dump):
    output = tmp_path / "a" / "b" / "out"
    assert main(["run", "fineweb", "--input", warcs, "--output", str(output), "--dump", dump]) == 2
    assert "must be one folder name such as CC-MAIN-2024-22" in capsys.readouterr().err
    assert list(tmp_path.rglob("*")) == []


def test_a_file_as_output_is_one_error_line(warcs, tmp_path, capsys):
    existing = tmp_path / "file.txt"
    existing.write_text("mine")
    assert _extract(warcs, existing) == 2
    error = f"beamtrove: error: --output {existing} is a file: pass a folder (it is created if missing).\n"
    assert capsys.readouterr().err == error
    assert existing.read_text() == "mine"


def test_hidden_and_underscore_entries_are_not_read(warcs, tmp_path):
    output = tmp_path / "out"
    assert _extract(warcs, output, "--resumable") == 0
    kept = jsonl_rows(output / "documents")
    # What a killed writer could have left, and bookkeeping files: none of it is data.
    part = next((output / "documents").glob("*.jsonl.gz"))
    (output / "documents" / ".beamtrove-tmp-x").mkdir()
    shutil.copy(part, output / "documents" / ".beamtrove-tmp-x" / "a.jsonl.gz")
    shutil.copy(part, output / "documents" / "_partial.jsonl.gz")
    argv = ["run", "convert", "--input", str(output / "documents"), "--input_format", "jsonl"]
    assert main([*argv, "--output", str(tmp_path / "copy")]) == 0
    assert len(jsonl_rows(tmp_path / "copy")) == len(kept)


# --- interrupted runs: SIGKILL and SIGINT at random moments, then the same command again ---


@pytest.fixture(scope="module")
def kill_inputs(tmp_path_factory):
    """Six WARC files of real pages, and an uninterrupted resumable and ordinary extraction of them."""
    warcs = tmp_path_factory.mktemp("kill-warcs")
    make_warc_set(warcs, "--records", "600", "--files", "6", "--faults", "--seed", "11")
    pattern = str(warcs / "*.warc.gz")
    reference = tmp_path_factory.mktemp("kill-reference")
    for kind, extra in (("resumable", ["--resumable"]), ("ordinary", [])):
        assert _extract(pattern, reference / kind, *extra) == 0
    return pattern, reference


def _command(pattern: str, output, *extra: str) -> list[str]:
    return [sys.executable, "-m", "beamtrove", "run", "extract", "--input", pattern, "--output", str(output),
            *_FAST_EXTRACTION, "--progress_interval", "0", *extra]  # fmt: skip


def _data(output) -> dict[str, list[bytes]]:
    """Every data file of an output, by name: its lines, sorted (the order of a part file's lines is free)."""
    data = {}
    for name in _files(output):
        if name.startswith("documents/") or name.startswith("excluded/") or name.startswith("dead_letters/"):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(output / name, "rb") as source:
                data[name] = sorted(source.read().splitlines())
    return data


def _interrupt_then_rerun(pattern, output, extra, signum, delay) -> subprocess.CompletedProcess:
    """Starts the run, signals it ``delay`` seconds after it has begun work (built and checked), runs it again."""
    process = subprocess.Popen(_command(pattern, output, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Python's start-up takes seconds on a loaded machine; the moment is one of the run's own.
    while not (output / ".beamtrove-staging").exists() and not (output / "_resume.json").exists():
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    time.sleep(delay)
    os.kill(process.pid, signum)
    _, err = process.communicate(timeout=120)
    if process.returncode not in (0, -signal.SIGKILL):
        assert process.returncode == 130, err.decode()
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith("beamtrove: interrupted"), err.decode()
        assert "Traceback" not in err.decode(), err.decode()
    return subprocess.run(_command(pattern, output, *extra), capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("kind", ["resumable", "ordinary"])
def test_an_interrupted_run_rerun_gives_the_uninterrupted_output(kill_inputs, tmp_path, signum, kind):
    pattern, reference = kill_inputs
    # An ordinary run publishes nothing until it succeeds; --overwrite lets a rerun replace a published one.
    extra = ["--resumable"] if kind == "resumable" else ["--overwrite"]
    expected = _data(reference / kind)
    moments = random.Random(f"{kind}-{signum}")
    # Three moments per signal and kind: twelve interrupted runs in all, each over the same six files.
    for attempt in range(3):
        output = tmp_path / f"attempt-{attempt}"
        rerun = _interrupt_then_rerun(pattern, output, extra, signum, moments.uniform(0.0, 6.0))
        assert rerun.returncode == 0, rerun.stderr
        assert _data(output) == expected, attempt
        ids = [row["id"] for row in jsonl_rows(output / "documents")]
        assert len(ids) == len(set(ids)), attempt
        stray = [name for name in _files(output) if name not in _files(reference / kind)]
        assert stray == [], attempt
        # The counts; the seconds the runner measured in the step differ between any two runs.
        assert (
            json.loads((output / "stats.json").read_text())["steps"]["write_documents"]["counters"]
            == json.loads((reference / kind / "stats.json").read_text())["steps"]["write_documents"]["counters"]
        )


def test_a_run_refused_before_it_starts_leaves_no_folder_it_made(tmp_path, capsys):
    # --output a/b/c of a run refused while it is built (an input that does not exist) left a/b behind.
    output = tmp_path / "a" / "b" / "c"
    assert main(["run", "extract", "--input", str(tmp_path / "missing.warc.gz"), "--output", str(output)]) == 2
    assert "missing.warc.gz' does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("output", "staged"), [("out", False), ("new/out", True)], ids=["plain", "staged"])
def test_an_output_in_a_read_only_folder_is_refused_in_one_line_naming_it(review_jsonl, tmp_path, staged, output):
    # A staged run gave a PermissionError's traceback, a plain one "[Errno 13] Permission denied: '.../out'".
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    command = [sys.executable, "-m", "beamtrove", "run", "dedup", "--input", str(review_jsonl),
               "--output", str(read_only / output), *(["--staged"] if staged else [])]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, preexec_fn=permissions_bind(), check=False)
    assert (result.returncode, result.stderr) == (
        2,
        f"beamtrove: error: --output {read_only / output} cannot be written: {read_only} refuses new files "
        "(Permission denied); choose an --output in a folder this user can write to.\n",
    )
    assert list(read_only.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_is_one_line_and_exit_130_with_extraction_processes_running(data_dir, tmp_path):
    # A terminal's Ctrl-C reaches the whole process group, the extraction processes included. Without the language
    # screen every page is extracted: the run is still extracting when the first extraction process is seen.
    output = tmp_path / "out"
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", str(require(data_dir / "warc")),
               "--output", str(output), "--no_language_screen"]  # fmt: skip
    # With Python's fault handler on, SIGABRT makes a run that does not end print where each of its threads is.
    environment = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=environment
    )
    while not ((output / ".beamtrove-staging").exists() and child_processes(process.pid)):
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    try:
        _, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        os.killpg(process.pid, signal.SIGKILL)  # and whatever of its group holds its pipes
        pytest.fail(f"the run did not end within 120 s of Ctrl-C; its threads:\n{process.communicate()[1].decode()}")
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert err.decode().strip().splitlines()[-1] == (
        f"beamtrove: interrupted: nothing was written to {output}; it is as it was before the run."
    )
    # The run made the folder, and took it away again.
    assert not output.exists()


# --- publishing stopped at each of its steps, then the next command ---


def _folder(output) -> dict[str, bytes]:
    """What a reader of the folder sees: every file not hidden, by name, with its bytes but for the run's times."""
    seen = {}
    for name in _files(output):
        if is_hidden(name):
            continue
        data = (output / name).read_bytes()
        if name == "stats.json":
            data = json.dumps(json.loads(data)["steps"]["read"]["counters"]).encode()
        elif name == "report.html":
            data = b"drawn"  # its figures show the seconds the run took
        seen[name] = data
    return seen


@pytest.fixture(scope="module")
def publish_runs(review_jsonl, tmp_path_factory):
    """The old output (every review) and the new one (one input file) of an overwrite, each made uninterrupted."""
    folder = tmp_path_factory.mktemp("publish")
    old = beamtrove_here(*_convert_args(review_jsonl, folder / "old"))
    new = beamtrove_here(*_convert_args(review_jsonl / "reviews-1.jsonl", folder / "new"))
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    # Both hold a folder (dead_letters/: the malformed row) and files, and every name is in both.
    assert {name.split("/")[0] for name in _folder(folder / "old")} == {
        "dead_letters", "part-00000.jsonl.gz", "report.html", "stats.json",
    }  # fmt: skip
    assert _folder(folder / "old").keys() == _folder(folder / "new").keys()
    assert _folder(folder / "old") != _folder(folder / "new")
    return folder / "old", folder / "new"


def _convert_args(inputs, output, *extra: str) -> list[str]:
    return ["run", "convert", "--input", str(inputs), "--input_format", "jsonl", "--output", str(output),
            "--progress_interval", "0", *extra]  # fmt: skip


def _convert(inputs, output, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", *_convert_args(inputs, output, *extra)],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


_FINISHED = "finished publishing the outputs of a run stopped while publishing them"
_UNDONE = "removed what a run that did not finish had staged; the folder holds what it held before that run"


@pytest.mark.parametrize(
    ("step", "signal_name"),
    [
        ("sealing", "SIGKILL"),
        ("sealed", "SIGKILL"),
        ("moved_aside dead_letters", "SIGKILL"),
        ("moved_aside part-00000.jsonl.gz noted", "SIGKILL"),
        ("moved_in dead_letters", "SIGKILL"),
        ("moved_in part-00000.jsonl.gz noted", "SIGKILL"),
        ("published", "SIGKILL"),
        ("sealing", "SIGINT"),
        ("moved_aside stats.json", "SIGINT"),
        ("moved_in report.html noted", "SIGINT"),
    ],
)
def test_an_overwrite_stopped_at_any_step_of_its_publish_is_finished_or_undone_by_the_next_command(
    review_jsonl, publish_runs, tmp_path, step, signal_name
):
    old, new = publish_runs
    output = tmp_path / "out"
    shutil.copytree(old, output)
    stopped = _convert(
        review_jsonl / "reviews-1.jsonl", output, "--overwrite",
        env={"BEAMTROVE_TEST_PUBLISH_STOP_AT": step, "BEAMTROVE_TEST_PUBLISH_STOP_WITH": signal_name},
    )  # fmt: skip
    committed = step != "sealing"
    if signal_name == "SIGKILL":
        assert stopped.returncode == -signal.SIGKILL, stopped.stderr
    else:
        assert stopped.returncode == 130, stopped.stderr
        assert "Traceback" not in stopped.stderr
        assert stopped.stderr.strip().splitlines()[-1] == (
            f"beamtrove: interrupted while publishing into {output}: this run had finished, and the next "
            f"`beamtrove run` with --output {output} finishes publishing its outputs."
            if committed
            else f"beamtrove: interrupted: nothing was written to {output}; it is as it was before the run."
        )
    # The next command into the folder, even one refused for it, finishes or undoes the publish, and says which.
    following = beamtrove_here(*_convert_args(review_jsonl / "reviews-1.jsonl", output))
    assert following.returncode == 2
    if committed:
        assert f"WARNING beamtrove.execution.output_publish: {output}: {_FINISHED}" in following.stderr
        assert _folder(output) == _folder(new)
    else:
        assert _folder(output) == _folder(old)
        if signal_name == "SIGKILL":
            assert f"{output}: {_UNDONE}" in following.stderr
    assert "already holds dead_letters, part-00000.jsonl.gz, report.html, stats.json" in following.stderr
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in new.iterdir())


def test_ctrl_c_once_the_outputs_are_published_says_the_run_finished(review_jsonl, publish_runs, tmp_path):
    # Ctrl-C after the publish (as the progress board ended) was said as "interrupted", or as "nothing was
    # written" by the message that looked for the staging folder the publish had removed.
    old, new = publish_runs
    output = tmp_path / "out"
    shutil.copytree(old, output)
    stopped = _convert(
        review_jsonl / "reviews-1.jsonl", output, "--overwrite",
        env={"BEAMTROVE_TEST_PUBLISH_STOP_AT": "staging removed", "BEAMTROVE_TEST_PUBLISH_STOP_WITH": "SIGINT"},
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"beamtrove: interrupted as the run ended: it had finished, and {output} holds all it wrote."
    )
    assert _folder(output) == _folder(new)
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in new.iterdir())


class _Stopped(Exception):
    pass


def _memory_output(root: str) -> tuple[OutputPlan, dict[str, bytes], dict[str, bytes]]:
    """An output on an object store holding an old run, and a new run staged to replace it."""
    fs = fsspec.filesystem("memory")
    old = {"documents/part-00000.jsonl.gz": b"old 0", "documents/part-00001.jsonl.gz": b"old 1",
           "excluded/gopher/part-00000.jsonl.gz": b"old excluded", "stats.json": b"{}"}  # fmt: skip
    new = {"documents/part-00000.jsonl.gz": b"new 0", "dead_letters/part-00000.jsonl": b"new letters",
           "stats.json": b"{\"new\": 1}"}  # fmt: skip
    for name, data in old.items():
        fs.pipe(f"{root}/{name}", data)
    plan = plan_output(f"memory://{root}", overwrite=True)
    plan.stage()
    _, staging = filesystem(plan.write_to)
    for name, data in new.items():
        fs.pipe(f"{staging}/{name}", data)
    return plan, old, new


def _memory_files(root: str) -> dict[str, bytes]:
    fs = fsspec.filesystem("memory")
    return {path[len(root) + 1 :]: fs.cat_file(path) for path in fs.find(root) if not is_hidden(path[len(root) + 1 :])}


def test_a_publish_on_an_object_store_stopped_at_any_step_is_finished_or_undone(monkeypatch):
    steps = []
    monkeypatch.setattr("beamtrove.execution.output_publish.reached", steps.append)
    plan, _, new = _memory_output("/steps")
    plan.publish()
    plan.release()
    assert _memory_files("/steps") == new
    assert fsspec.filesystem("memory").ls("/steps", detail=False) == ["/steps/dead_letters", "/steps/documents",
                                                                      "/steps/stats.json"]  # fmt: skip
    # Copies then deletes, each noted in between: every step of a move, for the folders and the file.
    assert "moved_aside excluded" in steps and "moved_in dead_letters noted" in steps and len(steps) == 16
    assert steps[-1] == "staging removed"

    for number, step in enumerate(steps):
        root = f"/stopped-{number}"

        def stop(reached, at=step):
            if reached == at:
                raise _Stopped

        monkeypatch.setattr("beamtrove.execution.output_publish.reached", stop)
        plan, old, new = _memory_output(root)
        with pytest.raises(_Stopped):
            plan.publish()
        assert plan.committed() == (step not in ("sealing", "staging removed")), step
        plan.release()  # the process is gone: nothing else of it runs
        _, staging = filesystem(plan.write_to)
        half_copied = {
            "moved_aside documents": f"{staging}/_replaced/documents/part-00001.jsonl.gz",
            "moved_in documents": f"{root}/documents/part-00000.jsonl.gz",
        }
        if step in half_copied:  # a copy cut short: the entry is in both places, one of them in part
            fsspec.filesystem("memory").rm(half_copied[step])
        monkeypatch.setattr("beamtrove.execution.output_publish.reached", lambda reached: None)
        said = recover_output(f"memory://{root}")
        if step == "sealing":
            assert said == [f"memory://{root}: {_UNDONE}"], step
            assert _memory_files(root) == old, step
        elif step == "staging removed":  # published: nothing is left to finish
            assert said == [], step
            assert _memory_files(root) == new, step
        else:
            assert len(said) == 1 and _FINISHED in said[0], step
            assert _memory_files(root) == new, step
        assert fsspec.filesystem("memory").find(f"{root}/.beamtrove-staging") == [], step


# --- one run owns an output folder at a time ---


def test_a_second_run_into_an_output_in_use_is_refused_naming_the_owner(review_jsonl, publish_runs, tmp_path):
    _, new = publish_runs
    output = tmp_path / "out"
    command = [sys.executable, "-m", "beamtrove", *_convert_args(review_jsonl / "reviews-1.jsonl", output)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    owner = output / ".beamtrove-lock" / "owner.json"
    try:
        while not (owner.exists() and owner.read_bytes()):
            assert first.poll() is None, first.communicate()
            time.sleep(0.01)
        # Held still while the second starts: the two runs overlap whatever the machine's load.
        os.kill(first.pid, signal.SIGSTOP)
        claim = json.loads(owner.read_text())
        second = beamtrove_here(*_convert_args(review_jsonl, output, "--overwrite"))
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"beamtrove: error: --output {output} is in use by another run (host {socket.gethostname()}, pid "
        f"{first.pid}, started {claim['started']}): wait until it ends or choose another --output; its lock "
        f"{output / '.beamtrove-lock'} is taken over once that run is gone (120 s without heartbeat)."
    ]
    assert _folder(output) == _folder(new)
    assert sorted(path.name for path in output.iterdir()) == sorted(path.name for path in new.iterdir())


def test_the_lock_of_a_run_that_is_gone_is_taken_over(review_jsonl, tmp_path, caplog):
    output = tmp_path / "out"
    (output / ".beamtrove-lock").mkdir(parents=True)
    dead = subprocess.Popen(["true"])  # a pid that ran on this host and has exited
    dead.wait()
    owner = output / ".beamtrove-lock" / "owner.json"
    started = "2026-01-01T00:00:00+00:00"
    claim = {"host": socket.gethostname(), "pid": dead.pid, "started": started, "token": "x", "heartbeat": time.time()}
    owner.write_text(json.dumps(claim))
    argv = ["run", "convert", "--input", str(review_jsonl / "reviews-1.jsonl"), "--input_format", "jsonl",
            "--output", str(output), "--progress_interval", "0"]  # fmt: skip
    assert main(argv) == 0
    assert (
        f"took over the lock of {output} from host {socket.gethostname()}, pid {dead.pid}, started {started}: "
        "its process is gone" in caplog.text
    )
    assert not (output / ".beamtrove-lock").exists()

    # Another host's lock: stale only once its last renewal is older than the timeout; on a disk, the file's time.
    (output / ".beamtrove-lock").mkdir()
    claim = {**claim, "host": "elsewhere", "pid": 1}
    owner.write_text(json.dumps(claim))
    assert main([*argv, "--overwrite"]) == 2
    assert json.loads(owner.read_text()) == claim, "a live owner's lock is left alone"
    renewed = time.time() - LOCK_TIMEOUT_SECONDS - 1
    owner.write_text(json.dumps({**claim, "heartbeat": renewed}))
    os.utime(owner, (renewed, renewed))
    assert main([*argv, "--overwrite"]) == 0
    assert "from host elsewhere, pid 1, started 2026-01-01T00:00:00+00:00: no heartbeat for 120 s" in caplog.text
    assert not (output / ".beamtrove-lock").exists()


@pytest.mark.parametrize("where", ["__post_init__", "heartbeat"])
def test_ctrl_c_as_the_lock_is_taken_leaves_no_claim_nor_the_folder_made_for_it(tmp_path, monkeypatch, caplog, where):
    # Ctrl-C after the claim was written and before the lock was handed back (Ctrl-C lands between any two steps)
    # left the claim and its folders: the next run took the lock over from this process, and `new/out` stayed.
    # The signal is real, sent to this process as the lease is made or its heartbeat started.
    original = getattr(Lease, where)
    sent = []

    def then_ctrl_c(self, *args):
        result = original(self, *args)
        if not sent:
            sent.append(where)
            os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(Lease, where, then_ctrl_c)
    output = tmp_path / "new" / "out"
    with pytest.raises(KeyboardInterrupt):
        plan_output(str(output))
    assert sent
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    plan_output(str(output)).release()
    assert "took over" not in caplog.text


# A claim a run left unreadable: it stopped between creating its owner.json and writing it, or hit a full disk.
_UNREADABLE_CLAIMS = {"empty": b"", "garbage": b"\x00\xff garbage", "cut short": b'{"host": "elsewhere", "pid": 4'}


def _left_claim(output, data: bytes, age: float) -> pathlib.Path:
    owner = output / ".beamtrove-lock" / "owner.json"
    owner.parent.mkdir(parents=True, exist_ok=True)
    owner.write_bytes(data)
    written = time.time() - age
    os.utime(owner, (written, written))
    return owner


def _in_use_by_unreadable_claim(output, age: str, left: str) -> str:
    return (
        f"beamtrove: error: --output {output} is in use by another run (its claim "
        f"{output}/.beamtrove-lock/owner.json cannot be read: it was written {age} s ago, maybe by a run writing it "
        f"right now): wait until it ends or choose another --output; its lock {output}/.beamtrove-lock is taken over "
        f"once that claim is 120 s old (in {left} s)."
    )


@pytest.mark.slow
def test_an_empty_claim_is_refused_while_fresh_and_taken_over_once_old(review_jsonl, publish_runs, tmp_path):
    _, new = publish_runs
    output = tmp_path / "out"
    owner = _left_claim(output, b"", age=30)
    fresh = _convert(review_jsonl / "reviews-1.jsonl", output)
    assert fresh.returncode == 2
    assert fresh.stderr.strip().splitlines() in (
        [_in_use_by_unreadable_claim(output, str(seconds), str(120 - seconds))] for seconds in range(30, 40)
    ), fresh.stderr
    assert owner.read_bytes() == b"", "a claim that may be a run's being written is left alone"

    _left_claim(output, b"", age=LOCK_TIMEOUT_SECONDS + 1)
    old = _convert(review_jsonl / "reviews-1.jsonl", output)
    assert old.returncode == 0, old.stderr
    # Written 121 s before the run started, which takes a few seconds to look.
    assert re.search(
        f"WARNING beamtrove.execution.output_lock: took over the lock of {re.escape(str(output))} from a run whose "
        r"claim cannot be read: it was last written 1[23]\d s ago, over the 120 s timeout\n",
        old.stderr,
    ), old.stderr
    assert _folder(output) == _folder(new)
    assert not (output / ".beamtrove-lock").exists()


@pytest.mark.parametrize("kind", ["garbage", "cut short"])
def test_an_unreadable_claim_is_judged_by_its_age(review_jsonl, tmp_path, capsys, caplog, kind):
    output = tmp_path / "out"
    argv = _convert_args(review_jsonl / "reviews-1.jsonl", output)
    _left_claim(output, _UNREADABLE_CLAIMS[kind], age=LOCK_TIMEOUT_SECONDS - 60)
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() in (
        [_in_use_by_unreadable_claim(output, str(seconds), str(120 - seconds))] for seconds in range(60, 70)
    )
    _left_claim(output, _UNREADABLE_CLAIMS[kind], age=3600)
    assert main(argv) == 0
    assert f"took over the lock of {output} from a run whose claim cannot be read: it was last written 3600 s" in (
        caplog.text
    )


@pytest.mark.parametrize("kind", sorted(_UNREADABLE_CLAIMS))
def test_an_unreadable_claim_on_an_object_store_is_judged_by_its_age(caplog, kind):
    fs = fsspec.filesystem("memory")
    output = f"memory://unreadable-{kind.replace(' ', '-')}"
    owner = f"/unreadable-{kind.replace(' ', '-')}/.beamtrove-lock/owner.json"
    fs.pipe(owner, _UNREADABLE_CLAIMS[kind])
    with pytest.raises(ConfigurationError, match=r"cannot be read: it was written 0 s ago, maybe by a run writing"):
        lock_output(output)
    assert fs.cat_file(owner) == _UNREADABLE_CLAIMS[kind]
    fs.store[owner].modified = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=600)
    lock = lock_output(output)
    assert f"took over the lock of {output} from a run whose claim cannot be read: it was last written 600 s" in (
        caplog.text
    )
    assert json.loads(fs.cat_file(owner))["token"] == lock.claim["token"]
    lock.release()
    assert not fs.exists(owner)


def test_a_used_output_is_refused_naming_only_options_the_pipeline_has(review_jsonl, publish_runs, tmp_path, capsys):
    old, _ = publish_runs
    output = tmp_path / "out"
    shutil.copytree(old, output)
    used = (
        f"beamtrove: error: --output {output} already holds dead_letters, part-00000.jsonl.gz, report.html, stats.json"
    )
    assert main(_convert_args(review_jsonl, output)) == 2
    assert capsys.readouterr().err == (
        f"{used}: choose another --output, or pass --overwrite to replace it once this run succeeds.\n"
    )
    assert main(["run", "extract", "--input", str(review_jsonl), "--output", str(output)]) == 2
    assert capsys.readouterr().err == (
        f"{used}: choose another --output, pass --overwrite to replace it once this run succeeds, or --resumable to "
        "continue a resumable run in it.\n"
    )
    assert _folder(output) == _folder(old)
