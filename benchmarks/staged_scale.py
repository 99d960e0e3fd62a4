"""Staged dedup at ten times the documents: the largest process as large, the wall ten times, the copies found.

For each size, a corpus of real English sentences with planted exact, URL
and near copies is generated once (``benchmarks.generated_corpus``, its
wall time and peak memory printed). On each, back to back,
``beamtrove run dedup --dedup STEPS --staged --workers W --memory M`` runs
with the same ``--memory``: by default the one that cuts the smallest
corpus into ``--partitions`` partitions (its rows' bytes times what a
staged dedup task holds per byte of its partition, ``StagedForm``'s 6,
divided by the partitions), so that every size is cut by its data and a larger corpus
into proportionally more partitions of the same size. On the smallest
corpus the same steps also run in one pipeline (the DirectRunner), whose
output the staged run's must equal (``benchmarks.staged_dedup.differences``).

Printed per run: wall time, peak PSS of the largest process and of the
whole tree, the mean CPU cores other work on the machine kept busy
meanwhile (which slows the run), the partitions, and the precision and
recall of the removals against the planted copies (overall and per kind).
Then, for each size against the smallest, the largest-process peak ratio
(goal <= 1.1) and the wall ratio (goal <= 1.1x the ratio of the sizes: 11x
for 10x the documents).

Usage:
    python -m benchmarks.staged_scale [--sizes 102000,1020000] [--files 16] [--seed 1]
        [--steps exact,url,minhash] [--workers 2] [--memory BYTES] [--partitions 4]
        [--skip_one_pipeline] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import sys

from beamtrove.layout import STATS_FILE
from beamtrove.transforms.stages import StagedForm
from benchmarks.common import GIB, MIB, Results, add_workdir_arguments, argument_parser, run_measured, verdict
from benchmarks.generated_corpus import CORPUS_FILE, KINDS, RemovalScore, removal_score
from benchmarks.staged_dedup import differences

#: Goals of issue 47, for ten times the documents: the largest process within 1.1x, the wall within 11x.
PEAK_RATIO_GOAL = 1.1
WALL_GOAL_PER_SIZE_RATIO = 1.1
PRECISION_GOAL = 0.99
RECALL_GOAL = 0.95


def _sizes(text: str) -> list[int]:
    sizes = sorted({int(size) for size in text.split(",") if size.strip()})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"--sizes takes document counts separated by commas (got {text!r})")
    return sizes


def _corpus(
    results: Results, workdir: pathlib.Path, documents: int, files: int, seed: int
) -> tuple[pathlib.Path, dict]:
    """The generated corpus of that size (built and measured unless it is there) and its ``corpus.json``."""
    folder = workdir / f"generated-n{documents}-f{files}-s{seed}"
    if not (folder / CORPUS_FILE).exists():
        shutil.rmtree(folder, ignore_errors=True)
        command = [sys.executable, "-m", "benchmarks.generated_corpus", str(folder)]
        command += ["--documents", str(documents), "--files", str(files), "--seed", str(seed)]
        wall, monitor = run_measured(command, workdir / f"{folder.name}.log")
        print(results.note(f"generated {folder.name}: {wall:.1f} s, peak PSS {monitor.peak_pss / MIB:.0f} MiB"))
    return folder, json.loads((folder / CORPUS_FILE).read_text())


def _auto_memory(smallest: dict, partitions: int) -> int:
    """The --memory that cuts the smallest corpus into ``partitions`` partitions."""
    return math.ceil(smallest["content_bytes"] * StagedForm.held_per_input_byte / partitions)


def _dedup(source: pathlib.Path, output: pathlib.Path, steps: str, staged: list[str], log: pathlib.Path):
    shutil.rmtree(output, ignore_errors=True)
    command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(output)]
    return run_measured([*command, "--dedup", steps, "--progress_interval", "0", *staged], log)


def _row(documents: int, run: str, wall: float, monitor, partitions: str, score: RemovalScore) -> list:
    return [
        documents,
        run,
        f"{wall:.1f}",
        f"{monitor.peak_process_pss / GIB:.2f}",
        f"{monitor.peak_pss / GIB:.2f}",
        f"{monitor.other_cores:.2f}",
        partitions,
        f"{score.precision:.4f}",
        f"{score.recall:.4f}",
        *(f"{score.kind_recall(kind):.4f}" for kind in KINDS),
    ]


_COLUMNS = ["docs", "run", "wall s", "largest process GiB", "tree GiB", "other cores busy", "partitions"]
_COLUMNS += ["precision", "recall"]
_COLUMNS += [f"recall {kind}" for kind in KINDS]


def _print_row(row: list) -> None:
    print("  " + ", ".join(f"{column} {value}" for column, value in zip(_COLUMNS[1:], row[1:], strict=True) if value))


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--sizes", type=_sizes, default=[102_000, 1_020_000], help="documents per corpus, comma-separated"
    )
    parser.add_argument("--files", type=int, default=16, help="JSONL files per corpus (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the corpora's seed (default: %(default)s)")
    parser.add_argument("--steps", default="exact,url,minhash", help="--dedup of the runs (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="--workers of the staged runs (default: %(default)s)")
    parser.add_argument("--memory", type=int, help="--memory of the staged runs, bytes (default: see --partitions)")
    parser.add_argument(
        "--partitions",
        type=int,
        default=4,
        help="without --memory: the --memory that cuts the smallest corpus into this many (default: %(default)s)",
    )
    parser.add_argument("--skip_one_pipeline", action="store_true", help="compare with an earlier one-pipeline run")
    add_workdir_arguments(parser, "beamtrove-staged-scale")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpora = {size: _corpus(results, args.workdir, size, args.files, args.seed) for size in args.sizes}
    smallest = args.sizes[0]
    memory = args.memory or _auto_memory(corpora[smallest][1], args.partitions)
    how = "given" if args.memory else f"cuts the {smallest:,}-document corpus into {args.partitions} partitions"
    print(results.note(f"--memory {memory} ({memory / MIB:.0f} MiB): {how}"), flush=True)
    staged = ["--staged", "--workers", str(args.workers), "--memory", str(memory)]
    table, measured, failed = [], {}, False
    for size in args.sizes:
        source, summary = corpora[size]
        print(f"{size:,} documents, {summary['content_bytes'] / MIB:.0f} MiB of rows, --dedup {args.steps}", flush=True)
        if size == smallest:
            one = args.workdir / f"one-pipeline-n{size}"
            if not (args.skip_one_pipeline and (one / STATS_FILE).exists()):
                wall, monitor = _dedup(source, one, args.steps, [], args.workdir / f"{one.name}.log")
                table.append(_row(size, "one pipeline", wall, monitor, "", removal_score(one, source)))
                _print_row(table[-1])
        output = args.workdir / f"staged-n{size}"
        wall, monitor = _dedup(source, output, args.steps, staged, args.workdir / f"{output.name}.log")
        partitions = json.loads((output / STATS_FILE).read_text())["staged"]["partitions"]
        score = removal_score(output, source)
        table.append(_row(size, f"staged, {args.workers} workers", wall, monitor, str(partitions), score))
        _print_row(table[-1])
        measured[size] = wall, monitor
        failed |= not results.check(f"{size:,} docs: precision >= {PRECISION_GOAL}", score.precision >= PRECISION_GOAL)
        failed |= not results.check(f"{size:,} docs: recall >= {RECALL_GOAL}", score.recall >= RECALL_GOAL)
        if size == smallest:
            found = differences(one, output)
            same = results.check(f"{size:,} docs: staged output identical to one pipeline's", not found)
            print(f"  staged output: {'IDENTICAL to one pipeline' if same else 'DIFFERS: ' + '; '.join(found)}")
            failed |= not same
    print(results.table(f"--dedup {args.steps}, --memory {memory}", _COLUMNS, table))
    ratios = []
    base_wall, base_monitor = measured[smallest]
    for size in args.sizes[1:]:
        wall, monitor = measured[size]
        peak_ratio = monitor.peak_process_pss / base_monitor.peak_process_pss
        wall_ratio, wall_goal = wall / base_wall, WALL_GOAL_PER_SIZE_RATIO * size / smallest
        peak_ok = results.check(f"{size:,} docs: largest process <= {PEAK_RATIO_GOAL}x", peak_ratio <= PEAK_RATIO_GOAL)
        wall_ok = results.check(f"{size:,} docs: wall <= {wall_goal:.3g}x", wall_ratio <= wall_goal)
        failed |= not (peak_ok and wall_ok)
        ratios.append([f"{size:,} / {smallest:,}", f"{size / smallest:.3g}x", f"{peak_ratio:.2f}x"])
        ratios[-1] += [f"<= {PEAK_RATIO_GOAL}x", verdict(peak_ok), f"{wall_ratio:.2f}x", f"<= {wall_goal:.3g}x"]
        ratios[-1].append(verdict(wall_ok))
    if ratios:
        columns = ["sizes", "documents", "largest process", "goal", "verdict", "wall", "goal", "verdict"]
        print("\n" + results.table("staged runs against the smallest", columns, ratios))
    results.write()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    sys.exit(main())
