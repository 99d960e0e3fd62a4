"""Staged dedup against the one-pipeline run: same output, bounded memory, wall time, back to back.

For each size, a make_warc.py set (real pages plus exact and near copies) is
extracted once with resiliparse and split into 4 JSONL files (as
``benchmarks.dedup_scaling`` does). On it, in this order:

1. ``beamtrove run dedup --dedup STEPS`` in one pipeline (the DirectRunner);
2. the same with ``--staged --workers W --memory M``;
3. with ``--elastic``, the same steps as an elastic job: ``elastic prepare``
   with the staged run's partitions, three workers of which one is SIGKILLed
   once a stage after the read is under way, a fourth started after that,
   then ``elastic merge``;
4. with ``--chaos K``, the same elastic job with two workers at a time, one of
   them SIGKILLed at a random moment (seeded) and replaced, K times over;
5. with ``--datatrove``, ``--dedup minhash`` staged against DataTrove 0.10.1's
   four MinHash stages at its defaults (``benchmarks.dedup_inputs``), on the
   same files: wall ratio, peak PSS of both process trees, and how far the
   removed sets differ (goals: >= 5x, memory <= DataTrove's, within 0.5%).

Each run's wall time and the peak PSS of its process tree and of its largest
process are printed, with the staged runs' ratios to the one-pipeline run,
and whether their outputs are identical: the kept documents (id, text,
metadata), the excluded ones per step (with ``filter_reason`` and
``duplicate_of``), the cluster maps, and every step counter and distribution
of ``stats.json`` but the writers' ``bytes`` and ``files``.

Usage:
    python -m benchmarks.staged_dedup [--records 102000] [--steps exact,url,minhash,sentence] [--workers 2]
        [--memory BYTES] [--elastic] [--chaos 6] [--datatrove] [--skip_one_pipeline] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import (
    GIB,
    Results,
    TreeMonitor,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    canonical_rows,
    datatrove_python,
    run_measured,
)
from benchmarks.dedup_inputs import datatrove_minhash_command, datatrove_removed_ids, excluded_ids, split_documents

# Writer counters that depend on how records were spread over files, not on what was written.
_LAYOUT_COUNTERS = ("bytes", "files")


def _rows(folder: pathlib.Path) -> dict[str, list[str]]:
    """Every JSONL row of a run folder's outputs, canonical, sorted, by subfolder."""
    files: dict[str, list[pathlib.Path]] = {}
    for path in sorted(folder.rglob("*.jsonl.gz")):
        files.setdefault(str(path.parent.relative_to(folder)), []).append(path)
    return {name: canonical_rows(paths) for name, paths in files.items()}


def _counters(folder: pathlib.Path) -> dict[str, Any]:
    steps = json.loads((folder / "stats.json").read_text())["steps"]
    return {
        name: {
            "counters": {k: v for k, v in entry.get("counters", {}).items() if k not in _LAYOUT_COUNTERS},
            "distributions": entry.get("distributions", {}),
        }
        for name, entry in steps.items()
    }


def differences(first: pathlib.Path, second: pathlib.Path) -> list[str]:
    """What differs between two run folders' outputs and counters; empty when they are identical."""
    found = []
    rows_first, rows_second = _rows(first), _rows(second)
    for name in sorted(set(rows_first) | set(rows_second)):
        if rows_first.get(name) != rows_second.get(name):
            found.append(f"{name}: {len(rows_first.get(name, []))} rows against {len(rows_second.get(name, []))}")
    counters_first, counters_second = _counters(first), _counters(second)
    for step in sorted(set(counters_first) | set(counters_second)):
        if counters_first.get(step) != counters_second.get(step):
            found.append(f"stats of {step}: {counters_first.get(step)} against {counters_second.get(step)}")
    return found


def _elastic_run(source: pathlib.Path, workdir: pathlib.Path, steps: str, partitions: int) -> tuple[float, str]:
    """An elastic job of the staged tasks: 3 workers, one SIGKILLed mid-job, a 4th joining late; merged."""
    job, merged = workdir / "staged-elastic-job", workdir / "staged-elastic"
    for folder in (job, merged):
        shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    prepare = ["beamtrove", "elastic", "prepare", "--pipeline", "dedup", "--input", str(source / "*.jsonl.gz")]
    prepare += ["--job-dir", str(job), "--num-shards", str(partitions), "--lock-timeout", "30", "--", "--dedup", steps]
    subprocess.run(prepare, check=True, stdout=subprocess.DEVNULL)
    logs = [open(workdir / f"staged-elastic-worker-{n}.log", "w") for n in range(4)]  # noqa: SIM115

    def worker(n: int) -> subprocess.Popen:
        command = ["beamtrove", "elastic", "worker", "--job-dir", str(job), "--host", f"host{n}"]
        return subprocess.Popen(command, stdout=logs[n], stderr=subprocess.STDOUT, start_new_session=True)

    workers = [worker(n) for n in range(3)]
    # Kill one worker once the first stage after the read has done records, i.e. mid-job, holding a task.
    while not any(name.startswith(("01-", "shared_ids-")) for name in os.listdir(job / "done")):
        time.sleep(0.5)
    os.killpg(workers[1].pid, signal.SIGKILL)
    workers[1].wait()
    killed_at = time.perf_counter() - started
    time.sleep(5)
    workers.append(worker(3))
    codes = [process.wait() for process in workers if process is not workers[1]]
    for log in logs:
        log.close()
    if any(codes):
        raise RuntimeError(f"elastic workers exited {codes}; see {workdir}/staged-elastic-worker-*.log")
    merge = ["beamtrove", "elastic", "merge", "--job-dir", str(job), "--output", str(merged)]
    subprocess.run(merge, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    hosts = sorted({_owner(done) for done in (job / "done").iterdir()})
    return wall, f"killed host1 at {killed_at:.0f} s; tasks done by {', '.join(hosts)}"


def _chaos_run(source: pathlib.Path, workdir: pathlib.Path, steps: str, partitions: int, kills: int) -> str:
    """The elastic job with two workers at a time, one SIGKILLed at a random moment and replaced, ``kills`` times."""
    job, merged = workdir / "staged-chaos-job", workdir / "staged-chaos"
    for folder in (job, merged):
        shutil.rmtree(folder, ignore_errors=True)
    prepare = ["beamtrove", "elastic", "prepare", "--pipeline", "dedup", "--input", str(source / "*.jsonl.gz")]
    prepare += ["--job-dir", str(job), "--num-shards", str(partitions), "--lock-timeout", "10", "--max-retries", "9"]
    subprocess.run([*prepare, "--", "--dedup", steps], check=True, stdout=subprocess.DEVNULL)
    chance = random.Random(7)
    log = open(workdir / "staged-chaos-workers.log", "w")  # noqa: SIM115
    started = [0]

    hosts = {}

    def worker() -> subprocess.Popen:
        started[0] += 1
        command = ["beamtrove", "elastic", "worker", "--job-dir", str(job), "--host", f"host{started[0]}"]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        hosts[process.pid] = f"host{started[0]}"
        return process

    workers, stages_hit = [worker(), worker()], []
    for _ in range(kills):
        time.sleep(chance.uniform(5, 25))
        running = [process for process in workers if process.poll() is None]
        if not running:
            break
        victim = chance.choice(running)
        locks = [lock.stem for lock in (job / "locks").glob("*.lock") if _holder(lock) == hosts[victim.pid]]
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        stages_hit += locks
        workers = [process for process in workers if process is not victim] + [worker()]
    codes = [process.wait() for process in workers]
    log.close()
    if any(codes):
        raise RuntimeError(f"chaos workers exited {codes}; see {workdir}/staged-chaos-workers.log")
    subprocess.run(["beamtrove", "elastic", "merge", "--job-dir", str(job), "--output", str(merged)], check=True)
    return f"{started[0] - 2} kills; tasks the killed workers held: {', '.join(stages_hit) or 'none'}"


def _against_datatrove(results: Results, source: pathlib.Path, args) -> None:
    """``--dedup minhash`` staged against DataTrove's four MinHash stages on the same files, back to back."""
    workdir, workers, memory = args.workdir, args.workers, args.memory
    ours, theirs = workdir / "staged-minhash", workdir / "datatrove-minhash"
    for folder in (ours, theirs):
        shutil.rmtree(folder, ignore_errors=True)
    command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(ours)]
    command += ["--dedup", "minhash", "--progress_interval", "0", "--staged", "--workers", str(workers)]
    wall, monitor = run_measured([*command, "--memory", str(memory)], workdir / f"{ours.name}.log")
    dt_command = datatrove_minhash_command(datatrove_python(args.datatrove_venv), source, theirs, 4)
    dt_wall, dt_monitor = run_measured(dt_command, workdir / f"{theirs.name}.log")
    removed, dt_removed = excluded_ids(ours / "excluded" / "minhash"), datatrove_removed_ids(theirs)
    differ = len(removed ^ dt_removed) / max(len(dt_removed), 1)
    rows = [
        ["minhash staged", f"{wall:.1f}", f"{monitor.peak_pss / GIB:.2f}", len(removed)],
        ["DataTrove 4-stage MinHash", f"{dt_wall:.1f}", f"{dt_monitor.peak_pss / GIB:.2f}", len(dt_removed)],
    ]
    title = f"{source.name}: --dedup minhash staged against DataTrove's four stages"
    print(results.table(title, ["run", "wall s", "peak PSS GiB", "removed"], rows))
    speed, memory_ratio = dt_wall / wall, monitor.peak_pss / dt_monitor.peak_pss
    results.check("staged minhash at least 5x DataTrove's speed", speed >= 5)
    results.check("staged minhash peak memory at most DataTrove's", memory_ratio <= 1)
    results.check("removed sets differ in at most 0.5% of DataTrove's", differ <= 0.005)
    print(
        results.note(
            f"staged is {speed:.2f}x DataTrove's speed (goal 5x), {memory_ratio:.2f}x its peak memory (goal <= 1); "
            f"removed sets differ in {len(removed ^ dt_removed)} documents, {differ:.2%} of DataTrove's (goal <= 0.5%)"
        ),
        flush=True,
    )


def _holder(lock: pathlib.Path) -> str | None:
    try:
        return json.loads(lock.read_text()).get("host")
    except (OSError, ValueError):
        return None


def _owner(done: pathlib.Path) -> str:
    return json.loads(done.read_text())["host"]


def _print_run(name: str, wall: float, monitor: TreeMonitor | None, base: tuple[float, TreeMonitor] | None) -> list:
    """Prints one run's wall time and memory, and against the one-pipeline run's; returns them as a table row."""
    line = f"{name:<24} {wall:>8.1f} s"
    row = [name, f"{wall:.1f}", "", "", "", ""]
    if monitor is not None:
        line += f"  tree {monitor.peak_pss / GIB:>6.2f} GiB  largest process {monitor.peak_process_pss / GIB:>6.2f} GiB"
        row[2:4] = f"{monitor.peak_pss / GIB:.2f}", f"{monitor.peak_process_pss / GIB:.2f}"
    if base is not None:
        line += f"  wall {wall / base[0]:.2f}x one pipeline"
        row[4] = f"{wall / base[0]:.2f}x"
        if monitor is not None:
            line += f", largest process {monitor.peak_process_pss / base[1].peak_process_pss:.2f}x"
            row[5] = f"{monitor.peak_process_pss / base[1].peak_process_pss:.2f}x"
    print(line, flush=True)
    return row


def _identical(results: Results, run: str, found: list[str]) -> str:
    """Records whether a run's output is the one-pipeline run's; returns what to print."""
    results.check(f"{run}: output identical to one pipeline's", not found)
    return "IDENTICAL to one pipeline" if not found else "DIFFERS: " + "; ".join(found)


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[102_000])
    parser.add_argument("--steps", default="exact,url,minhash,sentence")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory", type=int, default=1 << 30, help="--memory of the staged run (default: 1 GiB)")
    parser.add_argument("--elastic", action="store_true", help="also run the elastic job with a killed worker")
    parser.add_argument("--chaos", type=int, default=0, help="also run the elastic job with this many random kills")
    parser.add_argument("--datatrove", action="store_true", help="also run minhash staged against DataTrove's")
    add_datatrove_venv_argument(parser)
    parser.add_argument(
        "--skip_one_pipeline",
        action="store_true",
        help="compare with an earlier one-pipeline run",
    )
    add_workdir_arguments(parser, "beamtrove-staged-dedup")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    failed = False
    table = []
    for records in args.records:
        source = split_documents(args.workdir, records=records, files=16, extractor="resiliparse")
        documents = int((source / "done").read_text())
        print(f"{documents} documents ({records} records), --dedup {args.steps}", flush=True)
        base_args = ["--input", str(source / "*.jsonl.gz"), "--dedup", args.steps, "--progress_interval", "0"]
        one = args.workdir / f"one-pipeline-r{records}"
        base = None
        if not (args.skip_one_pipeline and (one / "stats.json").exists()):
            shutil.rmtree(one, ignore_errors=True)
            command = ["beamtrove", "run", "dedup", *base_args, "--output", str(one)]
            base = run_measured(command, args.workdir / f"{one.name}.log")
            table.append([documents, *_print_run("one pipeline", *base, None)])
        staged = args.workdir / f"staged-r{records}"
        shutil.rmtree(staged, ignore_errors=True)
        command = ["beamtrove", "run", "dedup", *base_args, "--output", str(staged), "--staged"]
        command += ["--workers", str(args.workers), "--memory", str(args.memory)]
        wall, monitor = run_measured(command, args.workdir / f"{staged.name}.log")
        partitions = json.loads((staged / "stats.json").read_text())["staged"]["partitions"]
        name = f"staged ({args.workers} workers, {partitions} partitions)"
        table.append([documents, *_print_run(name, wall, monitor, base)])
        found = differences(one, staged)
        print(f"  staged output: {_identical(results, f'{documents} docs, {name}', found)}")
        failed |= bool(found)
        if args.elastic:
            wall, what = _elastic_run(source, args.workdir, args.steps, partitions)
            table.append([documents, *_print_run("elastic (3 workers + 1)", wall, None, base)])
            found = differences(one, args.workdir / "staged-elastic")
            print(f"  {results.note(what)}; output: {_identical(results, f'{documents} docs, elastic', found)}")
            failed |= bool(found)
        if args.chaos:
            what = _chaos_run(source, args.workdir, args.steps, partitions, args.chaos)
            found = differences(one, args.workdir / "staged-chaos")
            print(f"chaos: {results.note(what)}; output: {_identical(results, f'{documents} docs, chaos', found)}")
            failed |= bool(found)
        if args.datatrove:
            _against_datatrove(results, source, args)
    columns = ["docs", "run", "wall s", "peak PSS GiB", "largest process GiB", "wall vs one pipeline"]
    results.table(f"--dedup {args.steps}", [*columns, "largest process vs one pipeline"], table)
    results.write()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    sys.exit(main())
