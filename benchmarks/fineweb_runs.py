"""The FineWeb stack of each tool, run on a WARC set and read back, for the FineWeb benchmarks.

DataTrove's run is its own FineWeb example (WarcReader → URLFilter →
Trafilatura → LanguageFilter → GopherRepetition → GopherQuality → C4Quality →
FineWebQuality → JsonlWriter, one exclusion writer per filter) on
LocalPipelineExecutor(tasks=4), in its venv, with as many workers as a plain
beamtrove run forks on this machine for the same input
(:func:`default_run_workers`: 2 on a 2-core machine); beamtrove's is
``beamtrove run fineweb`` with the same blocklist and language model, as a
user types it unless a benchmark adds runner options.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import sys

from beamtrove.execution.direct_workers import default_workers
from beamtrove.stats import read_stats
from benchmarks.common import LID_MODEL, MAKE_WARC, URL_BLOCKLIST, TreeMonitor, jsonl_rows, run_measured

__all__ = [
    "DATATROVE_FINEWEB_SCRIPT",
    "FATE_STEPS",
    "FILTER_STEPS",
    "Outcome",
    "Run",
    "beamtrove_counts",
    "default_run_workers",
    "fineweb_prerequisites",
    "read_outcome",
    "run_beamtrove_fineweb",
    "run_datatrove_fineweb",
]

#: Filter steps in pipeline order, named as beamtrove names them; DataTrove's run uses the same folder names.
FILTER_STEPS = (
    "url_filter",
    "language_filter",
    "gopher_repetition",
    "gopher_quality",
    "c4_quality",
    "fineweb_quality",
)
#: Every way a document can end, in pipeline order.
FATE_STEPS = ("url_filter", "extract", *FILTER_STEPS[1:], "kept")

# Runs in DataTrove's venv: argv = WARC folder, output folder, lid model, workers.
DATATROVE_FINEWEB_SCRIPT = """
import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    URLFilter,
)
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter

# LocalPipelineExecutor's forkserver workers preload this module, and the
# extraction sandbox they fork then starts with trafilatura imported. Otherwise
# every new sandbox imports it within its 1 s warm-up: on a loaded machine that
# times out, and each timeout restarts the sandbox into the next timeout, so
# every later document of the task is lost.
import trafilatura  # noqa: F401


def main(warc_dir, output, lid_model, workers):
    def excluded(step):
        return JsonlWriter(f"{output}/excluded/{step}")

    # As in DataTrove's FineWeb example: no languages given, which in 0.10.1 keeps every language over 0.65.
    language = LanguageFilter(exclusion_writer=excluded("language_filter"))
    # No model-path argument; on the instance so that forkserver workers see it.
    language.model.MODEL_URL = lid_model
    language.model.MODEL_SUBFOLDER = "beamtrove-parity-lid176-ftz"
    pipeline = [
        WarcReader(warc_dir, glob_pattern="*.warc.gz"),
        URLFilter(exclusion_writer=excluded("url_filter")),
        # As DataTrove's own FineWeb example configures it, every other setting its default.
        Trafilatura(favour_precision=True),
        language,
        GopherRepetitionFilter(exclusion_writer=excluded("gopher_repetition")),
        GopherQualityFilter(exclusion_writer=excluded("gopher_quality")),
        C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=excluded("c4_quality")),
        FineWebQualityFilter(exclusion_writer=excluded("fineweb_quality")),
        JsonlWriter(f"{output}/documents"),
    ]
    LocalPipelineExecutor(pipeline=pipeline, tasks=4, workers=int(workers), logging_dir=f"{output}/logs").run()


if __name__ == "__main__":
    main(*sys.argv[1:])
"""


@dataclasses.dataclass
class Run:
    """One tool's measured run: wall seconds, its process tree, documents its reader emitted, extraction timeouts."""

    wall: float
    monitor: TreeMonitor
    docs_read: int
    extract_timeouts: int


@dataclasses.dataclass
class Outcome:
    """What one tool did with every document: ``fates[id] = (step, reason)``, the extracted ``texts[id]``, URLs."""

    fates: dict[str, tuple[str, str]]
    texts: dict[str, str]
    urls: dict[str, str]

    def fate(self, record_id: str, extract_reason: str) -> tuple[str, str]:
        """The step and reason that ended a document; one no output holds was dropped by the extraction step."""
        return self.fates.get(record_id, ("extract", extract_reason))


def fineweb_prerequisites() -> str:
    """Exits unless the shared data a FineWeb benchmark needs is there; returns the beamtrove command."""
    for needed in (MAKE_WARC, LID_MODEL, URL_BLOCKLIST):
        if not needed.exists():
            sys.exit(f"{needed} is absent: keep ../shared beside the checkout")
    beamtrove = shutil.which("beamtrove")
    if beamtrove is None:
        sys.exit("the beamtrove command is not on PATH: pip install -e . first")
    return beamtrove


def _fresh(folder: pathlib.Path) -> None:
    # Stale output would be skipped (DataTrove's completions) or mixed in.
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def default_run_workers(warc_dir: pathlib.Path) -> int:
    """The SDK workers a plain ``beamtrove run fineweb`` over the WARC files of ``warc_dir`` forks on this machine."""
    files = list(warc_dir.glob("*.warc.gz"))
    return default_workers(len(files), sum(path.stat().st_size for path in files))


def run_datatrove_fineweb(python: pathlib.Path, warc_dir: pathlib.Path, output: pathlib.Path, log: pathlib.Path) -> Run:
    """DataTrove's FineWeb stack on ``warc_dir`` into a fresh ``output``, its script written beside ``output``, with
    the workers a plain beamtrove run would have.

    Raises:
        RuntimeError: The run failed or left no reader and extractor stats.
    """
    _fresh(output)
    script = output.parent / "datatrove_fineweb.py"
    script.write_text(DATATROVE_FINEWEB_SCRIPT)
    wall, monitor = run_measured([python, script, warc_dir, output, LID_MODEL, default_run_workers(warc_dir)], log)
    stats = json.loads((output / "logs" / "stats.json").read_text())
    read = timeouts = None
    for step in stats:
        if "Warc" in step["name"]:
            read = step["stats"]["documents"]["total"]
        elif "Trafilatura" in step["name"]:
            timeouts = step["stats"].get("timeout", 0)
    if read is None or timeouts is None:
        raise RuntimeError(f"no WarcReader or Trafilatura stats in {output / 'logs' / 'stats.json'}")
    return Run(wall, monitor, read, timeouts)


def run_beamtrove_fineweb(
    beamtrove: str, warc_dir: pathlib.Path, output: pathlib.Path, log: pathlib.Path, *options: str
) -> Run:
    """``beamtrove run fineweb`` on ``warc_dir`` into a fresh ``output`` with the shared assets and ``options``."""
    _fresh(output)
    command = [beamtrove, "run", "fineweb", "--input", str(warc_dir / "*.warc.gz"), "--output", str(output)]
    command += ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST), *options]
    wall, monitor = run_measured(command, log)
    return Run(wall, monitor, *beamtrove_counts(read_stats(str(output))))


def beamtrove_counts(stats: dict) -> tuple[int, int]:
    """Documents beamtrove's reader emitted and extraction timeouts, from a run's (or a merge's) stats."""
    steps = stats["steps"]
    # The reader is the first step a run records, whatever its label.
    reader = next(iter(steps.values()))
    return reader["counters"]["out"], steps["extract"]["counters"].get("errors.timeout", 0)


def read_outcome(output: pathlib.Path, dead_letters: bool) -> Outcome:
    """Which step ended each document of a run, from its kept, excluded and dead-letter files."""
    fates, texts, urls = {}, {}, {}

    def note(row: dict, step: str, reason: str) -> None:
        fates[row["id"]] = (step, reason)
        texts[row["id"]] = row.get("text", "")
        urls[row["id"]] = (row.get("metadata") or {}).get("url", "")

    for row in jsonl_rows(output / "documents", "*.jsonl.gz"):
        note(row, "kept", "")
    for step in FILTER_STEPS:
        for row in jsonl_rows(output / "excluded" / step, "*.jsonl.gz"):
            note(row, step, (row.get("metadata") or {}).get("filter_reason") or "")
    if dead_letters:
        for row in jsonl_rows(output / "dead_letters", "**/*.json*"):
            if row.get("record_id"):
                fates[row["record_id"]] = (row.get("step", "?"), f"dead_letter:{row.get('reason')}")
                urls[row["record_id"]] = row.get("url", "")
    return Outcome(fates, texts, urls)
