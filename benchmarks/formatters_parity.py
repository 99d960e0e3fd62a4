"""Do beamtrove's formatters and C4 paragraph filter give DataTrove 0.10.1's texts and decisions?

Takes extracted documents (the JSONL output of ``beamtrove run extract``) and
runs each block on every document on its own (not chained), in beamtrove and
in DataTrove (in its own venv, with its defaults), in the same order.
DataTrove's PII formatter carries its turn of placeholders over from one
document to the next, beamtrove's starts it over in each document (a text
must not depend on which documents a worker saw before): the row
``pii, DataTrove per document`` compares beamtrove's PII texts with those of
a fresh DataTrove formatter per document, which isolates the masking itself.
Prints, per block, the documents, how many texts (or keep/drop decisions and
reasons) are identical, how many documents the block changed (or dropped),
and the first differences.

Usage:
    python -m benchmarks.formatters_parity DOCUMENTS_DIR [--limit N] [--datatrove_venv PATH] [--show 5]
        [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile
import time

from beamtrove.document import Document
from beamtrove.transforms.filters import C4ParagraphFilter, Drop
from beamtrove.transforms.formatters import FTFYFormatter, PIIFormatter, SymbolLinesFormatter
from benchmarks.common import (
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jsonl_rows,
    write_jsonl,
)

_BLOCKS = {
    "ftfy": FTFYFormatter,
    "symbol_lines": SymbolLinesFormatter,
    "pii": PIIFormatter,
    "c4_paragraph": C4ParagraphFilter,
}

_PII_PER_DOCUMENT = "pii, DataTrove per document"

# Writes {block: {"results": {id: text or [reason]}, "seconds": s}} to argv[2] (argv[3] names the PII row of a
# fresh formatter per document); a drop is a one-item list.
_DATATROVE_SCRIPT = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import C4ParagraphFilter
from datatrove.pipeline.formatters import FTFYFormatter, PIIFormatter, SymbolLinesFormatter
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
blocks = {
    "ftfy": FTFYFormatter(),
    "symbol_lines": SymbolLinesFormatter(),
    "pii": PIIFormatter(),
    "c4_paragraph": C4ParagraphFilter(),
}
out = {}
for name, block in blocks.items():
    started = time.perf_counter()
    results = {}
    for row in rows:
        if name == "c4_paragraph":
            verdict = block.filter(Document(text=row["text"], id=row["id"]))
            results[row["id"]] = [verdict[1]] if isinstance(verdict, tuple) else row["text"]
        else:
            results[row["id"]] = block.format(row["text"])
    out[name] = {"results": results, "seconds": time.perf_counter() - started}
started = time.perf_counter()
results = {row["id"]: PIIFormatter().format(row["text"]) for row in rows}
out[sys.argv[3]] = {"results": results, "seconds": time.perf_counter() - started}
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def _documents(directory: pathlib.Path, limit: int | None) -> list[dict]:
    rows = sorted(({"id": row["id"], "text": row["text"]} for row in jsonl_rows(directory)), key=lambda row: row["id"])
    return rows[:limit]


def _beamtrove_results(rows: list[dict]) -> dict:
    out = {}
    for name, block_class in _BLOCKS.items():
        block = block_class()
        started = time.perf_counter()
        results = {}
        for row in rows:
            verdict = block.filter(Document(text=row["text"], id=row["id"]))
            results[row["id"]] = [verdict.reason] if isinstance(verdict, Drop) else verdict.text
        out[name] = {"results": results, "seconds": time.perf_counter() - started}
    out[_PII_PER_DOCUMENT] = out["pii"]
    return out


def _datatrove_results(rows: list[dict], venv: pathlib.Path) -> dict:
    python = datatrove_python(venv)
    with tempfile.TemporaryDirectory() as scratch:
        batch, result = write_jsonl(pathlib.Path(scratch, "batch.jsonl"), rows), pathlib.Path(scratch, "result.json")
        subprocess.run([str(python), "-c", _DATATROVE_SCRIPT, str(batch), str(result), _PII_PER_DOCUMENT], check=True)
        return json.loads(result.read_text(encoding="utf-8"))


def _first_difference(ours: str | list, theirs: str | list) -> str:
    if isinstance(ours, list) or isinstance(theirs, list):
        our_decision = ours if isinstance(ours, list) else "kept"
        their_decision = theirs if isinstance(theirs, list) else "kept"
        return f"beamtrove {our_decision}, DataTrove {their_decision}"
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs)))
    return f"at {at}: beamtrove {ours[max(0, at - 30) : at + 30]!r}, DataTrove {theirs[max(0, at - 30) : at + 30]!r}"


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("documents", type=pathlib.Path, help="folder of JSONL(.gz) documents, e.g. <output>/documents")
    parser.add_argument("--limit", type=int, help="compare the first N documents by id")
    parser.add_argument("--show", type=int, default=5, help="differences to print per block")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-formatters-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    rows = _documents(args.documents, args.limit)
    if not rows:
        sys.exit(f"no *.jsonl(.gz) documents in {args.documents}")
    theirs = _datatrove_results(rows, args.datatrove_venv)
    ours = _beamtrove_results(rows)
    texts = {row["id"]: row["text"] for row in rows}
    print(f"{len(rows)} documents from {args.documents}\n")
    table, differences = [], {}
    for name in (*_BLOCKS, _PII_PER_DOCUMENT):
        our_results, their_results = ours[name]["results"], theirs[name]["results"]
        differing = [doc_id for doc_id in texts if our_results[doc_id] != their_results[doc_id]]
        touched = sum(our_results[doc_id] != text for doc_id, text in texts.items())
        identical = len(rows) - len(differing)
        table.append(
            [
                name,
                len(rows),
                f"{identical} ({identical / len(rows):.2%})",
                len(differing),
                touched,
                f"{ours[name]['seconds']:.2f}",
                f"{theirs[name]['seconds']:.2f}",
            ]
        )
        differences[name] = [
            (doc_id, _first_difference(our_results[doc_id], their_results[doc_id])) for doc_id in differing
        ]
    columns = ["block", "documents", "identical", "differ", "changed / dropped by the block", "beamtrove s"]
    print(results.table("Each block on its own against DataTrove's", [*columns, "DataTrove s"], table))
    for name, cases in differences.items():
        # DataTrove's PII formatter carries its turn of placeholders across documents: the per-document row is the goal.
        if name != "pii":
            results.check(f"{name}: every text or decision identical to DataTrove's", not cases)
        if cases:
            print(f"\n{name}: first differences (id, where)")
            for doc_id, where in cases[: args.show]:
                print("  ", doc_id, where)
    results.write()


if __name__ == "__main__":
    main()
