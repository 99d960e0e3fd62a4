"""Why DataTrove dropped at extraction pages that beamtrove extracted, in a fineweb_parity run.

DataTrove's Trafilatura step extracts every page of a task (one WARC file
here) in one long-lived process, and trafilatura's ``deduplicate`` option
remembers the text segments of every page that process saw: a copy of a page
met earlier in the task can come out empty. A timeout also leaves no text.
beamtrove clears that memory before each page, so a page's text does not
depend on which pages a worker happened to see first.

For each document of ``parity_diffs.json`` that DataTrove dropped at
extraction and beamtrove did not, this replays the document's WARC file in
order through trafilatura with the memory kept across pages (as in
DataTrove's task) and again alone, and says which explains the difference:
``cross-page dedup`` when the replay comes out empty but the page alone does
not, otherwise ``timeout or other``.

Usage:
    python -m benchmarks.explain_extraction_differences [--workdir /tmp/beamtrove-fineweb-parity] [--results FILE]
"""

from __future__ import annotations

import json
import sys

import trafilatura
from trafilatura.deduplication import LRU_TEST

from beamtrove.document import Document
from beamtrove.fs import match_inputs
from beamtrove.transforms.readers import WarcParser
from benchmarks.common import Results, add_workdir_arguments, argument_parser

# DataTrove's Trafilatura settings in fineweb_parity: its own, so trafilatura keeps tables.
_OPTIONS = {"favor_precision": True, "include_comments": False, "deduplicate": True}


def main() -> None:
    parser = argument_parser(__doc__)
    add_workdir_arguments(parser, "beamtrove-fineweb-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    diffs = json.loads((args.workdir / "parity_diffs.json").read_text())["fate_differences"]
    wanted = {
        row["id"]: row
        for row in diffs
        if row["datatrove"].startswith("extract:") and not row["beamtrove"].startswith("extract:")
    }
    if not wanted:
        sys.exit("no document that DataTrove dropped at extraction and beamtrove did not")
    warcs = sorted(args.workdir.glob("warc-*/*.warc.gz"))
    causes, rows = {}, []
    for warc in match_inputs([str(path) for path in warcs], (".warc.gz",), None):
        LRU_TEST.clear()  # a new DataTrove task, a new extraction process
        with open(warc.url.removeprefix("file://"), "rb") as stream:
            for outcome in WarcParser().parse(warc, stream, "explain"):
                if not isinstance(outcome, Document):
                    continue
                in_task = trafilatura.extract(outcome.text, **_OPTIONS) or ""
                if outcome.id in wanted:
                    memory = LRU_TEST.cache.copy()
                    LRU_TEST.clear()
                    alone = trafilatura.extract(outcome.text, **_OPTIONS) or ""
                    LRU_TEST.cache = memory  # the task goes on with what it remembered
                    causes[outcome.id] = "cross-page dedup" if not in_task and alone else "timeout or other"
                    rows.append([causes[outcome.id], len(in_task), len(alone), outcome.metadata["url"]])
    columns = ["cause", "characters extracted in the task", "alone", "url"]
    print(results.table("Pages DataTrove dropped at extraction and beamtrove did not", columns, rows))
    counts = ", ".join(f"{list(causes.values()).count(cause)} {cause}" for cause in sorted(set(causes.values())))
    print(f"\n{results.note(f'{len(wanted)} documents: {counts}')}")
    results.write()


if __name__ == "__main__":
    main()
