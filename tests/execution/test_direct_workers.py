"""A plain ``beamtrove run`` on the DirectRunner: as many worker processes as the cores, memory and input allow."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pytest

from beamtrove.execution.direct_workers import INPUT_PER_WORKER, WORKER_MEMORY, default_workers, direct_workers_given
from beamtrove.processes import available_memory, machine_workers
from tests.conftest import DATA, child_processes, jsonl_lines, make_warc_set, require


@pytest.mark.parametrize(
    ("argv", "given"),
    [
        (["--direct_running_mode", "in_memory"], True),
        (["--direct_num_workers=3"], True),
        (["--direct-num-workers", "3"], True),
        (["--input", "x", "--direct_running_mode=multi_processing"], True),
        (["--input", "x", "--runner", "DirectRunner"], False),
        ([], False),
    ],
)
def test_a_command_line_names_the_workers_or_leaves_them_to_beamtrove(argv, given):
    assert direct_workers_given(argv) is given


def test_the_default_count_is_bounded_by_cores_memory_and_input():
    machine, _ = machine_workers(WORKER_MEMORY)
    assert default_workers() == machine
    # One input file is one unit of work; too little input pays no worker's start.
    assert default_workers(units_of_work=1, input_bytes=10 * INPUT_PER_WORKER) == 1
    assert default_workers(units_of_work=8, input_bytes=INPUT_PER_WORKER - 1) == 1
    assert default_workers(units_of_work=8, input_bytes=2 * INPUT_PER_WORKER) == min(machine, 2)
    assert default_workers(units_of_work=0, input_bytes=0) == 1


def _run_counting_workers(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """Runs ``beamtrove run ...`` in a new process; its result, and the most SDK workers it had at once (the
    processes its zygote forked)."""
    command = [sys.executable, "-m", "beamtrove", "run", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        most = 0
        while run.poll() is None:
            most = max(most, sum(len(child_processes(child)) for child in child_processes(run.pid)))
            time.sleep(0.05)
        stdout, stderr = run.communicate()
    return subprocess.CompletedProcess(command, run.returncode, stdout, stderr), most


def _lines(folder: pathlib.Path) -> list[bytes]:
    """Every line of the JSONL files under ``folder``, sorted: the number of workers may part them otherwise."""
    return sorted(jsonl_lines(folder.rglob("*.jsonl.gz")))


@pytest.fixture(scope="module")
def large_jsonl(movie_reviews, state_union, tmp_path_factory) -> pathlib.Path:
    """Three JSONL files of real reviews and addresses, 3 x 3.2 MiB more than the input that earns a second
    worker."""
    folder = tmp_path_factory.mktemp("large")
    texts = [*movie_reviews.values(), *state_union.values()]
    for number in range(3):
        rows = (json.dumps({"id": f"{number}-{at}", "text": text}) for at, text in enumerate(texts * 2))
        (folder / f"part-{number}.jsonl").write_text("\n".join(rows) + "\n")
    assert sum(path.stat().st_size for path in folder.iterdir()) > 2 * INPUT_PER_WORKER
    return folder


@pytest.mark.slow
def test_a_plain_run_forks_the_bounded_workers_and_writes_what_one_process_writes(large_jsonl, tmp_path):
    expected = default_workers(units_of_work=3, input_bytes=sum(p.stat().st_size for p in large_jsonl.iterdir()))
    if expected < 2:
        pytest.skip(f"this machine allows one worker ({machine_workers(WORKER_MEMORY)}, {available_memory()} B)")
    plain, workers = _run_counting_workers("convert", "--input", str(large_jsonl), "--output", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert workers == expected
    one, none = _run_counting_workers(
        "convert", "--input", str(large_jsonl), "--output", str(tmp_path / "one"), "--direct_running_mode=in_memory"
    )
    assert one.returncode == 0, one.stderr[-3000:]
    assert none == 0
    documents = _lines(tmp_path / "one")
    assert len(documents) == 3 * 2 * (2000 + 65)
    assert _lines(tmp_path / "plain") == documents


@pytest.mark.slow
def test_a_plain_fineweb_run_keeps_what_one_process_keeps(tmp_path):
    warcs = tmp_path / "warcs"
    make_warc_set(warcs, "--records", "800", "--files", "4", "--seed", "48")
    size = sum(path.stat().st_size for path in warcs.glob("*.warc.gz"))
    expected = default_workers(units_of_work=4, input_bytes=size)
    if expected < 2:
        pytest.skip(f"this machine allows one worker ({machine_workers(WORKER_MEMORY)}, {available_memory()} B)")
    assets = ["--lid_model", str(require(DATA / "models" / "lid176" / "lid.176.ftz"))]
    assets += ["--url_blocklist", str(require(DATA / "blocklists" / "ut1"))]
    # Without an extraction time limit, what is kept does not depend on the machine's load.
    argv = ["fineweb", "--input", str(warcs / "*.warc.gz"), "--extract_timeout", "0", *assets]
    plain, workers = _run_counting_workers(*argv, "--output", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert workers == expected
    one, none = _run_counting_workers(*argv, "--output", str(tmp_path / "one"), "--direct_running_mode=in_memory")
    assert one.returncode == 0 and none == 0, one.stderr[-3000:]
    for folder in ("documents", "excluded", "dead_letters"):
        assert _lines(tmp_path / "plain" / folder) == _lines(tmp_path / "one" / folder), folder
    assert _lines(tmp_path / "one" / "documents")
