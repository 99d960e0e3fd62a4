"""MinHash dedup wall time and memory against DataTrove's four stages, at two sizes, in one run.

For each size, a make_warc.py set (real pages plus exact and near copies)
is extracted once by ``beamtrove run extract --extractor resiliparse`` (fast
enough for 100k pages here; the text is what both tools dedup) and split
into 4 JSONL files. On those, it measures:

* ``beamtrove run dedup --dedup minhash`` on the DirectRunner
  (``--runner_mode``), wall clock of the whole command: start-up, reading
  twice, signatures, LSH shuffle, connected components, writing;
* DataTrove 0.10.1's MinhashDedupSignature → Buckets → Cluster → Filter on
  LocalPipelineExecutor (4 tasks, 14 bucket tasks, 2 workers), in its venv,
  wall clock of the four stages run back to back;

and prints wall time, documents per second, removed documents, peak PSS of
the whole process tree and of its largest process, the speed ratio (goal:
beamtrove >= 1.5x DataTrove), and how time and memory grow from the first
size to the last (goal: time about linear, memory per process flat). Runs
nothing else meanwhile: on 2 cores, any other load skews the figures.

Usage:
    python -m benchmarks.dedup_speed [--records 10200 102000] [--workdir DIR] [--datatrove_venv PATH]
        [--runner_mode in_memory|multi_processing] [--results FILE]
"""

from __future__ import annotations

import shutil
import sys

from benchmarks.common import (
    GIB,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    run_measured,
    verdict,
)
from benchmarks.dedup_inputs import datatrove_minhash_command, datatrove_removed_ids, excluded_ids, split_documents

SPEED_GOAL = 1.5


def _files_for(records: int) -> int:
    return 4 if records <= 20_000 else 8


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[10_200, 102_000])
    add_workdir_arguments(parser, "beamtrove-dedup")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--runner_mode", default="in_memory", choices=("in_memory", "multi_processing"))
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    python = datatrove_python(args.datatrove_venv)

    runs = []
    for records in args.records:
        source = split_documents(
            args.workdir, records=records, files=_files_for(records), extractor="resiliparse", parts=4
        )
        documents = int((source / "done").read_text())
        ours = args.workdir / f"dedup-speed-beamtrove-r{records}"
        theirs = args.workdir / f"dedup-speed-datatrove-r{records}"
        shutil.rmtree(ours, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)
        command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(ours)]
        command += ["--direct_running_mode", args.runner_mode, "--progress_interval", "0"]
        if args.runner_mode == "multi_processing":
            command += ["--direct_num_workers", "2"]
        print(f"{documents} documents: beamtrove ...", file=sys.stderr)
        wall, monitor = run_measured(command, args.workdir / f"{ours.name}.log")
        runs.append(("beamtrove", documents, wall, len(excluded_ids(ours / "excluded" / "minhash")), monitor))
        print(f"{documents} documents: DataTrove ...", file=sys.stderr)
        dt_log = args.workdir / f"{theirs.name}.log"
        dt_wall, dt_monitor = run_measured(datatrove_minhash_command(python, source, theirs, 4), dt_log)
        stages = [line for line in dt_log.read_text().splitlines() if line.startswith("stage ")]
        runs.append(("DataTrove", documents, dt_wall, len(datatrove_removed_ids(theirs)), dt_monitor))
        print(f"    DataTrove stages: {'; '.join(stages)}", file=sys.stderr)

    rows = [
        [
            tool,
            documents,
            f"{wall:.1f}",
            f"{documents / wall:.0f}",
            removed,
            f"{monitor.peak_pss / GIB:.2f}",
            f"{monitor.peak_process_pss / GIB:.2f}",
        ]
        for tool, documents, wall, removed, monitor in runs
    ]
    columns = ["tool", "docs", "wall s", "docs/s", "removed", "peak PSS GiB", "largest process GiB"]
    print(results.table("MinHash dedup against DataTrove's four stages", columns, rows))
    passed = True
    for index in range(0, len(runs), 2):
        ours, theirs = runs[index], runs[index + 1]
        ratio = theirs[2] / ours[2]
        passed &= results.check(
            f"{ours[1]} docs: beamtrove at least {SPEED_GOAL}x DataTrove's speed", ratio >= SPEED_GOAL
        )
        removed_gap = abs(ours[3] - theirs[3]) / max(theirs[3], 1)
        print(
            results.note(
                f"{ours[1]} docs: beamtrove {ratio:.2f}x DataTrove (goal {SPEED_GOAL}x); "
                f"removed counts differ by {removed_gap:.2%}"
            )
        )
    if len(runs) >= 4:
        for tool_index, tool in ((0, "beamtrove"), (1, "DataTrove")):
            small, large = runs[tool_index], runs[-2 + tool_index]
            time_growth = (large[2] / small[2]) / (large[1] / small[1])
            memory_growth = large[4].peak_process_pss / small[4].peak_process_pss
            print(
                results.note(
                    f"{tool}: {large[1] / small[1]:.1f}x the documents took {large[2] / small[2]:.1f}x the time"
                    f" ({time_growth:.2f} of linear); largest process {memory_growth:.2f}x the memory"
                )
            )
    print(verdict(passed))
    results.write()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
