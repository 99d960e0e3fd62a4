"""How each dedup stage's state grows with the number of documents, per runner.

For each size, a make_warc.py set (real pages plus exact and near copies)
is extracted once by ``beamtrove run extract --extractor resiliparse`` and
split into 4 JSONL files (as ``benchmarks.dedup_speed`` does). On each, it
runs ``beamtrove run dedup --dedup exact,minhash`` on every runner of
``--runners`` (the DirectRunner in memory; Prism with one LOOPBACK SDK
worker, whose shuffles live in the Prism process) and prints, per size:

* per stage, the largest group one key brings to one worker: exact-text
  groups, identical-signature groups, LSH band groups and connected
  components, from the run's ``stats.json`` distributions, with the links
  the band groups made;
* wall time, peak PSS of the whole process tree, of its largest Python
  process (the SDK worker) and of the Prism process (which holds Prism's
  shuffles);
* with ``--memray``, the same run again under memray (untimed; ``pip install
  memray``): the peak memory of the Python process that beamtrove's own code
  held, apart from what the runner held for it (the DirectRunner's
  PCollections; on Prism, the SDK harness's gRPC data plane, which receives
  each bundle's whole input as one message). See ``benchmarks.memory_owners``.

A stage whose per-worker state scales with its largest group, and not with
the number of documents, is what lets a dump run on many workers. The set's
copies are drawn from a fixed pool of real pages, so its largest groups
themselves grow with the size: the last lines divide each growth by the
growth of the documents, and of the largest groups.

Usage:
    python -m benchmarks.dedup_scaling [--records 10200 102000 306000] [--runners direct prism] [--workdir DIR]
        [--memray] [--results FILE]
"""

from __future__ import annotations

import shutil
import sys
from typing import NamedTuple

from beamtrove.stats import read_stats
from benchmarks.common import GIB, MIB, Results, TreeMonitor, add_workdir_arguments, argument_parser, run_measured
from benchmarks.dedup_inputs import split_documents
from benchmarks.memory_owners import BEAMTROVE, RUNNER, peak_by_owner, run_traced

_RUNNER_ARGS = {
    "direct": ["--direct_running_mode", "in_memory"],
    "prism": ["--runner", "PrismRunner", "--environment_type", "LOOPBACK"],
}
# (stats step, distribution): the largest group of each stage that a worker holds at once.
_GROUPS = (
    ("exact", "group_size", "exact text"),
    ("minhash", "signature_group_size", "signature"),
    ("minhash", "band_group_size", "LSH band"),
    ("minhash", "component_size", "component"),
)


class _Run(NamedTuple):
    runner: str
    documents: int
    wall: float
    monitor: TreeMonitor
    largest: list[int]
    counters: dict
    owners: dict[str, int]


def _largest(stats: dict, step: str, distribution: str) -> int:
    return int(stats["steps"].get(step, {}).get("distributions", {}).get(distribution, {}).get("max", 0))


def _python_peak(monitor) -> int:
    return max(
        (pss for command, pss in monitor.peak_by_command.items() if command.startswith(("python", "beamtrove"))),
        default=0,
    )


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[10_200, 102_000, 306_000])
    parser.add_argument("--runners", nargs="+", default=["direct", "prism"], choices=sorted(_RUNNER_ARGS))
    add_workdir_arguments(parser, "beamtrove-dedup")
    parser.add_argument(
        "--memray", action="store_true", help="Also trace each run's memory by owner (pip install memray)."
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)

    rows: list[_Run] = []
    for records in args.records:
        source = split_documents(
            args.workdir, records=records, files=4 if records <= 20_000 else 8, extractor="resiliparse"
        )
        documents = int((source / "done").read_text())
        for runner in args.runners:
            output = args.workdir / f"dedup-scaling-{runner}-r{records}"
            shutil.rmtree(output, ignore_errors=True)
            command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(output)]
            command += ["--dedup", "exact,minhash", "--progress_interval", "0", *_RUNNER_ARGS[runner]]
            print(f"{documents} documents on {runner} ...", file=sys.stderr)
            wall, monitor = run_measured(command, args.workdir / f"{output.name}.log")
            stats = read_stats(str(output))
            largest = [_largest(stats, step, distribution) for step, distribution, _ in _GROUPS]
            owners = {}
            if args.memray:
                shutil.rmtree(output, ignore_errors=True)
                trace = args.workdir / f"{output.name}.memray"
                run_traced(command, trace, args.workdir / f"{output.name}.memray.log")
                owners = peak_by_owner(trace)
                trace.unlink()
            rows.append(_Run(runner, documents, wall, monitor, largest, stats["steps"]["minhash"]["counters"], owners))

    columns = ["runner", "docs", "wall s", "tree GiB", "python GiB", "prism GiB"]
    columns += [f"max {name}" for _, _, name in _GROUPS] + ["band links", "copies linked"]
    columns += ["beamtrove MiB", "runner MiB"] if args.memray else []
    table = []
    for run in rows:
        monitor, owners = run.monitor, run.owners
        table.append(
            [
                run.runner,
                run.documents,
                f"{run.wall:.1f}",
                f"{monitor.peak_pss / GIB:.2f}",
                f"{_python_peak(monitor) / GIB:.2f}",
                f"{monitor.peak_by_command.get('prism', 0) / GIB:.2f}",
                *run.largest,
                run.counters.get("links", 0),
                run.counters.get("identical_signatures", 0),
                *([f"{owners[BEAMTROVE] / MIB:.1f}", f"{owners[RUNNER] / MIB:.1f}"] if owners else []),
            ]
        )
    print(results.table("Each dedup stage's largest group, wall time and memory", columns, table))
    for runner in args.runners:
        mine = [run for run in rows if run.runner == runner]
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        docs_growth = large.documents / small.documents
        memory_growth = _python_peak(large.monitor) / _python_peak(small.monitor)
        group_growth = max(large.largest) / max(*small.largest, 1)
        owned = ""
        if large.owners:
            owned = (
                f" (beamtrove's own {large.owners[BEAMTROVE] / small.owners[BEAMTROVE]:.2f}x,"
                f" the runner's {large.owners[RUNNER] / small.owners[RUNNER]:.2f}x)"
            )
        print(
            results.note(
                f"{runner}: {docs_growth:.1f}x the documents, {large.wall / small.wall:.1f}x the time; Python worker"
                f" {memory_growth:.2f}x the memory{owned}; largest group {group_growth:.1f}x"
            )
        )
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
