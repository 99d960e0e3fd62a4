"""Does beamtrove's n-gram decontamination drop what DataTrove 0.10.1's drops?

The "benchmark" is the 59 inaugural addresses of ``../shared/data``: every
pair of consecutive sentences is an item (query = the first, label = the
second). The documents are extracted web pages (the JSONL output of
``beamtrove run extract``) in which pieces of benchmark items are planted, one
case per document:

* ``label``: a whole label, mid-document (contaminated);
* ``overlap``: the last 6 words of a query and the first 6 of its label (contaminated);
* ``variant``: 12 label words upper-cased, with commas, dashes and accents (contaminated: normalization);
* ``near_miss``: 11 consecutive label words (clean with 12-grams);
* ``query_only``: 12 query words (clean: query n-grams are not indexed by default).

Both tools build an index from the same items, with their defaults, and
apply it to every document. DataTrove's ``NGramsDecontIndexer`` reads the
items as input documents (text = label, metadata query and task); it also
imports ``lighteval`` for hub tasks, which this script stubs with an empty
task registry (lighteval pulls in torch and CUDA; the items come from local
files anyway). beamtrove builds with ``beamtrove run decont_index`` with each
word splitter. The script compares the index hash sets, every document's
normalized text and 12-gram hashes, and the dropped documents with their
n-gram; DataTrove's filter also reads beamtrove's spaCy index folder.

Usage:
    python -m benchmarks.decont_parity DOCUMENTS_DIR [--datatrove_venv PATH] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from beamtrove.document import Document
from beamtrove.text import normalize_text, word_splitter
from beamtrove.transforms.decont import NGramsDecontFilter, hash_ngram, word_ngrams
from beamtrove.transforms.filters import Drop
from benchmarks.common import (
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

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# lighteval as NGramsDecontIndexer checks and imports it: a registry without tasks, so only the input documents
# are indexed.
_LIGHTEVAL_STUB = {
    "lighteval-0.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: lighteval\nVersion: 0.0.0\n",
    "lighteval/__init__.py": "",
    "lighteval/tasks/__init__.py": "",
    "lighteval/tasks/lighteval_task.py": (
        "class LightevalTask:\n    @staticmethod\n    def load_datasets(tasks):\n        pass\n"
    ),
    "lighteval/tasks/registry.py": (
        "class Registry:\n    def __init__(self, **settings):\n        pass\n"
        "    def get_task_dict(self, tasks):\n        return {}\n"
    ),
}

_DATATROVE_SCRIPT = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.decont import NGramsDecontFilter, NGramsDecontIndexer
from datatrove.utils.text import simplify_text
from datatrove.utils.hashing import HashConfig, create_hash_func
from datatrove.utils.word_tokenizers import load_word_tokenizer

items_path, docs_path, index_dir, beamtrove_spacy_index = sys.argv[1:5]
items = [json.loads(line) for line in open(items_path)]
start = time.perf_counter()
indexer = NGramsDecontIndexer(output_folder=index_dir)
indexer.run(data=iter(Document(text=i["text"], id=str(n), metadata={"query": i["query"], "task": i["task"]})
                      for n, i in enumerate(items)))
index_seconds = time.perf_counter() - start
rows = [json.loads(line) for line in open(docs_path)]
tokenizer = load_word_tokenizer("eng")
hash_func = create_hash_func(HashConfig())
shingles = {}
for row in rows:
    words = tokenizer.word_tokenize(simplify_text(row["text"]))
    grams = [" ".join(words[i:i + 12]) for i in range(len(words) - 11)]
    shingles[row["id"]] = [simplify_text(row["text"]), sorted(set(map(hash_func, grams)))]
out = {"index_seconds": index_seconds, "shingles": shingles}
for name, folder in (("own_index", index_dir), ("beamtrove_spacy_index", beamtrove_spacy_index)):
    rule = NGramsDecontFilter(index_folder=folder)
    dropped = {}
    start = time.perf_counter()
    for row in rows:
        doc = Document(text=row["text"], id=row["id"])
        if rule.filter(doc) is not True:
            dropped[row["id"]] = [doc.metadata["contaminated_task"], doc.metadata["contaminated_ngram"]]
    out[name] = {"dropped": dropped, "seconds": time.perf_counter() - start}
json.dump(out, sys.stdout)
"""


def benchmark_items() -> list[dict]:
    """Consecutive sentence pairs of the inaugural addresses, as query/label items of task ``inaugural``."""
    items = []
    for text in nltk_texts("inaugural"):
        sentences = [sentence.strip() for sentence in _SENTENCE_END.split(text) if sentence.strip()]
        items.extend(
            {"query": query, "text": label, "task": "inaugural"}
            for query, label in zip(sentences[::2], sentences[1::2], strict=False)
        )
    return items


def _variant(words: list[str]) -> str:
    """The words upper-cased, with commas and dashes between them and the first vowel e accented."""
    changed = [word.upper().replace("E", "É", 1) for word in words]
    return ", ".join(changed[:4]) + " — " + " ".join(changed[4:])


def planted_documents(directory: pathlib.Path, items: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """The documents, in id order, five of them with a planted case; and which case each planted id holds."""
    rows = sorted(jsonl_rows(directory, "*.jsonl.gz"), key=lambda row: row["id"])
    long_items = [item for item in items if len(item["query"].split()) >= 14 and len(item["text"].split()) >= 14]
    label = long_items[10]["text"].split()
    query = long_items[20]["query"].split()
    cases = {
        "label": " ".join(label),
        "overlap": " ".join(long_items[30]["query"].split()[-6:] + long_items[30]["text"].split()[:6]),
        "variant": _variant(long_items[40]["text"].split()[:12]),
        "near_miss": " ".join(long_items[50]["text"].split()[:11]),
        "query_only": " ".join(query[:12]),
    }
    planted = {}
    for number, (case, passage) in enumerate(cases.items()):
        row = rows[100 + 400 * number]
        paragraphs = row["text"].split("\n")
        middle = len(paragraphs) // 2
        row["text"] = "\n".join([*paragraphs[:middle], passage, *paragraphs[middle:]])
        planted[row["id"]] = case
    return rows, planted


def _index_hashes(folder: pathlib.Path) -> set[int]:
    return {int(value) for path in folder.rglob("*.index.hashes") for value in np.fromfile(path, dtype="<u8")}


def _beamtrove_drops(index: pathlib.Path, rows: list[dict]) -> tuple[dict[str, list[str]], float]:
    rule = NGramsDecontFilter(str(index))
    rule.setup()
    dropped = {}
    start = time.perf_counter()
    for row in rows:
        verdict = rule.filter(Document(text=row["text"], id=row["id"]))
        if isinstance(verdict, Drop):
            metadata = verdict.document.metadata
            dropped[row["id"]] = [metadata["contaminated_task"], metadata["contaminated_ngram"]]
    return dropped, time.perf_counter() - start


def _same_drops(dropped: dict[str, list[str]], reference: dict[str, list[str]]) -> bool:
    return {k: v[1] for k, v in dropped.items()} == {k: v[1] for k, v in reference.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("documents", type=pathlib.Path, help="Folder of extracted documents (*.jsonl.gz).")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-decont-parity")
    args = parser.parse_args(argv)
    results = Results(__file__, __doc__, args)
    items = benchmark_items()
    rows, planted = planted_documents(args.documents, items)
    print(results.note(f"{len(items)} benchmark items; {len(rows)} documents, planted: {planted}"))
    with tempfile.TemporaryDirectory() as temp:
        work = pathlib.Path(temp)
        items_path, docs_path = write_jsonl(work / "items.jsonl", items), write_jsonl(work / "documents.jsonl", rows)
        indexes, index_seconds = {}, {}
        for splitter in ("beamtrove", "spacy"):
            indexes[splitter] = work / f"index-{splitter}"
            start = time.perf_counter()
            command = [sys.executable, "-m", "beamtrove", "run", "decont_index", "--input", str(items_path)]
            command += ["--output", str(indexes[splitter]), "--word_splitter", splitter]
            subprocess.run([*command, "--decont_index_shards", "4"], check=True, capture_output=True)
            index_seconds[splitter] = time.perf_counter() - start
            print(f"beamtrove decont_index ({splitter} words, 4 shards): {index_seconds[splitter]:.1f} s wall")
        for name, content in _LIGHTEVAL_STUB.items():
            (work / "stub" / name).parent.mkdir(parents=True, exist_ok=True)
            (work / "stub" / name).write_text(content)
        datatrove_index = work / "index-datatrove"
        script = [datatrove_python(args.datatrove_venv), "-c", _DATATROVE_SCRIPT, items_path, docs_path]
        datatrove = json_output(
            [*script, datatrove_index, indexes["spacy"]],
            env={"PYTHONPATH": str(work / "stub"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        )
        print(f"DataTrove NGramsDecontIndexer: {datatrove['index_seconds']:.1f} s")
        reference = _index_hashes(datatrove_index)
        table = [["DataTrove NGramsDecontIndexer", len(reference), len(reference), f"{datatrove['index_seconds']:.1f}"]]
        for splitter, folder in indexes.items():
            own = _index_hashes(folder)
            print(
                f"index hashes, beamtrove {splitter} vs DataTrove: {len(own)} vs {len(reference)}, "
                f"common {len(own & reference)}"
            )
            table.append(
                [
                    f"beamtrove decont_index, {splitter} words",
                    len(own),
                    len(own & reference),
                    f"{index_seconds[splitter]:.1f}",
                ]
            )
        results.table(
            "The index of the benchmark's label n-grams", ["index", "hashes", "common with DataTrove's", "s"], table
        )
        results.check(
            "beamtrove's spaCy index holds exactly DataTrove's hashes", _index_hashes(indexes["spacy"]) == reference
        )

        spacy_words = word_splitter("spacy")
        beamtrove_words = word_splitter("beamtrove")
        same_text = same_spacy = same_beamtrove = 0
        for row in rows:
            text, hashes = datatrove["shingles"][row["id"]]
            normalized = normalize_text(row["text"])
            same_text += normalized == text
            for split, counter in ((spacy_words, "spacy"), (beamtrove_words, "beamtrove")):
                own = sorted({hash_ngram(gram) for gram in word_ngrams(split(normalized), 12)})
                if counter == "spacy":
                    same_spacy += own == hashes
                else:
                    same_beamtrove += own == hashes
        print(results.note(f"normalized text equal to DataTrove's simplify_text: {same_text}/{len(rows)} documents"))
        print(
            results.note(
                f"set of 12-gram hashes equal, spacy words: {same_spacy}/{len(rows)}; beamtrove words: {same_beamtrove}"
            )
        )

        reference_drops = datatrove["own_index"]["dropped"]
        seconds = datatrove["own_index"]["seconds"]
        print(f"DataTrove filter, its own index: {len(reference_drops)} dropped in {seconds:.1f} s")
        table = [["DataTrove's filter, its own index", len(reference_drops), "", f"{seconds:.1f}"]]
        for doc_id, (task, ngram) in sorted(reference_drops.items()):
            print(f"  {planted.get(doc_id, 'not planted')}: {doc_id} {task} {ngram!r}")
        from_ours = datatrove["beamtrove_spacy_index"]["dropped"]
        same = _same_drops(from_ours, reference_drops)
        print(
            f"DataTrove filter, beamtrove's spacy index: {len(from_ours)} dropped; same documents and n-grams: {same}"
        )
        seconds = datatrove["beamtrove_spacy_index"]["seconds"]
        table.append(["DataTrove's filter, beamtrove's spaCy index", len(from_ours), same, f"{seconds:.1f}"])
        for splitter, folder in indexes.items():
            dropped, seconds = _beamtrove_drops(folder, rows)
            same = _same_drops(dropped, reference_drops)
            print(
                f"beamtrove filter, {splitter} index: {len(dropped)} dropped in {seconds:.1f} s; "
                f"same documents and n-grams as DataTrove: {same}"
            )
            table.append([f"beamtrove's filter, {splitter} index", len(dropped), same, f"{seconds:.1f}"])
            if splitter == "spacy":
                results.check("beamtrove's filter with its spaCy index drops what DataTrove's drops", same)
            for doc_id, (task, ngram) in sorted(dropped.items()):
                if reference_drops.get(doc_id, [None, None])[1] != ngram:
                    print(f"  differs: {doc_id} {task} {ngram!r} vs DataTrove {reference_drops.get(doc_id)}")
        columns = ["filter", "dropped", "same documents and n-grams as DataTrove's own", "s"]
        results.table("Documents dropped", columns, table)
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
