"""Reading a run's output folder: which folders are one, each kind of record, the writers' formats, lazy reading."""

from __future__ import annotations

import ctypes
import gzip
import itertools
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from beamtrove import fs
from beamtrove.dead_letter import DeadLetter
from beamtrove.fs import is_hidden
from beamtrove.run_output import OutputRecord, RunOutput
from beamtrove.transforms.dedup.keep import ClusterMember
from tests.conftest import beamtrove_here


def _rows(movie_reviews, start: int, count: int, **metadata) -> list[dict]:
    """Real reviews laid out as beamtrove's writers lay documents out."""
    names = list(movie_reviews)[start : start + count]
    return [{"text": movie_reviews[name], "id": name, "metadata": {"review": name, **metadata}} for name in names]


def _write(path: pathlib.Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)


def _ids(records) -> list[str]:
    return [record.document.id for record in records]


@pytest.fixture
def run(movie_reviews, tmp_path) -> pathlib.Path:
    """A run's output folder: documents in the three forms writers write, two steps' exclusions, dead letters."""
    out = tmp_path / "run"
    _write(out / "documents" / "part-00000.jsonl.gz", _rows(movie_reviews, 0, 3))
    pq.write_table(pa.Table.from_pylist(_rows(movie_reviews, 3, 2)), out / "documents" / "part-00001.parquet")
    _write(out / "documents" / "part-00002.jsonl.zst", _rows(movie_reviews, 5, 1))
    _write(out / "documents" / ".part-00003.jsonl.gz.tmp", _rows(movie_reviews, 6, 1))
    _write(
        out / "excluded" / "gopher_quality" / "part-00000.jsonl.gz", _rows(movie_reviews, 10, 2, filter_reason="short")
    )
    _write(out / "excluded" / "c4_quality" / "part-00000.jsonl.gz", _rows(movie_reviews, 12, 1, filter_reason="curly"))
    letter = DeadLetter("read", "malformed_json", "unexpected end", file="a.jsonl", line=3, excerpt='{"text": "cut')
    _write(out / "dead_letters" / "part-00000.jsonl", [letter.to_row()])
    _write(out / "clusters" / "minhash" / "part-00000.jsonl.gz", [{"id": "b", "kept_id": "a", "cluster_size": 2}])
    (out / "stats.json").write_text(json.dumps({"pipeline": "fineweb", "steps": {"read": {"counters": {"in": 7}}}}))
    return out


def test_a_folder_holding_stats_or_a_resume_record_is_a_run_output(run, tmp_path):
    assert RunOutput.at(str(run)).folder == str(run)
    resumable = tmp_path / "resumable"
    resumable.mkdir()
    (resumable / "_resume.json").write_text("{}")
    assert RunOutput.at(str(resumable)) is not None
    for other in (run / "documents", run / "stats.json", tmp_path / "missing", f"{tmp_path}/*", " "):
        assert RunOutput.at(str(other)) is None, other
    assert RunOutput.at(str(run)).stats()["pipeline"] == "fineweb"


def test_documents_are_read_in_file_name_order_in_every_format_writers_write(run, movie_reviews):
    documents = RunOutput(str(run)).documents()
    assert [file.name for file in documents.files] == [
        "part-00000.jsonl.gz",
        "part-00001.parquet",
        "part-00002.jsonl.zst",
    ]
    records = list(documents)
    assert _ids(records) == list(movie_reviews)[:6]
    assert all(record.step is None and record.reason is None for record in records)
    assert [record.document.text for record in records] == [movie_reviews[name] for name in list(movie_reviews)[:6]]
    assert records[3].document.metadata["review"] == list(movie_reviews)[3]
    # Each iteration reads the files anew.
    assert _ids(documents) == _ids(records)


def test_a_run_writing_documents_into_its_folder_is_read_without_what_it_set_aside(run):
    for part in (run / "documents").iterdir():
        part.rename(run / part.name)
    (run / "documents").rmdir()
    output = RunOutput(str(run))
    assert output.documents_folder == str(run)
    assert [file.name for file in output.documents().files] == [
        "part-00000.jsonl.gz",
        "part-00001.parquet",
        "part-00002.jsonl.zst",
    ]
    for part in list(run.glob("part-*")):
        part.unlink()
    assert output.documents().files == () and list(output.documents()) == []


def test_excluded_documents_carry_their_step_and_reason_step_after_step(run, movie_reviews):
    output = RunOutput(str(run))
    assert output.excluded_steps() == ["c4_quality", "gopher_quality"]
    names = list(movie_reviews)
    assert [(r.document.id, r.step, r.reason) for r in output.excluded()] == [
        (names[12], "c4_quality", "curly"),
        (names[10], "gopher_quality", "short"),
        (names[11], "gopher_quality", "short"),
    ]
    assert [r.step for r in output.excluded(["gopher_quality", "c4_quality"])] == ["gopher_quality"] * 2 + [
        "c4_quality"
    ]
    assert _ids(output.excluded("c4_quality")) == [names[12]]
    assert list(output.excluded("no_such_step")) == []


def test_dead_letters_are_records_with_their_reason_step_and_excerpt(run):
    (record,) = RunOutput(str(run)).dead_letters()
    assert (record.step, record.reason, record.document.text) == ("read", "malformed_json", '{"text": "cut')
    assert record.document.metadata["file"] == "a.jsonl" and record.document.metadata["line"] == 3


def test_a_cluster_map_is_read_as_its_members(run):
    output = RunOutput(str(run))
    assert output.cluster_steps() == ["minhash"]
    assert list(output.clusters("minhash")) == [ClusterMember("b", "a", 2)]


def test_a_line_or_file_that_cannot_be_read_is_a_dead_letter_in_its_place(run, movie_reviews):
    folder = run / "excluded" / "gopher_quality"
    rows = _rows(movie_reviews, 20, 2, filter_reason="short")
    (folder / "part-00001.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n" + json.dumps(rows[1]) + "\n")
    (folder / "part-00002.jsonl.gz").write_bytes(b"not gzip")
    _write(folder / "part-00003.jsonl.gz", _rows(movie_reviews, 22, 1, filter_reason="short"))
    outcomes = list(RunOutput(str(run)).excluded("gopher_quality"))
    kinds = [type(outcome).__name__ for outcome in outcomes]
    assert kinds == ["OutputRecord"] * 3 + ["DeadLetter", "OutputRecord", "DeadLetter", "OutputRecord"]
    assert (outcomes[3].reason, outcomes[3].line) == ("malformed_json", 2)
    assert outcomes[5].file == str(folder / "part-00002.jsonl.gz")
    assert outcomes[-1] == OutputRecord(outcomes[-1].document, "gopher_quality", "short")


def test_a_file_is_opened_only_once_the_records_before_it_were_taken(run, monkeypatch):
    opened = []
    original = fs.open_at

    def recording(url, *args, **kwargs):
        opened.append(pathlib.Path(url).name)
        return original(url, *args, **kwargs)

    monkeypatch.setattr(fs, "open_at", recording)
    records = iter(RunOutput(str(run)).documents())
    assert opened == []
    list(itertools.islice(records, 3))
    assert opened == ["part-00000.jsonl.gz"]
    next(records)
    assert opened == ["part-00000.jsonl.gz", "part-00001.parquet"]


# --- a run folder a publish was stopped in, given to the commands that read it ---

_FINISHED = "finished publishing the outputs of a run stopped while publishing them"


def _convert(inputs: pathlib.Path, output: pathlib.Path, *extra: str) -> list[str]:
    return ["run", "convert", "--input", str(inputs), "--input_format", "jsonl", "--output", str(output),
            "--progress_interval", "0", *extra]  # fmt: skip


def _stopped_overwrite(inputs: pathlib.Path, output: pathlib.Path, step: str, signal_name: str) -> subprocess.Popen:
    """A ``beamtrove run --overwrite`` into ``output`` that stops itself with ``signal_name`` at ``step`` of its
    publish (the test hook of :mod:`beamtrove.execution.output_publish`)."""
    stop = {"BEAMTROVE_TEST_PUBLISH_STOP_AT": step, "BEAMTROVE_TEST_PUBLISH_STOP_WITH": signal_name}
    return subprocess.Popen(
        [sys.executable, "-m", "beamtrove", *_convert(inputs, output, "--overwrite")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **stop},
    )  # fmt: skip


def _data(folder: pathlib.Path) -> dict[str, object]:
    """What a reader sees of a folder: its files that are not bookkeeping, with their bytes but for the run's times
    (the steps' counters of its stats; its report drawn)."""
    seen: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_file() and not is_hidden(name):
            seen[name] = path.read_bytes()
    if "stats.json" in seen:
        seen["stats.json"] = {
            step: entry["counters"] for step, entry in json.loads(seen["stats.json"])["steps"].items()
        }
    if "report.html" in seen:
        seen["report.html"] = "drawn"
    return seen


@pytest.fixture(scope="module")
def stopped(review_jsonl, tmp_path_factory) -> dict[str, pathlib.Path]:
    """Run folders a publish was stopped in, and the outputs of the stopped run had it not been stopped.

    ``killed``: SIGKILL once the old documents were moved aside (the old stats.json is still in place);
    ``interrupted``: Ctrl-C once the new documents were moved in (no stats.json at all); ``new``: the outputs
    of the same run, whole.
    """
    folder = tmp_path_factory.mktemp("stopped")
    assert beamtrove_here(*_convert(review_jsonl, folder / "old")).returncode == 0
    assert beamtrove_here(*_convert(review_jsonl / "reviews-1.jsonl", folder / "new")).returncode == 0
    steps = {"killed": ("moved_aside part-00000.jsonl.gz noted", "SIGKILL"),
             "interrupted": ("moved_in part-00000.jsonl.gz noted", "SIGINT")}  # fmt: skip
    runs = {}
    for name, (step, signal_name) in steps.items():
        shutil.copytree(folder / "old", folder / name)
        runs[name] = _stopped_overwrite(review_jsonl / "reviews-1.jsonl", folder / name, step, signal_name)
    assert runs["killed"].wait(timeout=600) == -signal.SIGKILL, runs["killed"].stderr.read()
    assert runs["interrupted"].wait(timeout=600) == 130, runs["interrupted"].stderr.read()
    assert sorted(path.name for path in (folder / "killed").iterdir()) == [
        ".beamtrove-lock", ".beamtrove-staging", "report.html", "stats.json",
    ]  # fmt: skip
    assert sorted(path.name for path in (folder / "interrupted").iterdir()) == [
        ".beamtrove-staging", "dead_letters", "part-00000.jsonl.gz",
    ]  # fmt: skip
    return {name: folder / name for name in ("old", "new", "killed", "interrupted")}


@pytest.mark.parametrize("state", ["killed", "interrupted"])
@pytest.mark.parametrize("command", ["stats", "report", "inspect", "run"])
def test_a_command_reading_a_folder_a_publish_was_stopped_in_finishes_it_first(stopped, tmp_path, state, command):
    folder = tmp_path / "out"
    shutil.copytree(stopped[state], folder)
    argv = {
        "stats": ["stats", str(folder)],
        "report": ["report", str(folder)],
        "inspect": ["inspect", str(folder), "--limit", "1", "--json"],
        "run": _convert(folder, tmp_path / "next"),
    }[command]
    done = beamtrove_here(*argv)
    assert done.returncode == 0, done.stderr
    assert f"WARNING beamtrove.execution.output_publish: {folder}: {_FINISHED} (" in done.stderr
    # What it read is the stopped run's outputs, whole, as they would be had it not been stopped.
    assert _data(folder) == _data(stopped["new"])
    assert not (folder / ".beamtrove-staging").exists() and not (folder / ".beamtrove-lock").exists()
    if command == "stats":
        assert done.stdout.startswith("step ") and "\nread                       201 " in done.stdout
    elif command == "inspect":
        (first,) = done.stdout.splitlines()
        assert json.loads(first)["id"] == "reviews-1.jsonl/0"
    elif command == "run":
        assert json.loads((tmp_path / "next" / "stats.json").read_text())["steps"]["read"]["counters"]["out"] == 200


def _frozen_mid_publish(review_jsonl, stopped, folder: pathlib.Path) -> subprocess.Popen:
    """An overwrite of a copy of the old output into ``folder``, stopped (state T) in the middle of its publish with
    its lock held: a live run, as one that is slow would be, or a suspended machine."""
    shutil.copytree(stopped["old"], folder)
    run = _stopped_overwrite(
        review_jsonl / "reviews-1.jsonl", folder, "moved_aside part-00000.jsonl.gz noted", "SIGSTOP"
    )
    while pathlib.Path(f"/proc/{run.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        if run.poll() is not None:
            pytest.fail(run.stderr.read().decode())
        time.sleep(0.05)
    return run


def test_a_command_reading_a_folder_a_live_run_is_publishing_into_says_so(review_jsonl, stopped, tmp_path):
    folder = tmp_path / "out"
    run = _frozen_mid_publish(review_jsonl, stopped, folder)
    try:
        claim = json.loads((folder / ".beamtrove-lock" / "owner.json").read_text())
        held = _data(folder)
        for argv in (["stats", str(folder)], ["report", str(folder)], ["inspect", str(folder)]):
            done = beamtrove_here(*argv)
            assert (done.returncode, done.stdout) == (2, ""), argv
            assert done.stderr.splitlines() == [
                f"beamtrove: error: {folder}: a publish into it is unfinished and a run holds the folder (host "
                f"{socket.gethostname()}, pid {run.pid}, started {claim['started']}): wait until that run ends, then "
                f"run this command again; its lock {folder}/.beamtrove-lock is taken over once that run is gone "
                "(120 s without heartbeat)."
            ]
        assert _data(folder) == held
    finally:
        run.send_signal(signal.SIGCONT)
    assert run.wait(timeout=600) == 0
    done = beamtrove_here("stats", str(folder))
    assert done.returncode == 0 and _FINISHED not in done.stderr
    assert _data(folder) == _data(stopped["new"])


def test_a_run_frozen_mid_publish_past_its_lock_timeout_leaves_the_publish_to_who_took_it_over(
    review_jsonl, stopped, tmp_path
):
    folder = tmp_path / "out"
    run = _frozen_mid_publish(review_jsonl, stopped, folder)
    try:
        # Frozen as a suspended machine is, past the lock's timeout: its heartbeat is as old as that.
        owner = folder / ".beamtrove-lock" / "owner.json"
        claim = json.loads(owner.read_text())
        renewed = claim["heartbeat"] - 600
        owner.write_text(json.dumps({**claim, "heartbeat": renewed}))
        os.utime(owner, (renewed, renewed))  # on a disk the file's time is the last renewal
        done = beamtrove_here("stats", str(folder))
        assert done.returncode == 0 and _FINISHED in done.stderr, done.stderr
        assert _data(folder) == _data(stopped["new"])
    finally:
        run.send_signal(signal.SIGCONT)
    # Woken up, the run moves nothing more: the names of its old outputs are those of its new ones by now.
    assert run.wait(timeout=600) == 0
    assert "another process took over this run's publish while it was stopped" in run.stderr.read().decode()
    assert _data(folder) == _data(stopped["new"])


def _without_write_access() -> None:
    """In a child process: file permissions hold for it even when it runs as root (no capability overrides them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        libc.prctl(24, capability, 0, 0, 0)  # PR_CAPBSET_DROP: gone from what the command it runs may have


def test_a_command_reading_a_read_only_folder_a_publish_was_stopped_in_names_what_finishes_it(stopped, tmp_path):
    folder = tmp_path / "out"
    shutil.copytree(stopped["killed"], folder)
    held = _data(folder)
    paths = [folder, *folder.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "beamtrove", "stats", str(folder)],
            capture_output=True, text=True, timeout=600, check=False, preexec_fn=_without_write_access,
        )  # fmt: skip
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"beamtrove: error: {folder}: a run was stopped while publishing its outputs into it, so it holds only part "
        f"of them, and the publish cannot be finished here (Permission denied): `beamtrove stats {folder}` where the "
        "folder can be written, or the next `beamtrove run` into it, finishes it."
    ]
    assert _data(folder) == held
    # Where it can be written, the command named finishes it.
    done = beamtrove_here("stats", str(folder))
    assert done.returncode == 0 and _FINISHED in done.stderr
    assert _data(folder) == _data(stopped["new"])


def test_a_folder_holding_only_an_unfinished_staged_run_says_the_same_command_goes_on(review_jsonl, tmp_path):
    folder = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(folder),
            "--dedup", "exact", "--staged", "--workers", "1", "--progress_interval", "0"]  # fmt: skip
    run = subprocess.Popen(
        [sys.executable, "-m", "beamtrove", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        while not (folder / ".beamtrove-job" / "manifest.json").exists():
            assert run.poll() is None, run.stderr.read()
            time.sleep(0.05)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and its workers, as the OOM killer or a lost node stops them
        run.wait(timeout=600)
    assert sorted(path.name for path in folder.iterdir()) == [".beamtrove-job", ".beamtrove-lock"]
    for reading in (["stats", str(folder)], ["report", str(folder)], ["inspect", str(folder)]):
        done = beamtrove_here(*reading)
        assert (done.returncode, done.stdout) == (2, ""), reading
        assert done.stderr.splitlines() == [
            f"beamtrove: error: {folder} holds no outputs yet: a --staged run into it has not finished (its tasks are "
            "in .beamtrove-job/): rerun the same command to go on from the tasks it did"
        ]
