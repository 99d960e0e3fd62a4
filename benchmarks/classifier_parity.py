"""Do FastTextClassifierFilter and UnigramLogProbFilter decide as DataTrove 0.10.1's do, with the same model and table?

Runs both tools, DataTrove in its own venv, on every document of a folder of
extracted documents (the JSONL output of ``beamtrove run extract``):

- ``FastTextClassifierFilter`` with the same fastText model, DataTrove's
  defaults otherwise, in document, paragraph and sentence mode: decisions,
  kept texts and the label scores written to the metadata.
- ``UnigramLogProbFilter`` with the same ``word,count`` table: DataTrove
  reads it where its download would be cached (``unigram_freq.csv`` under
  ``$HF_ASSETS_CACHE/datatrove/filters/unigram_logprob_filter/``, in a
  temporary ``HF_ASSETS_CACHE``), beamtrove from its path. By default the
  table is wordfreq's English frequencies as counts (beamtrove's default
  table); ``--unigram_table`` gives another (Google's ``unigram_freq.csv``).
  beamtrove is run with each of its word splitters.

Without ``--model`` a small classifier is trained first, as ``beamtrove
train-classifier --balance`` does: positives from the NLTK corpora and the
Wikipedia excerpt in ../shared/data/text-corpora, negatives the documents
themselves.

Usage:
    python -m benchmarks.classifier_parity [DOCUMENTS_DIR] [--model MODEL] [--save_model PATH] [--unigram_table CSV]
        [--show 3] [--datatrove_venv PATH] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import bz2
import csv
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

from beamtrove.cli.train_classifier import TrainingSettings, train_classifier
from beamtrove.document import Document
from beamtrove.transforms.filters import Drop
from beamtrove.transforms.filters.classifier import FastTextClassifierFilter
from beamtrove.transforms.filters.unigram import UnigramLogProbFilter, wordfreq_unigram_counts
from benchmarks.common import (
    TEXT_CORPORA,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
    jsonl_rows,
    nltk_texts,
    write_jsonl,
)

_DOCUMENTS = pathlib.Path("/tmp/shared19/extract3k/documents")

#: name -> settings given to both filters (beyond the model).
_CLASSIFIER_SETTINGS = {
    "document, keep hq >= 0.5": {"keep_labels": ("hq", 0.5)},
    "paragraph, keep hq >= 0.5": {"keep_labels": ("hq", 0.5), "filter_mode": "paragraph"},
    "sentence, remove lq >= 0.9": {"remove_labels": ("lq", 0.9), "filter_mode": "sentence"},
}

_DATATROVE_SCRIPT = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import FastTextClassifierFilter, UnigramLogProbFilter
model, settings, documents = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
rows = [json.loads(line) for line in open(documents)]
out = {"classifier": {}, "seconds": {}}
for name, options in settings.items():
    options = {**options, "filter_mode": options.get("filter_mode", "document").upper()}
    options = {key: tuple(value) if key.endswith("labels") else value for key, value in options.items()}
    rule = FastTextClassifierFilter(model, **options)
    start = time.perf_counter()
    decisions = {}
    for row in rows:
        doc = Document(text=row["text"], id=row["id"])
        kept = rule.filter(doc)
        labels = {key: value for key, value in doc.metadata.items() if key.startswith("__label__")}
        decisions[row["id"]] = [bool(kept), doc.text if kept else None, labels]
    out["seconds"][name] = time.perf_counter() - start
    out["classifier"][name] = decisions
rule = UnigramLogProbFilter()
start = time.perf_counter()
out["unigram"] = {row["id"]: bool(rule.filter(Document(text=row["text"], id=row["id"]))) for row in rows}
out["seconds"]["unigram"] = time.perf_counter() - start
json.dump(out, sys.stdout)
"""


def _corpus_texts() -> list[str]:
    """State of the Union, inaugural addresses, movie reviews and the Wikipedia excerpt's articles."""
    texts = [text for corpus in ("state_union", "inaugural", "movie_reviews") for text in nltk_texts(corpus)]
    wikipedia = TEXT_CORPORA / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    xml = bz2.decompress(wikipedia.read_bytes()).decode("utf-8")
    pages = (page.group(1) for page in re.finditer(r"<text[^>]*>(.*?)</text>", xml, re.DOTALL))
    texts.extend(page for page in pages if not page.startswith("#REDIRECT"))
    return texts


def _train(rows: list[dict], folder: pathlib.Path) -> pathlib.Path:
    model = folder / "classifier.bin"
    settings = TrainingSettings(dim=32, bucket=100_000, balance=True)
    scores = train_classifier(_corpus_texts(), [row["text"] for row in rows], model, settings)
    for score in scores:
        print(f"trained: held out {score.label}: {score.held_out}, precision {score.precision:.4f}, ", end="")
        print(f"recall {score.recall:.4f}")
    return model


def _write_table(counts: dict[str, int], path: pathlib.Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["word", "count"])
        writer.writerows(counts.items())


def _ours(model: pathlib.Path, rows: list[dict], table: str) -> tuple[dict, dict]:
    documents = [Document(text=row["text"], id=row["id"]) for row in rows]
    out, seconds = {"classifier": {}}, {}
    for name, settings in _CLASSIFIER_SETTINGS.items():
        rule = FastTextClassifierFilter(str(model), **settings)
        rule.setup()
        start = time.perf_counter()
        verdicts = [v for at in range(0, len(documents), 256) for v in rule.filter_batch(documents[at : at + 256])]
        seconds[name] = time.perf_counter() - start
        out["classifier"][name] = {
            document.id: [
                not isinstance(verdict, Drop),
                None if isinstance(verdict, Drop) else verdict.text,
                {
                    key: value
                    for key, value in (verdict.document if isinstance(verdict, Drop) else verdict).metadata.items()
                    if key.startswith("__label__")
                },
            ]
            for document, verdict in zip(documents, verdicts, strict=True)
        }
    for splitter in ("spacy", "beamtrove"):
        rule = UnigramLogProbFilter(table=table, word_splitter=splitter)
        rule.setup()
        start = time.perf_counter()
        out[f"unigram ({splitter} words)"] = {d.id: not isinstance(rule.filter(d), Drop) for d in documents}
        seconds[f"unigram ({splitter} words)"] = time.perf_counter() - start
    return out, seconds


def _theirs(model: pathlib.Path, rows: list[dict], table: pathlib.Path, venv: pathlib.Path) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory(prefix="datatrove-assets-") as assets:
        cached = pathlib.Path(assets, "datatrove", "filters", "unigram_logprob_filter")
        cached.mkdir(parents=True)
        (cached / "unigram_freq.csv").symlink_to(table.resolve())
        documents = write_jsonl(
            pathlib.Path(assets, "documents.jsonl"), ({"id": r["id"], "text": r["text"]} for r in rows)
        )
        command = [datatrove_python(venv), "-c", _DATATROVE_SCRIPT, model, json.dumps(_CLASSIFIER_SETTINGS), documents]
        out = json_output(command, env={**os.environ, "HF_ASSETS_CACHE": assets})
    return out, out.pop("seconds")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("documents", type=pathlib.Path, nargs="?", default=_DOCUMENTS, help="folder of *.jsonl.gz")
    parser.add_argument("--model", type=pathlib.Path, help="fastText classifier with labels hq and lq")
    parser.add_argument("--save_model", type=pathlib.Path, help="keep the model trained here at this path")
    parser.add_argument(
        "--unigram_table",
        type=pathlib.Path,
        help="word,count CSV; default: wordfreq's, as counts",
    )
    parser.add_argument("--show", type=int, default=3, help="differences to print per comparison")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-classifier-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    rows = sorted(jsonl_rows(args.documents, "*.jsonl.gz"), key=lambda row: row["id"])
    if not rows:
        sys.exit(f"no *.jsonl.gz documents in {args.documents}")
    with tempfile.TemporaryDirectory(prefix="classifier-parity-") as folder:
        model = args.model or _train(rows, pathlib.Path(folder))
        if args.save_model and not args.model:
            shutil.copyfile(model, args.save_model)
        table = args.unigram_table
        if table is None:
            table = pathlib.Path(folder, "unigram_freq.csv")
            _write_table(wordfreq_unigram_counts(), table)
        ours, our_seconds = _ours(model, rows, str(table))
        theirs, their_seconds = _theirs(model, rows, table, args.datatrove_venv)
    print(f"{len(rows)} documents from {args.documents}; model {args.model or 'trained here'}; table {table.name}\n")
    examples = {}
    comparisons = [
        (f"classifier: {name}", ours["classifier"][name], theirs["classifier"][name], name, name)
        for name in _CLASSIFIER_SETTINGS
    ]
    comparisons += [(name, ours[name], theirs["unigram"], name, "unigram") for name in ours if name != "classifier"]
    lines = []
    for title, mine, other, my_timing, their_timing in comparisons:
        agree = ours_only = theirs_only = text_differs = scores_differ = 0
        for doc_id, decision in mine.items():
            if isinstance(decision, bool):
                (kept, text, labels), (their_kept, their_text, their_labels) = (
                    (decision, None, {}),
                    (other[doc_id], None, {}),
                )
            else:
                (kept, text, labels), (their_kept, their_text, their_labels) = decision, other[doc_id]
            agree += kept == their_kept
            ours_only += kept and not their_kept
            theirs_only += their_kept and not kept
            text_differs += kept and their_kept and text != their_text
            scores_differ += labels != their_labels
            if kept != their_kept or labels != their_labels or (kept and their_kept and text != their_text):
                examples.setdefault(title, []).append((doc_id, kept, their_kept))
        lines.append(
            [
                title,
                f"{agree}/{len(mine)}",
                ours_only,
                theirs_only,
                text_differs,
                scores_differ,
                f"{our_seconds[my_timing]:.2f}",
                f"{their_seconds[their_timing]:.2f}",
            ]
        )
        results.check(f"{title}: every decision identical to DataTrove's", title not in examples)
    columns = ["comparison", "agreeing decisions", "beamtrove keeps only", "DataTrove keeps only", "kept text differs"]
    columns += ["label scores differ", "beamtrove s", "DataTrove s"]
    print(results.table("Decisions against DataTrove's on the same documents", columns, lines))
    for title, cases in examples.items():
        print(f"\n{title}: first differences (id, beamtrove keeps, DataTrove keeps)")
        for case in cases[: args.show]:
            print("  ", *case)
    results.write()


if __name__ == "__main__":
    main()
