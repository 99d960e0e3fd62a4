"""FineWeb docs/s with the language screen, against DataTrove 0.10.1 and beamtrove's ordinary run.

For each seed of ``--seeds``, builds a make_warc.py set (3000 records in 4
files unless told otherwise; reused when present), then measures one after
the other on this machine:

* DataTrove 0.10.1's FineWeb stack, its own FineWeb example as
  ``benchmarks.fineweb_runs`` runs it (``LanguageFilter()`` keeps any
  language over 0.65), on LocalPipelineExecutor(tasks=4) with as many
  workers as a plain beamtrove run forks here, in its venv;
* ``beamtrove run fineweb`` the ordinary way (English, FineWeb's release),
  ``--no_language_screen``, with no runner option: the DirectRunner's workers
  are the ones beamtrove picks for the machine;
* the same with the screen at each T of ``--thresholds``: at the default
  threshold (always among them) the plain command, as a user types it;
  ``--language_screen T`` otherwise.

Every docs/s figure has the same denominator: the WARC response records of
the input (make_warc.py's manifest), whatever each tool's reader passes on
(DataTrove's skips the pages libmagic does not call HTML). Per seed it prints
wall time, docs/s, the ratio to DataTrove's docs/s, the pages the screen
dropped, and the kept-set Jaccard against the ordinary run, with the kept
documents whose texts differ (screened and ordinary are compared by record id
and text). Extraction timeouts depend on the machine's load, so a page can be
kept by one run only for that reason: the table counts those apart. Then the
curve of threshold against speed and Jaccard over the seeds, and the verdict
against the goals at the default threshold: at least 2x DataTrove's docs/s and
a Jaccard of at least 0.995, on every seed. Exits non-zero only when a run
fails. Run nothing else meanwhile: the cores are shared.

Usage:
    python -m benchmarks.fineweb_speed [--seeds 1 2] [--thresholds 0.02 0.05 0.1 0.2 0.3 0.5]
        [--records 3000] [--files 4] [--workdir DIR] [--datatrove_venv PATH] [--results FILE]
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys

from beamtrove.stats import read_stats
from beamtrove.transforms.filters import DEFAULT_SCREEN_THRESHOLD
from benchmarks.common import (
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    verdict,
    warc_set,
)
from benchmarks.fineweb_runs import (
    fineweb_prerequisites,
    read_outcome,
    run_beamtrove_fineweb,
    run_datatrove_fineweb,
)

SPEED_GOAL = 2.0
JACCARD_GOAL = 0.995


@dataclasses.dataclass
class Measured:
    """One run of one seed."""

    name: str
    wall: float
    other_cores: float
    kept: dict[str, str] | None = None
    timed_out: frozenset[str] = frozenset()
    screened: int = 0


@dataclasses.dataclass
class Comparison:
    """A screened run's kept set against the ordinary run's."""

    jaccard: float
    lost: int
    gained: int
    load_dependent: int
    texts_differ: int


def compare(screened: Measured, ordinary: Measured) -> Comparison:
    """Kept ids and texts of a screened run against the ordinary run's."""
    ours, theirs = set(screened.kept), set(ordinary.kept)
    differing = ours ^ theirs
    return Comparison(
        jaccard=jaccard(ours, theirs),
        lost=len(theirs - ours),
        gained=len(ours - theirs),
        load_dependent=len(differing & (screened.timed_out | ordinary.timed_out)),
        texts_differ=sum(screened.kept[i] != ordinary.kept[i] for i in ours & theirs),
    )


def run_datatrove(python: pathlib.Path, warc_dir: pathlib.Path, workdir: pathlib.Path) -> Measured:
    """DataTrove's FineWeb stack."""
    run = run_datatrove_fineweb(python, warc_dir, workdir / "datatrove", workdir / "datatrove.log")
    return Measured("DataTrove 0.10.1", run.wall, run.monitor.other_cores)


def run_beamtrove(beamtrove: str, warc_dir: pathlib.Path, workdir: pathlib.Path, screen: float | None) -> Measured:
    """``beamtrove run fineweb`` with ``--language_screen screen`` (none at the default threshold); None: with the
    screen off."""
    screened = [] if screen == DEFAULT_SCREEN_THRESHOLD else ["--language_screen", str(screen)]
    folder, extra = ("ordinary", ["--no_language_screen"]) if screen is None else (f"screen-{screen}", screened)
    name = "beamtrove ordinary" if screen is None else f"beamtrove --language_screen {screen}"
    out = workdir / folder
    run = run_beamtrove_fineweb(beamtrove, warc_dir, out, workdir / f"{folder}.log", *extra)
    outcome = read_outcome(out, dead_letters=True)
    kept = {i: outcome.texts[i] for i, (step, _) in outcome.fates.items() if step == "kept"}
    timed_out = frozenset(
        i for i, (_, reason) in outcome.fates.items() if reason in ("dead_letter:timeout", "dead_letter:process_died")
    )
    counters = read_stats(str(out))["steps"].get("language_screen", {}).get("counters", {})
    screened = counters.get("dropped.language_screen", 0)
    return Measured(name, run.wall, run.monitor.other_cores, kept, timed_out, screened)


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def seed_table(
    results: Results, seed: int, records: int, runs: list[Measured]
) -> tuple[list[str], dict[str, tuple[float, Comparison]]]:
    """The markdown table of one seed (recorded), and each screened run's (speed ratio, comparison) by name."""
    datatrove, ordinary = runs[:2]
    baseline = records / datatrove.wall
    rows = []
    comparisons = {}
    for run in runs:
        speed = records / run.wall
        ratio = speed / baseline
        cells = [run.name, f"{run.wall:.1f}", f"{speed:.1f}", f"{ratio:.2f}x"]
        if run is datatrove:
            cells += ["-", "-", "-", "-", "-"]
        elif run is ordinary:
            cells += ["-", len(run.kept), "-", "-", "-"]
        else:
            comparison = compare(run, ordinary)
            comparisons[run.name] = (ratio, comparison)
            cells += [
                run.screened,
                len(run.kept),
                f"{comparison.jaccard:.4f}",
                f"{comparison.lost} / {comparison.gained} ({comparison.load_dependent})",
                comparison.texts_differ,
            ]
        rows.append([*cells, f"{run.other_cores:.2f}"])
    title = f"Seed {seed}: {records} WARC response records"
    columns = ["run", "wall s", "docs/s", "vs DataTrove", "screened out", "kept", "Jaccard vs ordinary"]
    columns += ["lost / gained (load-dependent)", "kept texts differing", "other load (cores)"]
    return [f"## {title}", "", results.table(title, columns, rows)], comparisons


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.02, 0.05, 0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--files", type=int, default=4)
    add_workdir_arguments(parser, "beamtrove-fineweb-speed")
    add_datatrove_venv_argument(parser)
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    thresholds = sorted({*args.thresholds, DEFAULT_SCREEN_THRESHOLD})
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    lines = ["# FineWeb with the language screen: speed against DataTrove 0.10.1, kept set against the ordinary run"]
    lines.append(f"\nLoad average before: {_load()}")
    curve: dict[float, list[tuple[float, Comparison]]] = {threshold: [] for threshold in thresholds}
    try:
        for seed in args.seeds:
            warc_dir = warc_set(workdir, args.records, args.files, seed)
            records = sum(1 for _ in (warc_dir / "manifest.jsonl").open())
            seed_dir = workdir / f"runs-s{seed}"
            seed_dir.mkdir(exist_ok=True)
            print(f"seed {seed}: DataTrove's FineWeb stack", file=sys.stderr)
            runs = [run_datatrove(python, warc_dir, seed_dir)]
            print(f"seed {seed}: beamtrove, ordinary", file=sys.stderr)
            runs.append(run_beamtrove(beamtrove, warc_dir, seed_dir, None))
            for threshold in thresholds:
                print(f"seed {seed}: beamtrove, --language_screen {threshold}", file=sys.stderr)
                runs.append(run_beamtrove(beamtrove, warc_dir, seed_dir, threshold))
            table, comparisons = seed_table(results, seed, records, runs)
            lines += ["", *table]
            for threshold in thresholds:
                curve[threshold].append(comparisons[f"beamtrove --language_screen {threshold}"])
    except (RuntimeError, subprocess.CalledProcessError, OSError, KeyError) as exc:
        sys.exit(f"execution failed: {exc}")
    lines.append(f"\nLoad average after: {_load()}")

    seeds = " / ".join(map(str, args.seeds))
    rows = []
    for threshold, measured in curve.items():
        marker = " (default)" if threshold == DEFAULT_SCREEN_THRESHOLD else ""
        rows.append(
            [
                f"{threshold}{marker}",
                " / ".join(f"{ratio:.2f}x" for ratio, _ in measured),
                " / ".join(f"{comparison.jaccard:.4f}" for _, comparison in measured),
                " / ".join(str(comparison.lost) for _, comparison in measured),
            ]
        )
    title = f"The curve (seeds {seeds})"
    columns = ["--language_screen", "vs DataTrove", "Jaccard vs ordinary", "kept lost"]
    lines += ["", f"## {title}", "", results.table(title, columns, rows)]

    default = curve[DEFAULT_SCREEN_THRESHOLD]
    fast = results.check(
        f"default threshold {DEFAULT_SCREEN_THRESHOLD}, every seed: docs/s at least {SPEED_GOAL}x DataTrove's",
        all(ratio >= SPEED_GOAL for ratio, _ in default),
    )
    same = results.check(
        f"default threshold {DEFAULT_SCREEN_THRESHOLD}, every seed: kept-set Jaccard at least {JACCARD_GOAL}, "
        "equal texts",
        all(comparison.jaccard >= JACCARD_GOAL and comparison.texts_differ == 0 for _, comparison in default),
    )
    lines += [
        "",
        f"Default threshold {DEFAULT_SCREEN_THRESHOLD}, every seed: docs/s at least {SPEED_GOAL}x DataTrove's "
        f"**{verdict(fast)}**; kept-set Jaccard at least {JACCARD_GOAL} with equal texts **{verdict(same)}**",
    ]
    print("\n".join(lines))
    results.write()


if __name__ == "__main__":
    main()
