"""Runs whose inputs and outputs are on object stores, each a real server in its own process (tests/servers.py).

Each run is the ``beamtrove`` command in a process of its own, as a user runs it, compared with the same run over
local files.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from beamtrove.fs import filesystem, is_hidden
from tests.conftest import beamtrove_here, require, wait_for
from tests.servers import ObjectStore

_RACER = """
import sys
from beamtrove.execution.output_lock import OutputInUse, lock_output
from beamtrove.fs import filesystem

filesystem(sys.argv[1])  # connected before the race starts
print("ready", flush=True)
sys.stdin.readline()
try:
    lock_output(sys.argv[1])
    print("won", flush=True)
except OutputInUse as refused:
    print("refused", refused, flush=True)
sys.stdin.readline()  # the winner holds the lock until both have tried
"""


def test_two_processes_racing_for_the_lock_of_an_output_on_a_store_one_takes_it(store):
    output = f"{store.bucket()}/out"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, output],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        assert [racer.stdout.readline() for racer in racers] == ["ready\n", "ready\n"]
        for racer in racers:
            racer.stdin.write("go\n")
            racer.stdin.flush()
        said = [racer.stdout.readline() for racer in racers]
    finally:
        for racer in racers:
            racer.communicate("done\n", timeout=60)
    assert sorted(said)[1] == "won\n", said
    winner = racers[said.index("won\n")]
    assert sorted(said)[0].startswith(
        f"refused --output {output} is in use by another run (host {socket.gethostname()}, pid {winner.pid}, started "
    ), said
    assert [racer.returncode for racer in racers] == [0, 0]


def command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``beamtrove *args`` in a new process, which reaches the test's store (see :func:`store`)."""
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", *args],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def files_in(store: ObjectStore | None, root: str | pathlib.Path) -> dict[str, bytes]:
    """Every file under ``root`` (on ``store``, or local), by its name below ``root``, with its bytes."""
    if store is None:
        root = pathlib.Path(root)
        return {str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file()}
    with store.environment():
        fs, path = filesystem(str(root))
        fs.invalidate_cache()  # other processes wrote since this one last listed
        found = fs.find(path)
        return {name[len(path) + 1 :]: fs.cat_file(name) for name in found}


def seen(files: dict[str, bytes], input_root: str = "") -> dict[str, object]:
    """What a reader of a run folder sees: its files not hidden, gzip ones decompressed, the counters of its stats.

    ``input_root``, the folder the run read, is cut from the paths of the inputs documents name.
    """
    seen: dict[str, object] = {}
    for name, stored in sorted(files.items()):
        if is_hidden(name) or name == "report.html":  # the report's figures show the seconds the run took
            continue
        if name == "stats.json":
            # The bytes a writer wrote are those of its gzip files, whose size depends on the input paths.
            steps = json.loads(stored)["steps"].items()
            seen[name] = {step: {**entry["counters"], "bytes": None} for step, entry in steps}
            continue
        data = gzip.decompress(stored) if name.endswith(".gz") else stored
        if input_root:
            data = data.replace(json.dumps(input_root)[1:-1].encode(), b"INPUT")
        seen[name] = data
    return seen


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# --- job directories need a POSIX file system: refused before anything is made ---


def test_a_job_directory_on_an_object_store_is_refused_in_one_line_before_anything_is_made(
    review_jsonl, gcs_server, s3_server, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # where a job directory taken for a local path, gs:/..., would be made
    gs_output, s3_job = f"{gcs_server.bucket()}/dedup", f"{s3_server.bucket()}/job"
    with gcs_server.environment():
        staged = beamtrove_here("run", "dedup", "--input", str(review_jsonl), "--output", gs_output, "--staged")
    assert staged.returncode == 2
    assert staged.stderr.strip().splitlines() == [
        f"beamtrove: error: --output {gs_output}, where --staged keeps its job directory, is on an object store, "
        "and a job directory needs a POSIX file system every worker shares (a local disk, NFS, Lustre) for its "
        "locks, links and renames: give an --output on one, or drop --staged to run the pipeline in one piece, "
        "which writes to the object store."
    ]
    refusal = (
        f"beamtrove: error: --job-dir {s3_job} is on an object store, and a job directory needs a POSIX file "
        "system every worker shares (a local disk, NFS, Lustre) for its locks, links and renames: put it on one; "
        "the inputs may stay on the object store."
    )
    with s3_server.environment():
        prepare = ["elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", s3_job,
                   "--num-shards", "2"]  # fmt: skip
        for args in (
            prepare,
            ["elastic", "worker", "--job-dir", s3_job],
            ["elastic", "status", "--job-dir", s3_job],
        ):
            refused = beamtrove_here(*args)
            assert (refused.returncode, refused.stderr.strip().splitlines()) == (2, [refusal]), args
    assert list(tmp_path.iterdir()) == []
    assert files_in(gcs_server, gs_output.rsplit("/", 1)[0]) == {}
    assert files_in(s3_server, s3_job.rsplit("/", 1)[0]) == {}


# --- one run owns an output folder at a time, on a store as on a disk ---


def convert_args(inputs, output: str, *extra: str) -> list[str]:
    return ["run", "convert", "--input", str(inputs), "--input_format", "jsonl", "--output", output,
            "--progress_interval", "0", *extra]  # fmt: skip


# The owner named on GCS is a slow test: the racing claims above show the lock exclusive on both stores.
@pytest.mark.slow
@pytest.mark.parametrize("store", [pytest.param("gcs_server", marks=pytest.mark.slow), "s3_server"], indirect=True)
def test_a_second_run_into_an_output_in_use_on_a_store_is_refused_naming_the_owner(review_jsonl, store):
    output = f"{store.bucket()}/out"
    first = subprocess.Popen(
        [sys.executable, "-m", "beamtrove", *convert_args(review_jsonl / "reviews-1.jsonl", output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )  # fmt: skip
    fs, lock = filesystem(f"{output}/.beamtrove-lock/owner.json")
    try:
        wait_for(lambda: first.poll() is not None or fs.exists(lock), what="the first run's lock")
        assert first.poll() is None, first.communicate()
        # Held still while the second runs: the two runs overlap whatever the machine's load.
        os.kill(first.pid, signal.SIGSTOP)
        claim = json.loads(fs.cat_file(lock))
        second = command(*convert_args(review_jsonl, output, "--overwrite"))
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"beamtrove: error: --output {output} is in use by another run (host {socket.gethostname()}, pid "
        f"{first.pid}, started {claim['started']}): wait until it ends or choose another --output; its lock "
        f"{output}/.beamtrove-lock is taken over once that run is gone (120 s without heartbeat)."
    ]
    # The first run's output, and no lock left.
    assert sorted(seen(files_in(store, output))) == ["dead_letters/part-00000.jsonl", "part-00000.jsonl.gz",
                                                     "stats.json"]  # fmt: skip
    assert not any(name.startswith(".beamtrove") for name in files_in(store, output))


# --- fineweb from a store to the store, as over local files ---


@pytest.fixture(scope="module")
def fineweb_local(data_dir, tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """Two real WARC files (54 pages, 15 of them kept) and fineweb's output over them: (their folder, the output)."""
    folder = tmp_path_factory.mktemp("fineweb-stores")
    warcs = folder / "warcs"
    warcs.mkdir()
    for name in ("cc-main-2020-34_resiliparse_warcfile.warc.gz", "dolma_wget_sample-0000.warc.gz"):
        shutil.copy(require(data_dir / "warc" / name), warcs / name)
    ok(command("run", "fineweb", "--input", str(warcs), "--output", str(folder / "out"), "--progress_interval", "0"))
    return warcs, folder / "out"


@pytest.mark.slow
def test_fineweb_from_a_store_into_the_store_keeps_the_documents_of_the_local_run(fineweb_local, store):
    warcs, local = fineweb_local
    bucket = store.bucket()
    store.upload(warcs, f"{bucket}/warcs")
    output = f"{bucket}/out"
    done = ok(command("run", "fineweb", "--input", f"{bucket}/warcs", "--output", output, "--progress_interval",
                    "0"))  # fmt: skip
    assert done.stdout.strip().splitlines()[-1].startswith("DONE in ")
    on_store, here = (
        seen(files_in(store, output), f"{bucket}/warcs"),
        seen(files_in(None, local), str(warcs)),
    )
    assert on_store == here
    stats = json.loads(files_in(store, output)["stats.json"])
    documents = files_in(store, f"{output}/documents")["part-00000.jsonl.gz"]
    assert stats["steps"]["write_documents"]["counters"]["bytes"] == len(documents)
    kept = [json.loads(line) for line in on_store["documents/part-00000.jsonl.gz"].splitlines()]
    assert len(kept) == 15 and all(row["metadata"]["file_path"].startswith("INPUT/") for row in kept)
    # The commands that read a run folder read it on the store.
    stats = beamtrove_here("stats", output)
    shown = beamtrove_here("inspect", output, "--json", "--limit", "3")
    report = beamtrove_here("report", output)
    assert stats.returncode == shown.returncode == report.returncode == 0, stats.stderr + shown.stderr + report.stderr
    # The same table, but for the seconds each step took and the bytes of the gzip files written.
    tables = [stats.stdout, beamtrove_here("stats", str(local)).stdout]
    rows = [
        [line.split()[:3] for line in table.splitlines() if not line.strip().startswith("bytes:")] for table in tables
    ]
    assert rows[0] == rows[1]
    assert "write_documents 15 15" in " ".join(stats.stdout.split())
    assert [json.loads(line)["id"] for line in shown.stdout.splitlines()] == [row["id"] for row in kept[:3]]
    assert files_in(store, output)["report.html"].startswith(b"<!DOCTYPE html>")


# --- an overwrite's publish stopped at each of its steps on a store, then the next command ---


@pytest.fixture(scope="module")
def publish_runs(review_jsonl, tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """The old output (every review) and the new one (one input file) of an overwrite, made locally."""
    folder = tmp_path_factory.mktemp("store-publish")
    old = beamtrove_here(*convert_args(review_jsonl, str(folder / "old")))
    new = beamtrove_here(*convert_args(review_jsonl / "reviews-1.jsonl", str(folder / "new")))
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    return folder / "old", folder / "new"


_NAMES = ("dead_letters", "part-00000.jsonl.gz", "report.html", "stats.json")
# Every kind of step of the publish, for a folder (dead_letters) and a file (stats.json): the other names take the
# same steps (tests/execution/test_output.py stops a publish on a local disk at every step of every name).
_PUBLISH_STEPS = [
    "sealing",
    "sealed",
    *(f"{step} {name}{noted}" for step in ("moved_aside", "moved_in") for name in ("dead_letters", "stats.json")
      for noted in ("", " noted")),
    "published",
]  # fmt: skip


@pytest.mark.slow
def test_an_overwrite_on_a_store_stopped_at_each_kind_of_step_of_its_publish_is_finished_or_undone_by_the_next(
    review_jsonl, publish_runs, store
):
    old, new = publish_runs
    assert sorted(seen(files_in(None, old))) == sorted(seen(files_in(None, new))) == [
        "dead_letters/part-00000.jsonl", "part-00000.jsonl.gz", "stats.json",
    ]  # fmt: skip
    assert seen(files_in(None, old)) != seen(files_in(None, new))
    bucket = store.bucket()
    for number, step in enumerate(_PUBLISH_STEPS):
        output = f"{bucket}/out-{number}"
        store.upload(old, output)
        stopped = command(
            *convert_args(review_jsonl / "reviews-1.jsonl", output, "--overwrite"),
            env={"BEAMTROVE_TEST_PUBLISH_STOP_AT": step},
        )  # fmt: skip
        assert stopped.returncode == -signal.SIGKILL, (step, stopped.stderr[-2000:])
        # The next command into the folder, even one refused for it, finishes or undoes the publish, and says which.
        following = beamtrove_here(*convert_args(review_jsonl / "reviews-1.jsonl", output))
        assert following.returncode == 2, step
        assert "already holds dead_letters, part-00000.jsonl.gz, report.html, stats.json" in following.stderr, step
        if step == "sealing":
            assert f"{output}: removed what a run that did not finish had staged" in following.stderr, step
            assert seen(files_in(store, output)) == seen(files_in(None, old)), step
        else:
            assert f"{output}: finished publishing the outputs of a run stopped while publishing" in following.stderr
            assert seen(files_in(store, output)) == seen(files_in(None, new)), step
        assert sorted({name.split("/")[0] for name in files_in(store, output)}) == sorted(_NAMES), step


# --- a resumable rerun skips the inputs it finished ---


def _document_lines(files: dict[str, bytes], input_root: str) -> list[bytes]:
    return sorted(
        line
        for name, data in seen(files, input_root).items()
        if name.startswith("documents/")
        for line in data.splitlines()
    )


@pytest.fixture(scope="module")
def local_resumable(fineweb_local, tmp_path_factory) -> list[bytes]:
    """The documents of a resumable run over both WARC files on a local disk, which each store's must equal."""
    warcs, _ = fineweb_local
    output = tmp_path_factory.mktemp("resumable-local") / "out"
    ok(command("run", "fineweb", "--input", str(warcs), "--output", str(output), "--resumable", "--progress_interval",
               "0"))  # fmt: skip
    return _document_lines(files_in(None, output), str(warcs))


@pytest.mark.slow
def test_a_resumable_rerun_on_a_store_skips_the_inputs_it_finished(fineweb_local, local_resumable, store):
    warcs, _ = fineweb_local
    bucket = store.bucket()
    names = sorted(path.name for path in warcs.iterdir())
    store.upload(warcs / names[0], f"{bucket}/warcs/{names[0]}")
    output = f"{bucket}/out"
    resumable = ["run", "fineweb", "--input", f"{bucket}/warcs", "--output", output, "--resumable",
                 "--progress_interval", "0"]  # fmt: skip
    ok(command(*resumable))
    first = files_in(store, output)
    store.upload(warcs / names[1], f"{bucket}/warcs/{names[1]}")
    again = ok(command(*resumable))
    assert f"resuming {output}: 1 of 2 inputs were completed before and are skipped" in again.stderr
    then = files_in(store, output)
    # What the first run wrote for its input is as it was; the second input's outputs joined it.
    written_first = {name: data for name, data in first.items() if names[0].split(".")[0] in name}
    assert written_first and all(then[name] == data for name, data in written_first.items())
    assert len(then) > len(first)
    # The same as a resumable run over both inputs on a local disk, document for document.
    assert _document_lines(then, f"{bucket}/warcs") == local_resumable
    assert len(local_resumable) == 15
    rerun = ok(command(*resumable))
    assert f"resuming {output}: 2 of 2 inputs were completed before and are skipped" in rerun.stderr
