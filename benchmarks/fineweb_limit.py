"""How far the FineWeb runs are from the work they must do: beamtrove and DataTrove beside the work limit.

For each seed of ``--seeds``, builds a make_warc.py set (3000 records in 4
files unless told otherwise; reused when present), then measures one after
the other on this machine:

* the work limit, ordinary and screened: the calls ``beamtrove run fineweb``
  makes (the WARC parser, the URL filter, the language screen when screened,
  trafilatura, the language filter and the Gopher, C4 and FineWeb quality
  filters, each built from the pipeline's own parsed options) on the same
  pages, in a plain pool of forked processes taking a WARC file each, as many
  as the workers a plain ``beamtrove run fineweb`` forks here (2 on a 2-core
  machine): no Beam, no extraction sandbox, nothing written, nothing counted,
  its process tree sampled for memory as the runs' are;
* ``beamtrove run fineweb`` as a user types it, the language screen on at
  its default (or with ``--language_screen`` when ``--screen`` names another
  threshold), and with ``--no_language_screen``: no runner option, so the
  DirectRunner's workers are the ones beamtrove picks for the machine;
* DataTrove 0.10.1's FineWeb stack as its FineWeb example sets it, on
  LocalPipelineExecutor(tasks=4) with as many workers, in its venv.

Prints each run's wall, beamtrove's wall as a multiple of its limit's, the
speed of each beamtrove run as a multiple of DataTrove's, and the kept-set
Jaccard of each beamtrove run against its limit (the same calls: a difference
is a page whose extraction timed out in the sandbox) and against DataTrove's
English documents. Then where beamtrove's time goes: per stage, the CPU
seconds the limit's workers spent on it beside the seconds the runner measured
in beamtrove's step, and what no step accounts for (Beam's start-up and the
moves between steps, over the workers). Run nothing else meanwhile: the
cores are shared.

Each seed's runs are made ``--rounds`` times over, one round after the
other; in a round each limit runs right before its beamtrove run, then
DataTrove's runs. Each ratio is judged by its median over the rounds: this
machine's single-core speed drifts by up to a factor of two within a minute,
so one pair of runs can be far off.

Usage:
    python -m benchmarks.fineweb_limit [--seeds 1 2] [--screen 0.1] [--records 3000] [--files 4] [--rounds 3]
        [--workdir DIR] [--datatrove_venv PATH] [--results FILE] [--no-datatrove]
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import os
import pathlib
import statistics
import sys
import time
from collections.abc import Sequence

from beamtrove.document import Document
from beamtrove.formats.records import RecordReader, match_files
from beamtrove.formats.warc import WarcParser
from beamtrove.option_parsing import parse
from beamtrove.options import WordSplitterOptions
from beamtrove.pipelines import pipeline_spec
from beamtrove.pipelines.common import ExtractionOptions
from beamtrove.pipelines.steps import LanguageOptions, URLFilterOptions
from beamtrove.stats import read_stats
from beamtrove.transforms.extractors import Trafilatura
from beamtrove.transforms.filters import (
    DEFAULT_SCREEN_THRESHOLD,
    C4QualityFilter,
    Drop,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    LanguageScreen,
    URLFilter,
)
from benchmarks.common import (
    LID_MODEL,
    URL_BLOCKLIST,
    Results,
    TreeMonitor,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    jsonl_rows,
    warc_set,
)
from benchmarks.fineweb_parity import datatrove_reader
from benchmarks.fineweb_runs import (
    default_run_workers,
    fineweb_prerequisites,
    read_outcome,
    run_beamtrove_fineweb,
    run_datatrove_fineweb,
)

# The stages of the limit, named as beamtrove's fineweb names its steps.
_READ, _EXTRACT, _SCREEN = "read", "extract", "language_screen"
_BEFORE_EXTRACTION = ("url_filter", _SCREEN)
_LANGUAGE = "language_filter"
# Filters of one document at a time (batch size 1): beamtrove's fused steps pass each document through them in turn.
_QUALITY = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
_STAGES = (_READ, *_BEFORE_EXTRACTION, _EXTRACT, _LANGUAGE, *_QUALITY)


@dataclasses.dataclass
class _Limit:
    """One run of the work limit: its wall, the CPU seconds of each stage over the workers, the ids it kept, and how
    many workers it had."""

    wall: float
    cpu: dict[str, float]
    kept: set[str]
    workers: int


def _rules(screen: float | None) -> tuple[WarcParser, dict, Trafilatura]:
    """The parser, filters (by step name, in order) and extractor of the fineweb pipeline, from its own options."""
    argv = ["--input", "-", "--output", "-", "--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
    options = parse(pipeline_spec("fineweb"), [*argv, *(["--language_screen", str(screen)] if screen else [])])
    language = options.view_as(LanguageOptions)
    languages = [code.strip() for code in language.languages.split(",")]
    splitter = options.view_as(WordSplitterOptions).word_splitter
    extraction = options.view_as(ExtractionOptions)
    filters = {"url_filter": URLFilter(options.view_as(URLFilterOptions).url_blocklist)}
    if screen:
        filters[_SCREEN] = LanguageScreen(language.lid_model, languages, screen)
    filters |= {
        "language_filter": LanguageFilter(language.lid_model, languages, language.language_threshold),
        "gopher_repetition": GopherRepetitionFilter(word_splitter=splitter),
        "gopher_quality": GopherQualityFilter(word_splitter=splitter),
        "c4_quality": C4QualityFilter(filter_no_terminal_punct=False),
        "fineweb_quality": FineWebQualityFilter(word_splitter=splitter),
    }
    parser = WarcParser(max_payload_bytes=extraction.max_payload_bytes)
    return parser, filters, Trafilatura(include_tables=not extraction.no_include_tables)


# What each worker of the limit's pool holds: set up once per process, as a runner's worker holds its steps.
_WORK: dict = {}


def _set_up(screen: float | None) -> None:
    parser, filters, extractor = _rules(screen)
    for rule in (*filters.values(), extractor):
        rule.setup()
    _WORK.update(reader=RecordReader(parser, progress_interval=None), filters=filters, extractor=extractor)


def _filtered(rule, documents: list[Document]) -> list[Document]:
    kept = []
    for start in range(0, len(documents), rule.batch_size):
        batch = documents[start : start + rule.batch_size]
        kept += [verdict for verdict in rule.filter_batch(batch) if not isinstance(verdict, Drop)]
    return kept


def _work(file) -> tuple[dict[str, float], list[str]]:
    """One WARC file through every stage: the CPU seconds of each, and the ids of the documents kept."""
    cpu: dict[str, float] = collections.defaultdict(float)
    started = time.process_time()
    documents = [outcome for outcome in _WORK["reader"].read_file(file, _READ) if isinstance(outcome, Document)]
    cpu[_READ] += time.process_time() - started

    def stage(name: str, run) -> list[Document]:
        started = time.process_time()
        result = run()
        cpu[name] += time.process_time() - started
        return result

    filters = _WORK["filters"]
    for name in (name for name in _BEFORE_EXTRACTION if name in filters):
        documents = stage(name, lambda rule=filters[name], given=documents: _filtered(rule, given))
    extract = _WORK["extractor"].extract
    extracted = ((document, extract(document.text)) for document in documents)
    documents = stage(
        _EXTRACT, lambda: [dataclasses.replace(document, text=text) for document, text in extracted if text]
    )
    documents = stage(_LANGUAGE, lambda: _filtered(filters[_LANGUAGE], documents))
    # One document through every quality filter before the next, as beamtrove's steps take it: the word splitter's
    # cache then splits its text once for the three filters that count words, not once per filter.
    kept = [document for document in documents if _passes_quality(filters, document, cpu)]
    return dict(cpu), [document.id for document in kept]


def _passes_quality(filters: dict, document: Document, cpu: dict[str, float]) -> bool:
    """Whether ``document`` passes every quality filter, each one's CPU seconds added to ``cpu``."""
    for name in _QUALITY:
        started = time.process_time()
        (verdict,) = filters[name].filter_batch([document])
        cpu[name] += time.process_time() - started
        if isinstance(verdict, Drop):
            return False
        document = verdict
    return True


def _run_limit(warc_dir: pathlib.Path, screen: float | None) -> _Limit:
    # The largest files first, so that the workers end about together.
    files = sorted(match_files(str(warc_dir / "*.warc.gz"), WarcParser()), key=lambda file: -file.size)
    workers = default_run_workers(warc_dir)
    started = time.perf_counter()
    # Sampled as beamtrove's and DataTrove's runs are (run_measured): the sampling costs each run alike.
    with (
        TreeMonitor(os.getpid()),
        multiprocessing.get_context("fork").Pool(workers, initializer=_set_up, initargs=(screen,)) as pool,
    ):
        done = pool.map(_work, files, chunksize=1)
    wall = time.perf_counter() - started
    cpu: dict[str, float] = collections.defaultdict(float)
    kept: set[str] = set()
    for seconds, ids in done:
        for name, value in seconds.items():
            cpu[name] += value
        kept.update(ids)
    return _Limit(wall, dict(cpu), kept, workers)


def _kept(output: pathlib.Path) -> set[str]:
    return {record for record, (step, _) in read_outcome(output, dead_letters=False).fates.items() if step == "kept"}


def _english(output: pathlib.Path) -> set[str]:
    """DataTrove's kept documents that its language filter found English."""
    rows = jsonl_rows(output / "documents", "*.jsonl.gz")
    return {row["id"] for row in rows if (row.get("metadata") or {}).get("language") == "en"}


def _emitted_by_datatrove(python: pathlib.Path, warc_dir: pathlib.Path) -> set[str]:
    """The records DataTrove's WARC reader passes on: it skips pages libmagic does not call HTML, beamtrove reads
    them, so kept sets are compared over the records both readers pass on (as ``benchmarks.fineweb_parity``)."""
    records = datatrove_reader(python, sorted(str(path) for path in warc_dir.glob("*.warc.gz")))
    return {record for record, row in records.items() if row["emitted"]}


def _breakdown(limit: _Limit, steps: dict, wall: float) -> list[list]:
    """Per stage: the limit's CPU seconds, beamtrove's step seconds and their difference; then what is left."""
    rows, measured = [], 0.0
    for name in (name for name in _STAGES if name in limit.cpu or name in steps):
        seconds = steps.get(name, {}).get("seconds", 0.0)
        measured += seconds
        rows.append(
            [name, f"{limit.cpu.get(name, 0.0):.1f}", f"{seconds:.1f}", f"{seconds - limit.cpu.get(name, 0.0):+.1f}"]
        )
    writing = sum(entry.get("seconds", 0.0) for name, entry in steps.items() if name not in _STAGES)
    rows.append(["writing and summary statistics", "0.0", f"{writing:.1f}", f"{writing:+.1f}"])
    rest = limit.workers * wall - measured - writing
    rows.append([f"in no step ({limit.workers} x wall - the steps)", "", f"{rest:.1f}", f"{rest:+.1f}"])
    return rows


def _round(beamtrove: str, python, warcs: pathlib.Path, runs: pathlib.Path, screen: float) -> dict:
    """One round: each limit right before its beamtrove run, then DataTrove's run.

    Returns, by run name (``ordinary``, ``screened``): the limit, beamtrove's wall, kept set and step stats;
    and ``datatrove``: its wall (None when left out).
    """
    measured = {}
    # The screened run is the default run, unless another threshold is asked for.
    screened = () if screen == DEFAULT_SCREEN_THRESHOLD else ("--language_screen", str(screen))
    for name, options in (("ordinary", ("--no_language_screen",)), ("screened", screened)):
        # The pair a ratio compares runs back to back: the machine's speed drifts less within one pair.
        limit = _run_limit(warcs, screen if name == "screened" else None)
        output = runs / f"beamtrove-{name}"
        run = run_beamtrove_fineweb(beamtrove, warcs, output, runs / f"beamtrove-{name}.log", *options)
        measured[name] = (limit, run.wall, _kept(output), read_stats(str(output))["steps"])
    datatrove = None if python is None else run_datatrove_fineweb(python, warcs, runs / "datatrove", runs / "dt.log")
    measured["datatrove"] = None if datatrove is None else datatrove.wall
    return measured


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="make_warc.py seeds (default: 1 2)")
    parser.add_argument("--screen", type=float, default=DEFAULT_SCREEN_THRESHOLD, help="--language_screen threshold")
    parser.add_argument("--records", type=int, default=3000, help="make_warc.py records (default: %(default)s)")
    parser.add_argument("--files", type=int, default=4, help="make_warc.py files (default: %(default)s)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every run per seed, one after the other; ratios are each round's, judged by their median "
        "(default: %(default)s)",
    )
    parser.add_argument("--no-datatrove", action="store_true", help="leave DataTrove's run out")
    add_workdir_arguments(parser, "beamtrove-fineweb-limit")
    add_datatrove_venv_argument(parser)
    args = parser.parse_args(argv)
    beamtrove = fineweb_prerequisites()
    results = Results(__file__, __doc__, args)
    python = None if args.no_datatrove else datatrove_python(args.datatrove_venv)
    # By run name: per seed, the median over rounds of beamtrove's wall over its limit's, and of DataTrove's over
    # beamtrove's.
    of_limit, speedups = collections.defaultdict(list), collections.defaultdict(list)
    for seed in args.seeds:
        warcs = warc_set(args.workdir, args.records, args.files, seed)
        runs = args.workdir / f"runs-s{seed}"
        runs.mkdir(parents=True, exist_ok=True)
        rounds = [_round(beamtrove, python, warcs, runs, args.screen) for _ in range(args.rounds)]
        english = both_read = None
        if python is not None:
            english, both_read = _english(runs / "datatrove"), _emitted_by_datatrove(python, warcs)
        rows = []
        for name in ("ordinary", "screened"):
            limit_walls = [measured[name][0].wall for measured in rounds]
            walls = [measured[name][1] for measured in rounds]
            ratios = [wall / limit for wall, limit in zip(walls, limit_walls, strict=True)]
            of_limit[name].append(statistics.median(ratios))
            cells = [f"{value:.1f}" for value in (*limit_walls, *walls)]
            speedup = ""
            if python is not None:
                datatrove = [measured["datatrove"] for measured in rounds]
                speedups[name].append(statistics.median(dt / wall for dt, wall in zip(datatrove, walls, strict=True)))
                speedup = f"{speedups[name][-1]:.2f}x"
            kept = [measured[name][2] for measured in rounds]
            limit_kept = rounds[-1][name][0].kept
            same = all(kept_set == kept[0] for kept_set in kept)
            versus = f"{jaccard(kept[0] & both_read, english):.4f}" if english is not None else ""
            rows.append(
                [
                    name,
                    " / ".join(cells[: args.rounds]),
                    " / ".join(cells[args.rounds :]),
                    " / ".join(f"{ratio:.2f}x" for ratio in ratios),
                    f"{of_limit[name][-1]:.2f}x",
                    speedup,
                    f"{jaccard(kept[0], limit_kept):.4f}" + ("" if same else " (rounds differ)"),
                    versus,
                ]
            )
        columns = [
            "run",
            "limit wall s, per round",
            "beamtrove wall s, per round",
            "of the limit, per round",
            "of the limit, median",
            "DataTrove's wall / beamtrove's, median",
            "kept Jaccard vs limit",
            "vs DataTrove's English (records both read)",
        ]
        workers = rounds[-1]["ordinary"][0].workers
        title = f"seed {seed}: {args.records} records, {args.rounds} rounds, {workers} workers each"
        if python is not None:
            title += ", DataTrove " + " / ".join(f"{measured['datatrove']:.1f}" for measured in rounds) + " s"
        print(f"\n{title}\n{results.table(title, columns, rows)}")
        for name in ("ordinary", "screened"):
            limit, wall, _, steps = rounds[-1][name]
            columns = ["stage", "limit CPU s", "beamtrove s", "beamtrove - limit"]
            title = f"seed {seed}, {name}: where the time goes (last round)"
            print(f"\n{title}\n{results.table(title, columns, _breakdown(limit, steps, wall))}")
    for name, ceiling in (("ordinary", 1.3), ("screened", 1.4)):
        passed = max(of_limit[name]) <= ceiling
        print(results.check(f"{name} run within {ceiling}x of its work limit on every seed (median of rounds)", passed))
    if python is not None:
        passed = min(speedups["screened"]) >= 3.0
        print(results.check("screened run at least 3.0x DataTrove's speed on every seed (median of rounds)", passed))
    results.write()


if __name__ == "__main__":
    sys.exit(main())
