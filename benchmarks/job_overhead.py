"""The job engine's cost per task, and the files it reads per task, as a staged job grows from 500 to 5,000 partitions.

For each partition count P, a staged ``dedup --dedup exact`` job is prepared
as a user prepares one (``beamtrove elastic prepare --num-shards P``) over
real sentences (NLTK's ``state_union`` and ``inaugural`` speeches, one JSON
line each, repeated to 4 lines per partition), and one worker runs every
task of it in this process, as ``beamtrove elastic worker`` does. The tasks'
own work is made trivial (each returns at once, writing no dataset), so
what is measured is the engine's: finding the open tasks, claiming a task,
counting its attempts, its attempt record, resolving and checking what it
reads, its heartbeat, its done record, sealing each stage once it is done.

Printed per P: tasks, wall seconds, the engine's milliseconds per task, and
per task the files opened for reading, the files opened for writing and
the directory listings (Python's audit events ``open``, ``os.listdir`` and
``os.scandir``), and the ratio of each to the smallest P. The goal: every
ratio at the largest P within 1.5x (a cost per task that does not grow with
the job; before 0.16 every task re-read its producers' done records, which
grew as P).

Usage:
    python -m benchmarks.job_overhead [--partitions 500 1000 2000 5000] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import time
from typing import Any

from beamtrove.execution.jobs import prepare_job
from beamtrove.execution.jobs.staged import kind as staged_kind
from beamtrove.execution.jobs.worker import run_worker
from benchmarks.common import Results, add_workdir_arguments, argument_parser, nltk_texts, verdict

# Input lines per partition: a read task of a plain JSONL input reads at least one line.
_LINES_PER_PARTITION = 4
_GOAL = 1.5


class _Counts:
    """Python audit events of file access, counted while :attr:`on`."""

    def __init__(self):
        self.on = False
        self.reads = self.writes = self.listings = 0

    def __call__(self, event: str, args: tuple) -> None:
        if not self.on:
            return
        if event == "open":
            mode, flags = args[1], args[2]
            writing = (mode is not None and any(c in mode for c in "wax+")) or (mode is None and flags & 0b11)
            if writing:
                self.writes += 1
            else:
                self.reads += 1
        elif event in ("os.listdir", "os.scandir"):
            self.listings += 1


def _sentences() -> list[str]:
    """Real sentences: NLTK's State of the Union and inaugural addresses, split at full stops."""
    texts = nltk_texts("state_union") + nltk_texts("inaugural")
    return [line.strip() for text in texts for line in text.split(".") if len(line.split()) >= 5]


def _input(folder: pathlib.Path, lines: int) -> pathlib.Path:
    sentences = _sentences()
    path = folder / f"sentences-{lines}.jsonl"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rows = (json.dumps({"id": f"s{k}", "text": sentences[k % len(sentences)]}) for k in range(lines))
        path.write_text("\n".join(rows) + "\n")
    return path


def _trivial_task(plan, stage, index, files, attempt_dir) -> dict[str, Any]:
    """A task whose work is nothing: no pipeline, no dataset, no step counters."""
    return {}


def _measure(workdir: pathlib.Path, partitions: int, counts: _Counts) -> dict[str, float]:
    source = _input(workdir / "input", partitions * _LINES_PER_PARTITION)
    job = workdir / f"job-{partitions}"
    shutil.rmtree(job, ignore_errors=True)
    prepare_job(job, "dedup", [str(source)], partitions, ["--dedup", "exact"])
    real_task = staged_kind.run_task
    staged_kind.run_task = _trivial_task
    counts.reads = counts.writes = counts.listings = 0
    counts.on = True
    started = time.perf_counter()
    try:
        status = run_worker(job, echo=lambda line: None, poll_interval=0.01)
    finally:
        counts.on = False
        staged_kind.run_task = real_task
    wall = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"the worker of {job} exited {status}")
    tasks = len(list((job / "done").iterdir()))
    shutil.rmtree(job)
    return {
        "tasks": tasks,
        "wall": wall,
        "ms": 1000 * wall / tasks,
        "reads": counts.reads / tasks,
        "writes": counts.writes / tasks,
        "listings": counts.listings / tasks,
    }


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--partitions", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    add_workdir_arguments(parser, "beamtrove-job-overhead")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    counts = _Counts()
    sys.addaudithook(counts)
    measured = {}
    for partitions in sorted(args.partitions):
        measured[partitions] = row = _measure(args.workdir, partitions, counts)
        print(
            f"{partitions} partitions: {row['tasks']} tasks in {row['wall']:.1f} s, {row['ms']:.2f} ms per task; "
            f"per task {row['reads']:.1f} files read, {row['writes']:.1f} written, {row['listings']:.1f} listings",
            flush=True,
        )
    first = measured[min(measured)]
    rows = []
    for partitions, row in measured.items():
        ratios = [row[key] / first[key] if first[key] else 1.0 for key in ("ms", "reads", "writes", "listings")]
        per_task = [round(row["ms"], 2), round(row["reads"], 1), round(row["writes"], 1), round(row["listings"], 1)]
        rows.append([partitions, row["tasks"], round(row["wall"], 1), *per_task, *(f"{r:.2f}x" for r in ratios)])
    columns = ["partitions", "tasks", "wall s", "ms per task", "files read per task", "files written per task",
               "listings per task", "ms ratio", "reads ratio", "writes ratio", "listings ratio"]  # fmt: skip
    print(results.table("The engine per task, by partitions", columns, rows))
    last = measured[max(measured)]
    for key, what in (("ms", "time"), ("reads", "files read"), ("writes", "files written"), ("listings", "listings")):
        ratio = last[key] / first[key] if first[key] else 1.0
        goal = f"{what} per task at {max(measured)} partitions within {_GOAL}x of {min(measured)}: {ratio:.2f}x"
        print(f"{goal}: {verdict(results.check(goal, ratio <= _GOAL))}")
    results.write()
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
