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


@pytest.fixture(params=["gcs_server", "s3_server"])
def store(request, monkeypatch) -> ObjectStore:
    """Each object store server in turn, which this process and the commands it starts reach during the test."""
    server = request.getfixturevalue(request.param)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return server


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


def _run(store: ObjectStore | None, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``beamtrove *args`` in a new process that reaches ``store``."""
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", *args],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(store.env if store else {}), **(env or {})},
    )  # fmt: skip


def _files(store: ObjectStore | None, root: str | pathlib.Path) -> dict[str, bytes]:
    """Every file under ``root`` (on ``store``, or local), by its name below ``root``, with its bytes."""
    if store is None:
        root = pathlib.Path(root)
        return {str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file()}
    with store.environment():
        fs, path = filesystem(str(root))
        found = fs.find(path)
        return {name[len(path) + 1 :]: fs.cat_file(name) for name in found}


def _seen(files: dict[str, bytes], input_root: str = "") -> dict[str, object]:
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


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
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
        for command in (
            prepare,
            ["elastic", "worker", "--job-dir", s3_job],
            ["elastic", "status", "--job-dir", s3_job],
        ):
            refused = beamtrove_here(*command)
            assert (refused.returncode, refused.stderr.strip().splitlines()) == (2, [refusal]), command
    assert list(tmp_path.iterdir()) == []
    assert _files(gcs_server, gs_output.rsplit("/", 1)[0]) == {}
    assert _files(s3_server, s3_job.rsplit("/", 1)[0]) == {}


# --- one run owns an output folder at a time, on a store as on a disk ---


def _convert_args(inputs, output: str, *extra: str) -> list[str]:
    return ["run", "convert", "--input", str(inputs), "--input_format", "jsonl", "--output", output,
            "--progress_interval", "0", *extra]  # fmt: skip


def test_a_second_run_into_an_output_in_use_on_a_store_is_refused_naming_the_owner(review_jsonl, store):
    output = f"{store.bucket()}/out"
    first = subprocess.Popen(
        [sys.executable, "-m", "beamtrove", *_convert_args(review_jsonl / "reviews-1.jsonl", output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )  # fmt: skip
    fs, lock = filesystem(f"{output}/.beamtrove-lock/owner.json")
    try:
        wait_for(lambda: first.poll() is not None or fs.exists(lock), what="the first run's lock")
        assert first.poll() is None, first.communicate()
        # Held still while the second runs: the two runs overlap whatever the machine's load.
        os.kill(first.pid, signal.SIGSTOP)
        claim = json.loads(fs.cat_file(lock))
        second = _run(store, *_convert_args(review_jsonl, output, "--overwrite"))
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
    assert sorted(_seen(_files(store, output))) == ["dead_letters/part-00000.jsonl", "part-00000.jsonl.gz",
                                                     "stats.json"]  # fmt: skip
    assert not any(name.startswith(".beamtrove") for name in _files(store, output))


# --- fineweb from a store to the store, as over local files ---


@pytest.fixture(scope="module")
def fineweb_local(data_dir, tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """Two real WARC files (54 pages, 15 of them kept) and fineweb's output over them: (their folder, the output)."""
    folder = tmp_path_factory.mktemp("fineweb-stores")
    warcs = folder / "warcs"
    warcs.mkdir()
    for name in ("cc-main-2020-34_resiliparse_warcfile.warc.gz", "dolma_wget_sample-0000.warc.gz"):
        shutil.copy(require(data_dir / "warc" / name), warcs / name)
    _ok(
        _run(None, "run", "fineweb", "--input", str(warcs), "--output", str(folder / "out"), "--progress_interval", "0")
    )
    return warcs, folder / "out"


@pytest.mark.slow
def test_fineweb_from_a_store_into_the_store_keeps_the_documents_of_the_local_run(fineweb_local, store):
    warcs, local = fineweb_local
    bucket = store.bucket()
    store.upload(warcs, f"{bucket}/warcs")
    output = f"{bucket}/out"
    done = _ok(_run(store, "run", "fineweb", "--input", f"{bucket}/warcs", "--output", output, "--progress_interval",
                    "0"))  # fmt: skip
    assert done.stdout.strip().splitlines()[-1].startswith("DONE in ")
    on_store, here = _seen(_files(store, output), f"{bucket}/warcs"), _seen(_files(None, local), str(warcs))
    assert on_store == here
    stats = json.loads(_files(store, output)["stats.json"])
    documents = _files(store, f"{output}/documents")["part-00000.jsonl.gz"]
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
    assert _files(store, output)["report.html"].startswith(b"<!DOCTYPE html>")
