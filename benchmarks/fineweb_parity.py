"""Parity and speed of ``beamtrove run fineweb`` against DataTrove 0.10.1's FineWeb stack.

Builds a WARC set with make_warc.py (unless it exists), then in the same run:

* reads the WARC files with each tool's reader alone (DataTrove's
  ``process_record`` in its venv, beamtrove's ``WarcParser`` here), noting
  why each record was skipped, to find the records both readers emit;
* runs DataTrove's FineWeb stack (WarcReader → URLFilter → Trafilatura →
  LanguageFilter → GopherRepetition → GopherQuality → C4Quality →
  FineWebQuality → JsonlWriter, one exclusion writer per filter) on
  LocalPipelineExecutor(tasks=4, workers=2), in DataTrove's venv;
* runs ``beamtrove run fineweb`` on the DirectRunner (multi_processing,
  2 workers) with the same settings: ``--languages all``, since the
  example's ``LanguageFilter()`` keeps any language scored over 0.65 in
  DataTrove 0.10.1 (beamtrove's default, English, is FineWeb's release),
  and ``--word_splitter`` as ``--word-splitter`` says (``spacy``: DataTrove's
  words, which decide differently on text without spaces);

timing each tool's wall clock and sampling the PSS and RSS of its whole
process tree from /proc every 0.2 s (GNU time misses forkserver workers).

Documents are matched by WARC-Record-ID (both tools use it as the document
id; a few URLs repeat in the set). Over the records both readers emit it
reports the Jaccard index of the kept sets, per-step drop counts of each tool,
the documents only one tool kept with the step and reason where the other
dropped them, whether both tools extracted the same text for them, and the
records only one reader emitted. The full differences go to
``<workdir>/parity_diffs.json``. Exits non-zero only when a run fails; the
PASS/FAIL lines judge the goals (Jaccard ≥ 0.99, per-step drops within 1 %,
beamtrove at least as fast).

Usage:
    python -m benchmarks.fineweb_parity [--records 3000] [--files 4] [--seed 1] [--workdir DIR]
        [--datatrove-venv PATH] [--word-splitter beamtrove|spacy]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import glob
import gzip
import json
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

from warcio.archiveiterator import ArchiveIterator

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.fs import InputFile
from beamtrove.stats import read_stats
from beamtrove.text import WORD_SPLITTERS
from beamtrove.transforms.readers.warc import WarcParser
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python
from benchmarks.measure import TreeMonitor, run_measured
from benchmarks.warc_sets import MAKE_WARC, SHARED, add_warc_set_arguments, warc_set_of

LID_MODEL = SHARED / "data" / "models" / "lid176" / "lid.176.ftz"
URL_BLOCKLIST = SHARED / "data" / "blocklists" / "ut1"

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

#: DataTrove's reason for a document that left no trace after extraction (its timeouts are only counted).
_DATATROVE_EXTRACT_DROP = "empty_or_timeout"

JACCARD_GOAL = 0.99
DROP_TOLERANCE = 0.01
SPEED_GOAL = 1.0

# Runs in DataTrove's venv: argv = WARC folder, output folder, lid model.
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


def main(warc_dir, output, lid_model):
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
    LocalPipelineExecutor(pipeline=pipeline, tasks=4, workers=2, logging_dir=f"{output}/logs").run()


if __name__ == "__main__":
    main(*sys.argv[1:])
"""

# Runs in DataTrove's venv: argv = WARC files; prints one JSON object per response record.
_DATATROVE_READER = """
import io, json, sys

import magic
from warcio.archiveiterator import ArchiveIterator
from datatrove.pipeline.readers.warc import process_record


class Replay:
    # The record with its payload already read, so that process_record can read it again.
    def __init__(self, record, payload):
        self.rec_type, self.rec_headers, self._payload = record.rec_type, record.rec_headers, payload

    def content_stream(self):
        return io.BytesIO(self._payload)


for path in sys.argv[1:]:
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type not in ("response", "conversion"):
                continue
            payload = record.content_stream().read()
            data = process_record(Replay(record, payload))
            row = {"id": record.rec_headers.get("WARC-Record-ID"), "url": record.rec_headers.get("WARC-Target-URI")}
            if data:
                row["emitted"] = True
            else:
                identified = record.rec_headers.get("WARC-Identified-Payload-Type")
                mime = identified or magic.from_buffer(payload, mime=True)
                html = mime in ("text/html", "application/xhtml+xml")
                row["emitted"] = False
                row["reason"] = ("undecodable" if html else ("identified:" if identified else "libmagic:") + mime)
            print(json.dumps(row))
"""


@dataclasses.dataclass
class Run:
    """One tool's measured run."""

    wall: float
    monitor: TreeMonitor
    docs_read: int
    extract_timeouts: int


@dataclasses.dataclass
class Outcome:
    """What one tool did with every document: ``fates[id] = (step, reason)`` and the extracted ``texts[id]``."""

    fates: dict[str, tuple[str, str]]
    texts: dict[str, str]
    urls: dict[str, str]


# --------------------------------------------------------------------------- measuring


# --------------------------------------------------------------------------- readers


def datatrove_reader(python: pathlib.Path, files: list[str]) -> dict[str, dict]:
    """Every response record as DataTrove's WarcReader sees it, by record id."""
    result = subprocess.run([str(python), "-c", _DATATROVE_READER, *files], check=True, capture_output=True, text=True)
    rows = (json.loads(line) for line in result.stdout.splitlines())
    return {row["id"]: row for row in rows}


def beamtrove_reader(files: list[str]) -> dict[str, dict]:
    """Every response record as beamtrove's WARC parser sees it, by record id."""
    parser = WarcParser()
    records = {}
    for path in files:
        # The parser yields one outcome per record: pair them with warcio's own walk to learn ids and URLs.
        with open(path, "rb") as walk:
            headers = [
                (r.rec_type, r.rec_headers.get_header("WARC-Record-ID"), r.rec_headers.get_header("WARC-Target-URI"))
                for r in ArchiveIterator(walk)
            ]
        file = InputFile(url=path, name=os.path.basename(path), size=os.path.getsize(path))
        with open(path, "rb") as stream:
            outcomes = list(parser.parse(file, stream, "ReadWarc"))
        if len(outcomes) != len(headers):
            raise RuntimeError(f"{path}: {len(outcomes)} reader outcomes for {len(headers)} records")
        for (record_type, record_id, url), outcome in zip(headers, outcomes, strict=True):
            if record_type not in ("response", "conversion"):
                continue
            row = {"id": record_id, "url": url, "emitted": isinstance(outcome, Document)}
            if isinstance(outcome, DeadLetter):
                row["reason"] = f"dead_letter:{outcome.reason}"
            elif not row["emitted"]:
                row["reason"] = outcome.reason
            records[record_id] = row
    return records


# --------------------------------------------------------------------------- outputs


def _jsonl(pattern: str) -> Iterator[dict]:
    for path in sorted(glob.glob(pattern, recursive=True)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def read_outcome(output: pathlib.Path, dead_letters: bool) -> Outcome:
    """Which step ended each document of a run, from its kept, excluded and dead-letter files."""
    fates, texts, urls = {}, {}, {}

    def note(row: dict, step: str, reason: str) -> None:
        fates[row["id"]] = (step, reason)
        texts[row["id"]] = row.get("text", "")
        urls[row["id"]] = (row.get("metadata") or {}).get("url", "")

    for row in _jsonl(str(output / "documents" / "*.jsonl.gz")):
        note(row, "kept", "")
    for step in FILTER_STEPS:
        for row in _jsonl(str(output / "excluded" / step / "*.jsonl.gz")):
            note(row, step, (row.get("metadata") or {}).get("filter_reason") or "")
    if dead_letters:
        for row in _jsonl(str(output / "dead_letters" / "**" / "*.json*")):
            if row.get("record_id"):
                fates[row["record_id"]] = (row.get("step", "?"), f"dead_letter:{row.get('reason')}")
                urls[row["record_id"]] = row.get("url", "")
    return Outcome(fates, texts, urls)


def fate_of(outcome: Outcome, record_id: str, extract_reason: str) -> tuple[str, str]:
    """A document no output holds was dropped by the extraction step."""
    return outcome.fates.get(record_id, ("extract", extract_reason))


def fineweb_prerequisites() -> str:
    """Exits unless the shared data a FineWeb benchmark needs is there; returns the beamtrove command."""
    for needed in (MAKE_WARC, LID_MODEL, URL_BLOCKLIST):
        if not needed.exists():
            sys.exit(f"{needed} is absent: keep ../shared beside the checkout")
    beamtrove = shutil.which("beamtrove")
    if beamtrove is None:
        sys.exit("the beamtrove command is not on PATH: pip install -e . first")
    return beamtrove


def datatrove_counts(logs: pathlib.Path) -> tuple[int, int]:
    """Documents DataTrove's reader emitted and extraction timeouts, from its merged stats."""
    stats = json.loads((logs / "stats.json").read_text())
    read = timeouts = None
    for step in stats:
        if "Warc" in step["name"]:
            read = step["stats"]["documents"]["total"]
        elif "Trafilatura" in step["name"]:
            timeouts = step["stats"].get("timeout", 0)
    if read is None or timeouts is None:
        raise RuntimeError(f"no WarcReader or Trafilatura stats in {logs / 'stats.json'}")
    return read, timeouts


def beamtrove_counts(stats: dict) -> tuple[int, int]:
    """Documents beamtrove's reader emitted and extraction timeouts."""
    steps = stats.get("steps", stats)
    return steps["ReadWarc"]["counters"]["out"], steps["extract"]["counters"].get("errors.timeout", 0)


# --------------------------------------------------------------------------- report


def _relative(ours: int, theirs: int) -> float:
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return abs(ours - theirs) / theirs


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"


def _reason_counts(reasons: list[str]) -> str:
    counts = collections.Counter(reasons)
    return ", ".join(f"{reason} {count}" for reason, count in counts.most_common()) or "-"


def report(
    workdir: pathlib.Path,
    dt_reader: dict[str, dict],
    bt_reader: dict[str, dict],
    dt: Outcome,
    bt: Outcome,
    dt_run: Run,
    bt_run: Run,
) -> str:
    """The markdown summary; writes the full differences to ``workdir/parity_diffs.json``."""
    dt_emitted = {i for i, row in dt_reader.items() if row["emitted"]}
    bt_emitted = {i for i, row in bt_reader.items() if row["emitted"]}
    common = sorted(dt_emitted & bt_emitted)
    dt_only = [
        {**dt_reader[i], "beamtrove_reason": bt_reader.get(i, {}).get("reason", "absent")}
        for i in sorted(dt_emitted - bt_emitted)
    ]
    bt_only = [
        {**bt_reader[i], "datatrove_reason": dt_reader.get(i, {}).get("reason", "absent")}
        for i in sorted(bt_emitted - dt_emitted)
    ]

    fates = {i: (fate_of(dt, i, _DATATROVE_EXTRACT_DROP), fate_of(bt, i, "empty")) for i in common}
    dt_kept = {i for i, (d, _) in fates.items() if d[0] == "kept"}
    bt_kept = {i for i, (_, b) in fates.items() if b[0] == "kept"}
    union = dt_kept | bt_kept
    jaccard = len(dt_kept & bt_kept) / len(union) if union else 1.0

    def url(record_id: str) -> str:
        return dt_reader[record_id]["url"]

    def same_text(record_id: str) -> bool | None:
        if record_id in dt.texts and record_id in bt.texts:
            return dt.texts[record_id] == bt.texts[record_id]
        return None

    diffs = [
        {
            "id": i,
            "url": url(i),
            "datatrove": ":".join(filter(None, d)),
            "beamtrove": ":".join(filter(None, b)),
            "same_text": same_text(i),
        }
        for i, (d, b) in fates.items()
        # DataTrove's language filter gives no reason and its extractor's drops are not told apart:
        # neither contradicts beamtrove's reason.
        if d[0] != b[0] or (d[1] not in ("", _DATATROVE_EXTRACT_DROP) and b[1] and d[1] != b[1])
    ]
    with_text = [i for i in common if i in dt.texts and i in bt.texts]
    identical_text = sum(dt.texts[i] == bt.texts[i] for i in with_text)
    crossings = collections.Counter((d[0], b[0]) for d, b in fates.values() if d[0] != b[0])
    (workdir / "parity_diffs.json").write_text(
        json.dumps(
            {
                "common_records": len(common),
                "reader_only": {"datatrove": dt_only, "beamtrove": bt_only},
                "kept_only_by": {
                    "datatrove": [d for d in diffs if d["datatrove"] == "kept"],
                    "beamtrove": [d for d in diffs if d["beamtrove"] == "kept"],
                },
                "fate_differences": diffs,
            },
            indent=1,
            ensure_ascii=False,
        )
    )

    lines = ["# FineWeb parity: beamtrove vs DataTrove 0.10.1", ""]
    lines.append(
        f"WARC records read by both readers: {len(common)} "
        f"(DataTrove's reader emitted {len(dt_emitted)}, beamtrove's {len(bt_emitted)})."
    )
    lines.append(
        f"Extracted text identical for {identical_text}/{len(with_text)} documents both tools extracted and wrote."
    )
    lines += ["", "## Kept documents", ""]
    lines.append(
        f"DataTrove kept {len(dt_kept)}, beamtrove {len(bt_kept)}, both {len(dt_kept & bt_kept)}: "
        f"Jaccard **{jaccard:.4f}** (goal ≥ {JACCARD_GOAL}) **{_verdict(jaccard >= JACCARD_GOAL)}**"
    )

    lines += ["", "## Drops per step (records both readers emitted)", ""]
    lines += ["| step | DataTrove | beamtrove | rel. diff | within 1 % |", "|---|---:|---:|---:|:---:|"]
    all_within = True
    for step in FATE_STEPS:
        theirs = sum(d[0] == step for d, _ in fates.values())
        ours = sum(b[0] == step for _, b in fates.values())
        relative = _relative(ours, theirs)
        within = relative <= DROP_TOLERANCE
        if step != "kept":
            all_within &= within
        lines.append(f"| {step} | {theirs} | {ours} | {relative:.1%} | {_verdict(within)} |")
    lines.append("")
    lines.append(f"Per-step drop counts within 1 %: **{_verdict(all_within)}**")

    lines += ["", "### Where the tools part ways (DataTrove's step → beamtrove's step: documents)", ""]
    for (d, b), count in crossings.most_common():
        lines.append(f"- {d} → {b}: {count}")
    reasons = collections.Counter(
        (d["datatrove"], d["beamtrove"]) for d in diffs if d["datatrove"].split(":")[0] != d["beamtrove"].split(":")[0]
    )
    lines += ["", "Most common (DataTrove fate, beamtrove fate) pairs:", ""]
    for (d, b), count in reasons.most_common(12):
        lines.append(f"- `{d}` / `{b}`: {count}")

    for tool, other in (("datatrove", "beamtrove"), ("beamtrove", "datatrove")):
        only = [d for d in diffs if d[tool] == "kept"]
        lines += ["", f"### Kept only by {'DataTrove' if tool == 'datatrove' else 'beamtrove'} ({len(only)})", ""]
        if only:
            lines += [f"| url | {other} dropped it at | same extracted text |", "|---|---|:---:|"]
            for d in only[:10]:
                lines.append(f"| {d['url']} | {d[other]} | {'-' if d['same_text'] is None else d['same_text']} |")

    lines += ["", "## Reader differences", ""]
    for name, only, other in (("DataTrove", dt_only, "beamtrove"), ("beamtrove", bt_only, "datatrove")):
        why = _reason_counts([row[f"{other}_reason"] for row in only])
        lines.append(f"- Emitted by {name}'s reader only: {len(only)} ({other} skipped them as: {why})")

    dt_speed, bt_speed = dt_run.docs_read / dt_run.wall, bt_run.docs_read / bt_run.wall
    ratio = bt_speed / dt_speed
    lines += ["", "## Speed and memory (whole process trees)", ""]
    lines += [
        "| tool | docs read | wall s | docs/s | peak PSS | peak RSS | extraction timeouts | other load (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, run, speed in (("DataTrove 0.10.1", dt_run, dt_speed), ("beamtrove", bt_run, bt_speed)):
        lines.append(
            f"| {name} | {run.docs_read} | {run.wall:.1f} | {speed:.1f} | {_gib(run.monitor.peak_pss)} "
            f"| {_gib(run.monitor.peak_rss)} | {run.extract_timeouts} | {run.monitor.other_cores:.2f} |"
        )
    lines.append("")
    lines.append(
        f"Speed ratio beamtrove/DataTrove: **{ratio:.2f}** (goal ≥ {SPEED_GOAL}) **{_verdict(ratio >= SPEED_GOAL)}**"
    )
    lines += ["", f"Full differences: {workdir / 'parity_diffs.json'}"]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_warc_set_arguments(parser, records=3000, files=4, workdir_name="beamtrove-fineweb-parity")
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    parser.add_argument(
        "--word-splitter",
        choices=WORD_SPLITTERS,
        default="beamtrove",
        help="beamtrove's --word_splitter (default: %(default)s); spacy splits words as DataTrove does",
    )
    args = parser.parse_args()
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    workdir, warc_dir = warc_set_of(args)
    files = sorted(glob.glob(str(warc_dir / "*.warc.gz")))

    try:
        print("reading with each reader alone", file=sys.stderr)
        dt_reader = datatrove_reader(python, files)
        bt_reader = beamtrove_reader(files)

        dt_out, bt_out = workdir / "datatrove", workdir / "beamtrove"
        # Stale output would be skipped (DataTrove's completions) or mixed in.
        for out in (dt_out, bt_out):
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
        script = workdir / "datatrove_fineweb.py"
        script.write_text(DATATROVE_FINEWEB_SCRIPT)

        print("running DataTrove's FineWeb stack", file=sys.stderr)
        wall, monitor = run_measured(
            [str(python), str(script), str(warc_dir), str(dt_out), str(LID_MODEL)], workdir / "datatrove.log"
        )
        dt_read, dt_timeouts = datatrove_counts(dt_out / "logs")
        dt_run = Run(wall, monitor, dt_read, dt_timeouts)

        print("running beamtrove's fineweb pipeline", file=sys.stderr)
        command = [
            beamtrove, "run", "fineweb",
            "--input", str(warc_dir / "*.warc.gz"),
            "--output", str(bt_out),
            "--lid_model", str(LID_MODEL),
            "--url_blocklist", str(URL_BLOCKLIST),
            "--languages", "all",
            "--word_splitter", args.word_splitter,
            "--direct_num_workers", "2",
            "--direct_running_mode", "multi_processing",
        ]  # fmt: skip
        wall, monitor = run_measured(command, workdir / "beamtrove.log")
        bt_run = Run(wall, monitor, *beamtrove_counts(read_stats(str(bt_out))))

        dt = read_outcome(dt_out, dead_letters=False)
        bt = read_outcome(bt_out, dead_letters=True)
    except (RuntimeError, subprocess.CalledProcessError, OSError, KeyError) as exc:
        sys.exit(f"execution failed: {exc}")
    print(report(workdir, dt_reader, bt_reader, dt, bt, dt_run, bt_run))


if __name__ == "__main__":
    main()
