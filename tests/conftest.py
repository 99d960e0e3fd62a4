"""Shared fixtures: the real data in ../shared beside the checkout."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gzip
import io
import json
import logging
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.execution.jobs import JobDir, prepare_job
from beamtrove.execution.jobs.jobdir import write_once
from beamtrove.metrics import collect_stats
from tests.cc_server import lay_out_common_crawl
from tests.lid_models import LabelledLines, label_lines, train_glotlid_style_model
from tests.servers import gcs_server, s3_server, store  # noqa: F401 (fixtures: object store servers)

SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"
MAKE_WARC = SHARED / "tools" / "make_warc.py"


def require(path: pathlib.Path) -> pathlib.Path:
    """Skips the test when a piece of ../shared is absent."""
    if not path.exists():
        pytest.skip(f"{path} is absent: beamtrove's tests read real data from ../shared beside the checkout")
    return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    return require(DATA)


def make_warc_set(out_dir: pathlib.Path, *args: str) -> list[dict]:
    """Runs make_warc.py into ``out_dir``; returns its manifest rows."""
    require(MAKE_WARC)
    subprocess.run([sys.executable, str(MAKE_WARC), str(out_dir), *args], check=True, capture_output=True)
    return [json.loads(line) for line in (out_dir / "manifest.jsonl").read_text().splitlines()]


# prctl's operation and the capability that lets root write where permissions forbid (linux/prctl.h, capability.h).
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE = 1
_CAP_SETPCAP = 8


def permissions_bind():
    """A subprocess ``preexec_fn`` under which folder permissions bind the child, as they bind every user but root.

    Root writes into read-only folders; the child drops that power from its bounding set, which leaves the command
    it execs without it. None when not root; skips the test where root cannot drop it.
    """
    if os.geteuid() != 0:
        return None
    status = pathlib.Path("/proc/self/status").read_text()
    effective = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    if not effective & (1 << _CAP_SETPCAP):
        pytest.skip("root without CAP_SETPCAP cannot start a process that read-only folders bind")

    def drop() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, 0, 0, 0)

    return drop


def child_processes(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    children = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            children.append(int(stat.parent.name))
    return children


@contextlib.contextmanager
def busy_processes(count: int):
    """Runs ``count`` processes that only burn CPU, and kills them when the block ends."""
    processes = []
    try:
        for _ in range(count):
            processes.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


@pytest.fixture(scope="session")
def faults_set(tmp_path_factory) -> tuple[pathlib.Path, list[dict]]:
    """A make_warc.py --faults set: 160 responses + 4 faults in 3 files, the last cut short."""
    out = tmp_path_factory.mktemp("faults")
    return out, make_warc_set(out, "--records", "160", "--files", "3", "--faults", "--seed", "7")


@pytest.fixture(scope="session")
def udhr_texts(data_dir) -> dict[str, str]:
    """The Universal Declaration of Human Rights in its 388 language files."""
    texts = {}
    with zipfile.ZipFile(require(data_dir / "text-corpora" / "nltk_data" / "udhr2.zip")) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith(".txt"):
                texts[name.rsplit("/", 1)[-1][: -len(".txt")]] = archive.read(name).decode("utf-8")
    return texts


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[pathlib.Path], None]
) -> pathlib.Path:
    """The folder ``name`` that ``make`` fills, made once per test session however many xdist workers need it.

    For a session fixture whose making takes seconds and gives the same files every time: the first worker to
    need it makes it in the session's base folder, which the workers share, holding a lock the others wait on.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    folder, made = shared / name, shared / f"{name}.made"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)  # from a worker that failed making it
            folder.mkdir()
            make(folder)
            made.touch()
    return folder


@pytest.fixture(scope="session")
def glotlid_model(udhr_texts, tmp_path_factory) -> pathlib.Path:
    """A fastText language-ID model labelled as GlotLID's are (``__label__deu_Latn``), trained on the UDHR with
    :func:`tests.lid_models.train_glotlid_style_model` (364 labels; the same model every session, in about 5 s)."""
    return (
        made_once(
            tmp_path_factory, "glotlid", lambda folder: train_glotlid_style_model(udhr_texts, folder / "model.bin")
        )
        / "model.bin"
    )


@pytest.fixture(scope="session")
def glotlid_lines(udhr_texts) -> dict[str, LabelledLines]:
    """The UDHR's lines by the label of :func:`glotlid_model` (``"deu_Latn"``): those it was trained on, and
    those held out of its training."""
    return label_lines(udhr_texts)


def zip_texts(path) -> dict[str, str]:
    """``{member name without folder and .txt: text}`` of an NLTK corpus zip.

    A few State of the Union files (Nixon's, 1954-Eisenhower) and inaugural/2005-Bush hold stray Big5
    punctuation bytes, which are decoded as U+FFFD.
    """
    with zipfile.ZipFile(require(path)) as archive:
        return {
            name.split("/", 1)[1][: -len(".txt")]: archive.read(name).decode("utf-8", "replace")
            for name in sorted(archive.namelist())
            if name.endswith(".txt")
        }


@pytest.fixture(scope="session")
def movie_reviews(data_dir) -> dict[str, str]:
    """The 2,000 NLTK movie reviews, keyed ``neg/cv000_29416`` and so on (lower-cased, pre-tokenized text)."""
    return zip_texts(data_dir / "text-corpora" / "nltk_data" / "movie_reviews.zip")


@pytest.fixture(scope="session")
def state_union(data_dir) -> dict[str, str]:
    """The 65 State of the Union addresses, keyed ``2006-GWBush`` and so on."""
    return zip_texts(data_dir / "text-corpora" / "nltk_data" / "state_union.zip")


@pytest.fixture(scope="session")
def inaugural(data_dir) -> dict[str, str]:
    """The 59 inaugural addresses, keyed ``1789-Washington`` and so on."""
    return zip_texts(data_dir / "text-corpora" / "nltk_data" / "inaugural.zip")


@pytest.fixture(scope="session")
def review_jsonl(movie_reviews, tmp_path_factory) -> pathlib.Path:
    """600 real movie reviews in 3 plain JSONL files, rows without ids, with blank lines and one malformed row."""
    directory = tmp_path_factory.mktemp("reviews")
    texts = list(movie_reviews.items())[:600]
    for number in range(3):
        lines = [json.dumps({"text": text, "review": name}) for name, text in texts[number * 200 : (number + 1) * 200]]
        lines[50:50] = [""] * 2
        if number == 1:
            lines[120:120] = ['{"text": "an unfinished row']
        (directory / f"reviews-{number}.jsonl").write_text("\n".join(lines) + "\n\n")
    return directory


def near_copy(text: str, fraction: float, seed: int) -> str:
    """``text`` with ``fraction`` of its words replaced by other words of the same text (as make_warc.py does)."""
    rng = random.Random(seed)
    words = text.split()
    return " ".join(rng.choice(words) if rng.random() < fraction else word for word in words)


@pytest.fixture(scope="session")
def reviews(movie_reviews) -> list[Document]:
    """200 real movie reviews, ids ``review-000`` and on."""
    texts = list(movie_reviews.values())[:200]
    return [Document(text, f"review-{number:03d}") for number, text in enumerate(texts)]


def run_and_collect(build) -> dict:
    """Runs ``build(pipeline)`` on a TestPipeline; returns the run's stats per step."""
    pipeline = TestPipeline()
    build(pipeline)
    result = pipeline.run()
    result.wait_until_finish()
    return collect_stats(result, pipeline)


def _differences(joined):
    doc_id, sides = joined
    first, second = list(sides["first"]), list(sides["second"])
    if first != second:
        yield doc_id, first, second


def assert_same_documents(first: beam.PCollection, second: beam.PCollection, label: str = "SameDocuments") -> None:
    """Asserts that two PCollections of documents hold exactly the same documents."""
    keyed = {
        "first": first | f"{label}KeyFirst" >> beam.Map(lambda d: (d.id, d)),
        "second": second | f"{label}KeySecond" >> beam.Map(lambda d: (d.id, d)),
    }
    differences = keyed | f"{label}Join" >> beam.CoGroupByKey() | f"{label}Diff" >> beam.FlatMap(_differences)
    assert_that(differences, equal_to([]), label=label)


def beamtrove(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs the ``beamtrove`` command in a new process."""
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def beamtrove_here(*args: str) -> subprocess.CompletedProcess:
    """Runs the ``beamtrove`` command through its own ``main`` in this process, its output captured.

    For the commands that run no pipeline, whose time in a new process is mostly the start of Python and Beam.
    """
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # As in a process of its own, the command sets up logging to its stderr, the captured one here.
    root.handlers.clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return subprocess.CompletedProcess(["beamtrove", *args], status, out.getvalue(), err.getvalue())


def wait_for(condition, timeout: float = 120, what: str = "condition"):
    """Polls ``condition()`` until it returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def jsonl_rows(directory: pathlib.Path) -> list[dict]:
    """The rows of the JSONL files in ``directory``, in file-name order (gzipped when their name ends in .gz)."""
    return [json.loads(line) for line in jsonl_lines(sorted(directory.glob("*.jsonl*")))]


def jsonl_lines(paths) -> list[bytes]:
    """Every line of the given JSONL files (gzipped when their name ends in .gz)."""
    lines = []
    for path in paths:
        with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as source:
            lines.extend(source)
    return lines


@pytest.fixture(scope="session")
def slurm():
    """Skips unless a Slurm cluster answers (``bash .ci/slurm-up`` starts a one-node one)."""
    if shutil.which("sbatch") is None or subprocess.run(["sinfo", "-h"], capture_output=True, check=False).returncode:
        pytest.skip("no Slurm cluster answers here: `bash .ci/slurm-up` starts a one-node one")


def run_worker_array(job: pathlib.Path, folder: pathlib.Path, tasks: int = 2) -> list[pathlib.Path]:
    """Runs ``beamtrove elastic slurm-template`` as a Slurm array of ``tasks`` workers on ``job``; their logs.

    The script and the array's logs go into ``folder``.
    """
    script = folder / "elastic-array.sbatch"
    script.write_text(beamtrove("elastic", "slurm-template").stdout)
    # The tasks run this interpreter's beamtrove, whatever is on the node's PATH.
    launcher = folder / "beamtrove"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m beamtrove "$@"\n')
    launcher.chmod(0o755)
    submitted = subprocess.run(
        ["sbatch", f"--array=0-{tasks - 1}", f"--export=ALL,JOB_DIR={job},BEAMTROVE={launcher}", str(script)],
        cwd=folder, capture_output=True, text=True, check=True,
    )  # fmt: skip
    job_id = re.search(r"Submitted batch job (\d+)", submitted.stdout).group(1)
    wait_for(lambda: slurm_job_finished(job_id), timeout=600, what=f"Slurm job {job_id}")
    return sorted(folder.glob(f"beamtrove-elastic-{job_id}_*.out"))


def slurm_job_finished(job_id: str) -> bool:
    """Whether Slurm no longer lists the job as pending or running."""
    # Once Slurm forgets a finished job, squeue calls its id invalid and prints nothing either.
    state = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, check=False)
    return not state.stdout.strip()


@pytest.fixture
def shard_states_job(review_jsonl, tmp_path):
    """An elastic job of five shards in every state by hand: running (a), stale (b), failed, done (c), pending."""
    prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 5, lock_timeout=60)
    job = JobDir(tmp_path / "job")
    job.try_lock("shard-00000", "a")
    stale = job.try_lock("shard-00001", "b")
    old = time.time() - 600
    os.utime(stale.path, (old, old))
    write_once(job.failed_path("shard-00002"), {"task": "shard-00002", "host": "b", "error": "exit code 1\nboom"})
    write_once(job.done_path("shard-00003"), {"task": "shard-00003", "host": "c", "pid": 7, "records": 120})
    return job


@pytest.fixture(scope="session")
def cc_dump(tmp_path_factory) -> tuple[pathlib.Path, list[str], list[dict]]:
    """A Common Crawl tree of dump CC-MAIN-TEST for tests/cc_server.py: 12 make_warc.py files, 48 responses.

    Returns the folder to serve, the WARC paths as its ``warc.paths.gz`` lists them (the i-th holds make_warc.py's
    ``part-0000i.warc.gz``), and make_warc.py's manifest rows.
    """
    warcs = tmp_path_factory.mktemp("cc-warcs")
    manifest = make_warc_set(warcs, "--records", "48", "--files", "12", "--seed", "11")
    root = tmp_path_factory.mktemp("cc-root")
    return root, lay_out_common_crawl(warcs, root), manifest
