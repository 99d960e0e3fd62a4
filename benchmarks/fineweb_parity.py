"""Parity and speed of ``beamtrove run fineweb`` against DataTrove 0.10.1's FineWeb stack.

Builds a WARC set with make_warc.py (unless it exists), then in the same run:

* reads the WARC files with each tool's reader alone (DataTrove's
  ``process_record`` in its venv, beamtrove's ``WarcParser`` here), noting
  why each record was skipped, to find the records both readers emit;
* runs DataTrove's FineWeb stack (WarcReader → URLFilter → Trafilatura →
  LanguageFilter → GopherRepetition → GopherQuality → C4Quality →
  FineWebQuality → JsonlWriter, one exclusion writer per filter) on
  LocalPipelineExecutor(tasks=4) with the workers a plain beamtrove run forks
  here (2 on a 2-core machine), in DataTrove's venv;
* runs ``beamtrove run fineweb`` with no runner option (the DirectRunner's
  workers are those beamtrove picks) and the same settings: ``--languages all``, since the
  example's ``LanguageFilter()`` keeps any language scored over 0.65 in
  DataTrove 0.10.1 (beamtrove's default, English, is FineWeb's release),
  and ``--word_splitter`` as told (``spacy``: DataTrove's words, which decide
  differently on text without spaces);

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
        [--datatrove_venv PATH] [--word_splitter beamtrove|spacy] [--results FILE]
"""

from __future__ import annotations

import collections
import glob
import json
import os
import pathlib
import subprocess
import sys

from warcio.archiveiterator import ArchiveIterator

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.formats.warc import WarcParser
from beamtrove.fs import InputFile
from beamtrove.text import WORD_SPLITTERS
from benchmarks.common import (
    GIB,
    Results,
    add_datatrove_venv_argument,
    add_warc_set_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    verdict,
    warc_set_of,
)
from benchmarks.fineweb_runs import (
    FATE_STEPS,
    Outcome,
    Run,
    fineweb_prerequisites,
    read_outcome,
    run_beamtrove_fineweb,
    run_datatrove_fineweb,
)

#: DataTrove's reason for a document that left no trace after extraction (its timeouts are only counted).
_DATATROVE_EXTRACT_DROP = "empty_or_timeout"

JACCARD_GOAL = 0.99
DROP_TOLERANCE = 0.01
SPEED_GOAL = 1.0

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


def _relative(ours: int, theirs: int) -> float:
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return abs(ours - theirs) / theirs


def _reason_counts(reasons: list[str]) -> str:
    counts = collections.Counter(reasons)
    return ", ".join(f"{reason} {count}" for reason, count in counts.most_common()) or "-"


def report(
    results: Results,
    workdir: pathlib.Path,
    readers: tuple[dict[str, dict], dict[str, dict]],
    outcomes: tuple[Outcome, Outcome],
    runs: tuple[Run, Run],
) -> str:
    """The markdown summary of DataTrove's and beamtrove's readers, outcomes and runs, in that order, recorded.

    Writes the full differences to ``workdir/parity_diffs.json``.
    """
    (dt_reader, bt_reader), (dt, bt), (dt_run, bt_run) = readers, outcomes, runs
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

    fates = {i: (dt.fate(i, _DATATROVE_EXTRACT_DROP), bt.fate(i, "empty")) for i in common}
    dt_kept = {i for i, (d, _) in fates.items() if d[0] == "kept"}
    bt_kept = {i for i, (_, b) in fates.items() if b[0] == "kept"}
    kept_jaccard = jaccard(dt_kept, bt_kept)

    def same_text(record_id: str) -> bool | None:
        if record_id in dt.texts and record_id in bt.texts:
            return dt.texts[record_id] == bt.texts[record_id]
        return None

    diffs = [
        {
            "id": i,
            "url": dt_reader[i]["url"],
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
        results.note(
            f"WARC records read by both readers: {len(common)} "
            f"(DataTrove's reader emitted {len(dt_emitted)}, beamtrove's {len(bt_emitted)})."
        )
    )
    lines.append(
        results.note(
            f"Extracted text identical for {identical_text}/{len(with_text)} documents both tools extracted and wrote."
        )
    )
    lines += ["", "## Kept documents", ""]
    passed = results.check(f"kept-set Jaccard >= {JACCARD_GOAL}", kept_jaccard >= JACCARD_GOAL)
    lines.append(
        results.note(
            f"DataTrove kept {len(dt_kept)}, beamtrove {len(bt_kept)}, both {len(dt_kept & bt_kept)}: "
            f"Jaccard **{kept_jaccard:.4f}** (goal ≥ {JACCARD_GOAL}) **{verdict(passed)}**"
        )
    )

    rows, all_within = [], True
    for step in FATE_STEPS:
        theirs = sum(d[0] == step for d, _ in fates.values())
        ours = sum(b[0] == step for _, b in fates.values())
        relative = _relative(ours, theirs)
        within = relative <= DROP_TOLERANCE
        if step != "kept":
            all_within &= within
        rows.append([step, theirs, ours, f"{relative:.1%}", verdict(within)])
    title = "Drops per step (records both readers emitted)"
    lines += ["", f"## {title}", ""]
    lines.append(results.table(title, ["step", "DataTrove", "beamtrove", "rel. diff", "within 1 %"], rows))
    all_within = results.check(f"per-step drop counts within {DROP_TOLERANCE:.0%}", all_within)
    lines += ["", f"Per-step drop counts within 1 %: **{verdict(all_within)}**"]

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
        lines.append(results.note(f"Emitted by {name}'s reader only: {len(only)} ({other} skipped them as: {why})"))

    dt_speed, bt_speed = dt_run.docs_read / dt_run.wall, bt_run.docs_read / bt_run.wall
    ratio = bt_speed / dt_speed
    title = "Speed and memory (whole process trees)"
    columns = ["tool", "docs read", "wall s", "docs/s", "peak PSS GiB", "peak RSS GiB", "extraction timeouts"]
    columns.append("other load (cores)")
    rows = [
        [
            name,
            run.docs_read,
            f"{run.wall:.1f}",
            f"{speed:.1f}",
            f"{run.monitor.peak_pss / GIB:.2f}",
            f"{run.monitor.peak_rss / GIB:.2f}",
            run.extract_timeouts,
            f"{run.monitor.other_cores:.2f}",
        ]
        for name, run, speed in (("DataTrove 0.10.1", dt_run, dt_speed), ("beamtrove", bt_run, bt_speed))
    ]
    lines += ["", f"## {title}", "", results.table(title, columns, rows), ""]
    fast = results.check(f"docs/s at least {SPEED_GOAL}x DataTrove's", ratio >= SPEED_GOAL)
    lines.append(f"Speed ratio beamtrove/DataTrove: **{ratio:.2f}** (goal ≥ {SPEED_GOAL}) **{verdict(fast)}**")
    lines += ["", f"Full differences: {workdir / 'parity_diffs.json'}"]
    return "\n".join(lines)


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=3000, files=4, workdir_name="beamtrove-fineweb-parity")
    add_datatrove_venv_argument(parser)
    parser.add_argument(
        "--word_splitter",
        choices=WORD_SPLITTERS,
        default="beamtrove",
        help="beamtrove's --word_splitter (default: %(default)s); spacy splits words as DataTrove does",
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    workdir, warc_dir = warc_set_of(args)
    files = sorted(glob.glob(str(warc_dir / "*.warc.gz")))

    try:
        print("reading with each reader alone", file=sys.stderr)
        readers = datatrove_reader(python, files), beamtrove_reader(files)
        dt_out, bt_out = workdir / "datatrove", workdir / "beamtrove"
        print("running DataTrove's FineWeb stack", file=sys.stderr)
        dt_run = run_datatrove_fineweb(python, warc_dir, dt_out, workdir / "datatrove.log")
        print("running beamtrove's fineweb pipeline", file=sys.stderr)
        options = [
            "--languages",
            "all",
            "--word_splitter",
            args.word_splitter,
        ]
        bt_run = run_beamtrove_fineweb(beamtrove, warc_dir, bt_out, workdir / "beamtrove.log", *options)
        outcomes = read_outcome(dt_out, dead_letters=False), read_outcome(bt_out, dead_letters=True)
    except (RuntimeError, subprocess.CalledProcessError, OSError, KeyError) as exc:
        sys.exit(f"execution failed: {exc}")
    print(report(results, workdir, readers, outcomes, (dt_run, bt_run)))
    results.write()


if __name__ == "__main__":
    main()
