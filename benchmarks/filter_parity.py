"""Do beamtrove's quality filters decide as DataTrove 0.10.1's do, text for text?

Takes extracted documents (the JSONL output of ``beamtrove run extract``),
runs each quality filter of the FineWeb stack on every document on its own (not
chained, so one filter's disagreement cannot hide another's) in beamtrove and
in DataTrove (in its own venv), and prints, per filter, how many decisions
agree and the disagreements. DataTrove splits words with spaCy's English
tokenizer, beamtrove with its own regular expression (``beamtrove.text``), so
this is where a word-splitting difference shows. C4 quality also compares the
rewritten text of the documents both keep.

Usage:
    python -m benchmarks.filter_parity DOCUMENTS_DIR [--limit N] [--datatrove_venv PATH] [--show 5] [--workdir DIR]
        [--results FILE]
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

from beamtrove.assets import default_lid_model
from beamtrove.document import Document
from beamtrove.transforms.filters import (
    C4QualityFilter,
    Drop,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
)
from benchmarks.common import (
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
    jsonl_rows,
    write_jsonl,
)

_FILTERS = {
    "gopher_repetition": GopherRepetitionFilter(),
    "gopher_quality": GopherQualityFilter(),
    "c4_quality": C4QualityFilter(filter_no_terminal_punct=False),
    "fineweb_quality": FineWebQualityFilter(),
}

_DATATROVE_SCRIPT = """
import json, sys
from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter,
)
filters = {
    "gopher_repetition": GopherRepetitionFilter(),
    "gopher_quality": GopherQualityFilter(),
    "c4_quality": C4QualityFilter(filter_no_terminal_punct=False),
    "fineweb_quality": FineWebQualityFilter(),
}
out = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    decisions = {}
    for name, rule in filters.items():
        doc = Document(text=row["text"], id=row["id"])
        result = rule.filter(doc)
        if isinstance(result, tuple):
            decisions[name] = [result[1], None]
        else:
            decisions[name] = [None if result else "dropped", doc.text if name == "c4_quality" else None]
    out[row["id"]] = decisions
json.dump(out, sys.stdout)
"""


def _documents(directory: pathlib.Path, language: str | None, lid_model: str, limit: int | None) -> list[dict]:
    rows = sorted(jsonl_rows(directory, "*.jsonl.gz"), key=lambda row: row["id"])
    if language:
        # The FineWeb stack only applies these filters to what the language filter kept.
        language_filter = LanguageFilter(lid_model, languages=[language])
        language_filter.setup()
        verdicts = language_filter.filter_batch([Document(text=row["text"], id=row["id"]) for row in rows])
        rows = [row for row, verdict in zip(rows, verdicts, strict=True) if not isinstance(verdict, Drop)]
    return rows[:limit]


def _beamtrove_decisions(rows: list[dict]) -> dict:
    out = {}
    for row in rows:
        document = Document(text=row["text"], id=row["id"])
        decisions = {}
        for name, rule in _FILTERS.items():
            verdict = rule.filter(document)
            if isinstance(verdict, Drop):
                decisions[name] = [verdict.reason, None]
            else:
                decisions[name] = [None, verdict.text if name == "c4_quality" else None]
        out[row["id"]] = decisions
    return out


def _datatrove_decisions(python: pathlib.Path, rows: list[dict]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        batch = write_jsonl(pathlib.Path(scratch, "batch.jsonl"), ({"id": r["id"], "text": r["text"]} for r in rows))
        return json_output([python, "-c", _DATATROVE_SCRIPT, batch])


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("documents", type=pathlib.Path, help="folder of JSONL(.gz) documents, e.g. <output>/documents")
    parser.add_argument(
        "--language", default="en", help="only documents the language filter keeps for this language ('' for all)"
    )
    parser.add_argument("--lid_model", default=default_lid_model(), help="fastText model for --language")
    parser.add_argument("--limit", type=int, help="compare the first N documents by id")
    parser.add_argument("--show", type=int, default=5, help="disagreements to print per filter")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-filter-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    rows = _documents(args.documents, args.language, args.lid_model, args.limit)
    if not rows:
        sys.exit(f"no *.jsonl.gz documents in {args.documents}")
    theirs = _datatrove_decisions(datatrove_python(args.datatrove_venv), rows)
    ours = _beamtrove_decisions(rows)
    print(f"{len(rows)} documents from {args.documents} (language: {args.language or 'any'})\n")
    table, examples = [], {}
    for name in _FILTERS:
        agree = other_reason = ours_only = theirs_only = text_differs = 0
        for doc_id, decisions in ours.items():
            (our_reason, our_text), (their_reason, their_text) = decisions[name], theirs[doc_id][name]
            if our_reason is None and their_reason is None:
                agree += 1
                if our_text != their_text:
                    text_differs += 1
                    examples.setdefault(name, []).append((doc_id, "kept text differs", None))
            elif our_reason is not None and their_reason is not None:
                agree += 1
                other_reason += our_reason != their_reason
            else:
                ours_only += our_reason is not None
                theirs_only += their_reason is not None
                examples.setdefault(name, []).append((doc_id, our_reason, their_reason))
        table.append(
            [name, f"{agree}/{len(rows)} ({agree / len(rows):.2%})", other_reason, ours_only, theirs_only, text_differs]
        )
        results.check(f"{name}: every decision and kept text as DataTrove's", agree == len(rows) and not text_differs)
    columns = ["filter", "agree", "both drop, other reason", "beamtrove drops only", "DataTrove drops only"]
    print(results.table("Each quality filter on its own against DataTrove's", [*columns, "kept text differs"], table))
    for name, cases in examples.items():
        print(f"\n{name}: first disagreements (id, beamtrove, DataTrove)")
        for case in cases[: args.show]:
            print("  ", *case)
    results.write()


if __name__ == "__main__":
    main()
