"""The output folder contract, tried as a user would break it: reruns, overlaps, hostile paths, interrupts."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from beamtrove.cli import main
from tests.conftest import jsonl_rows, make_warc_set, require

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


def test_an_overwriting_dedup_run_leaves_nothing_of_the_steps_it_no_longer_runs(review_jsonl, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(output)]
    assert main([*argv, "--dedup", "minhash", "--cluster_map"]) == 0
    assert (output / "clusters" / "minhash").is_dir()
    assert main([*argv, "--dedup", "exact", "--overwrite"]) == 0
    assert not (output / "clusters").exists() and not (output / "excluded" / "minhash").exists()
    assert len(jsonl_rows(output / "documents")) == 600


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
        assert "Traceback" not in err.decode()
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
    for attempt in range(5):
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
            json.loads((output / "stats.json").read_text())["steps"]["WriteDocuments"]["counters"]
            == json.loads((reference / kind / "stats.json").read_text())["steps"]["WriteDocuments"]["counters"]
        )


def test_ctrl_c_is_one_line_and_exit_130_with_extraction_processes_running(data_dir, tmp_path):
    # A terminal's Ctrl-C reaches the whole process group, the extraction processes included.
    output = tmp_path / "out"
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", str(require(data_dir / "warc")),
               "--output", str(output)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    while not (output / ".beamtrove-staging").exists():
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    time.sleep(3)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert err.decode().strip().splitlines()[-1] == (
        f"beamtrove: interrupted: nothing was written to {output}; it is as it was before the run."
    )
    # The run made the folder, and took it away again.
    assert not output.exists()
