"""Whether the language screen loses documents: screened ``beamtrove run fineweb`` against the screen-off run.

Inputs: make_warc.py sets of ``--records`` records in ``--files`` files for each
seed of ``--seeds`` (reused when present), and the real WARC files of
``../shared/data/warc``. On each, runs ``beamtrove run fineweb`` with the
screen off and with the screen (the plain command at the default threshold,
``--language_screen T`` for another; no runner option: the DirectRunner's
workers are those beamtrove picks for the machine), and compares their kept
sets: per
input and pooled over every input (documents keyed by input and id), the
pages read, the pages screened out, the kept-set Jaccard, the documents lost
and gained (those whose extraction timed out in one of the runs counted
apart: that depends on the machine's load) and the kept documents whose texts
differ. Lists every document the screen lost, with its URL. The goal: at
least 10,000 pages read, and a pooled Jaccard of at least 0.999.

Usage:
    python -m benchmarks.screen_safety [--seeds 1 2 3] [--records 3400] [--files 4] [--threshold 0.1]
        [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import pathlib
import sys

from beamtrove.stats import read_stats
from beamtrove.transforms.filters import DEFAULT_SCREEN_THRESHOLD
from benchmarks.common import WARC_DIR, Results, add_workdir_arguments, argument_parser, jaccard, warc_set
from benchmarks.fineweb_runs import beamtrove_counts, fineweb_prerequisites, read_outcome
from benchmarks.fineweb_speed import Measured, compare, run_beamtrove

PAGES_GOAL = 10_000
JACCARD_GOAL = 0.999


def _pages(output: pathlib.Path) -> int:
    """The pages a run read: the documents its reader passed on."""
    return beamtrove_counts(read_stats(str(output)))[0]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--records", type=int, default=3400)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--threshold", type=float, default=DEFAULT_SCREEN_THRESHOLD)
    add_workdir_arguments(parser, "beamtrove-screen-safety")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    beamtrove = fineweb_prerequisites()
    workdir = args.workdir.resolve()
    inputs = {f"seed {seed}": warc_set(workdir, args.records, args.files, seed) for seed in args.seeds}
    inputs["real WARCs"] = WARC_DIR
    rows, lost_rows = [], []
    pooled: dict[str, set] = {"screened": set(), "ordinary": set()}
    totals = {"read": 0, "screened": 0, "lost": 0, "gained": 0, "load": 0, "texts": 0}
    for name, warcs in inputs.items():
        runs = workdir / f"runs-{name.replace(' ', '-')}"
        runs.mkdir(parents=True, exist_ok=True)
        print(f"{name}: screen off, then --language_screen {args.threshold}", file=sys.stderr)
        ordinary: Measured = run_beamtrove(beamtrove, warcs, runs, None)
        screened: Measured = run_beamtrove(beamtrove, warcs, runs, args.threshold)
        comparison = compare(screened, ordinary)
        read = _pages(runs / "ordinary")
        outcome = read_outcome(runs / "ordinary", dead_letters=True)
        for record in sorted(set(ordinary.kept) - set(screened.kept)):
            load = record in screened.timed_out | ordinary.timed_out
            lost_rows.append([name, record, outcome.urls.get(record, ""), "yes" if load else "no"])
        pooled["screened"] |= {(name, record) for record in screened.kept}
        pooled["ordinary"] |= {(name, record) for record in ordinary.kept}
        for key, value in (
            ("read", read),
            ("screened", screened.screened),
            ("lost", comparison.lost),
            ("gained", comparison.gained),
            ("load", comparison.load_dependent),
            ("texts", comparison.texts_differ),
        ):
            totals[key] += value
        rows.append(
            [
                name,
                read,
                screened.screened,
                len(ordinary.kept),
                f"{comparison.jaccard:.4f}",
                f"{comparison.lost} / {comparison.gained} ({comparison.load_dependent})",
                comparison.texts_differ,
                f"{ordinary.wall:.1f} / {screened.wall:.1f}",
            ]
        )
    overall = jaccard(pooled["screened"], pooled["ordinary"])
    rows.append(
        [
            "all",
            totals["read"],
            totals["screened"],
            len(pooled["ordinary"]),
            f"{overall:.4f}",
            f"{totals['lost']} / {totals['gained']} ({totals['load']})",
            totals["texts"],
            "",
        ]
    )
    columns = ["input", "pages read", "screened out", "kept (screen off)", "Jaccard", "lost / gained (load)"]
    columns += ["kept texts differing", "wall s off / screened"]
    print(results.table(f"--language_screen {args.threshold} against the screen-off run", columns, rows))
    print(results.table("Documents the screen lost", ["input", "id", "url", "timed out in a run"], lost_rows))
    print(results.check(f"at least {PAGES_GOAL:,} pages read", totals["read"] >= PAGES_GOAL))
    print(results.check(f"pooled kept-set Jaccard at least {JACCARD_GOAL}", overall >= JACCARD_GOAL))
    results.write()


if __name__ == "__main__":
    main()
