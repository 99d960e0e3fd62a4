"""Inputs and process helpers of the elastic tests: real reviews as JSONL, real pages as WARC."""

from __future__ import annotations

import gzip
import json
import pathlib
import subprocess
import sys

import pytest

from beamtrove.execution.jobs import JobDir
from beamtrove.fs import file_sha256
from tests.conftest import DATA, beamtrove, jsonl_lines, make_warc_set, require

LID_MODEL = DATA / "models" / "lid176" / "lid.176.ftz"
BLOCKLIST = DATA / "blocklists" / "ut1"


@pytest.fixture
def shard_states_job(shard_states_job) -> JobDir:
    """The hand-made job of every shard state, its done shard with a real output (a done record without one is
    damaged)."""
    give_real_output(shard_states_job, "shard-00003")
    return shard_states_job


def give_real_output(job: JobDir, shard_id: str) -> pathlib.Path:
    """Writes the documents a hand-made done record counts into an attempt's output, and records it as a worker does.

    Returns:
        The output file.
    """
    done = json.loads(job.done_path(shard_id).read_text())
    attempt = job.attempts_dir(shard_id) / f"01-{done['host']}-{done['pid']}"
    attempt.mkdir(parents=True)
    output = attempt / "documents.jsonl.gz"
    with gzip.open(output, "wt") as out:
        out.writelines(
            json.dumps({"id": f"{shard_id}/{k}", "text": f"document {k}"}) + "\n" for k in range(done["records"])
        )
    stat = output.stat()
    done.update(
        output=str(output.relative_to(job.path)),
        bytes=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        sha256=file_sha256(output),
    )
    job.done_path(shard_id).write_text(json.dumps(done))
    return output


@pytest.fixture(scope="session")
def single_convert(review_jsonl, tmp_path_factory) -> list[bytes]:
    """The documents of one ``beamtrove run convert`` over all the reviews, as sorted JSONL lines."""
    return single_run_lines("convert", str(review_jsonl / "*.jsonl"), tmp_path_factory.mktemp("single"))


@pytest.fixture(scope="session")
def warc_set(tmp_path_factory) -> pathlib.Path:
    """make_warc.py: 150 real responses in 6 WARC files."""
    directory = tmp_path_factory.mktemp("warcs")
    make_warc_set(directory, "--records", "150", "--files", "6", "--seed", "3")
    return directory


def fineweb_assets() -> list[str]:
    return ["--lid_model", str(require(LID_MODEL)), "--url_blocklist", str(require(BLOCKLIST))]


def start_worker(job: pathlib.Path, host: str, *args: str) -> subprocess.Popen:
    """Starts ``beamtrove elastic worker`` in a new process, its output in ``<job>/../worker-<host>.log``."""
    log = open(job.parent / f"worker-{host}.log", "ab")  # noqa: SIM115 - the child process owns it
    return subprocess.Popen(
        [sys.executable, "-m", "beamtrove", "elastic", "worker", "--job-dir", str(job), "--host", host, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def single_run_lines(pipeline: str, inputs: str, output: pathlib.Path, *args: str) -> list[bytes]:
    """The documents of one ``beamtrove run`` over the whole input, as sorted JSONL lines."""
    result = beamtrove("run", pipeline, "--input", inputs, "--output", str(output), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    documents = output / "documents" if (output / "documents").is_dir() else output
    return sorted(jsonl_lines(sorted(documents.glob("*.jsonl.gz"))))


def process_state(pid: int) -> str | None:
    """The kernel's state letter of ``pid`` (``Z`` for a zombie), None when it is gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None
