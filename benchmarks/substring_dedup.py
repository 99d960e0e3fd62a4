"""Exact-substring removal: beamtrove's SubstringDedup against DataTrove's ExactSubstr and the paper's tool.

On the same JSONL documents, runs

* DataTrove 0.10.1's ESDatasetToSequence (one task per file) and
  ESMergeSequences, then the suffix-array tool of google-research/
  deduplicate-text-datasets (``make``, ``self-similar --length-threshold 100``,
  ``collect``; 100 bytes = 50 GPT-2 tokens), then ESRangeRemover
  (min_doc_words 50), in its venv, back to back;
* beamtrove's SubstringDedup (GPT-2, 50 tokens, 50 words) on the DirectRunner;

and prints wall time, speed ratio and peak PSS (whole process tree and its
largest process) of each. With ``--parity`` it also compares the results
document by document: identical texts, and for the others the causes found:

* ``first_kept``: the document holds the first occurrence of a repeated run,
  which beamtrove keeps and the tool's ranges remove (the paper's
  ``self-similar`` reports every occurrence, the first one included);
* ``tool_ranges``: the tool's token ranges are not the union of the repeated
  50-token windows (``edge``: a range at the start or end of a document, where
  the 12-byte separators DataTrove writes between documents extend 100-byte
  matches by a few tokens; ``inner``: elsewhere, an odd-byte match);
* ``replace``: ESRangeRemover decodes each range and ``str.replace``-s it out
  of the text, which also removes other copies of that string in the
  document, and removes nothing when the range starts or ends inside a
  character (its decoded text holds U+FFFD);
* ``short_uncut``: DataTrove drops documents under 50 words even when
  nothing was cut; beamtrove only excludes documents its cuts left short;
* ``word_count``: DataTrove's cut text has 50 words or more by beamtrove's
  ``split_words`` but DataTrove dropped it, or fewer and DataTrove kept it:
  spaCy's English tokenizer, which DataTrove counts with, takes a run of
  Chinese or Japanese without spaces as one word (``split_words``: each
  character), and splits some tokens differently.

The built tool is not part of beamtrove: pass its path with ``--tool``
(``cargo build --release`` in a checkout of the paper's repository gives
``target/release/dedup_dataset``).

Usage:
    python -m benchmarks.substring_dedup --tool PATH [--input DIR | --records N ...] [--parity]
        [--workdir DIR] [--tokenizer PATH] [--datatrove_venv PATH] [--runner_mode in_memory|multi_processing]
        [--results FILE]
"""

from __future__ import annotations

import array
import bisect
import collections
import pathlib
import shutil
import sys

from tokenizers import Tokenizer

from beamtrove.text import split_words
from beamtrove.transforms.dedup.substrings import cut_token_spans, merge_spans
from benchmarks.common import (
    GIB,
    REPOSITORY,
    TOKENIZER,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jsonl_rows,
    read_jsonl,
    run_measured,
)
from benchmarks.dedup_inputs import split_documents

_SEPARATOR = 12
_WINDOW = 50

# Runs in DataTrove's venv: argv = JSONL folder, work folder, tasks, tokenizer, tool. Prints each stage's seconds.
_DATATROVE_ES = """
import subprocess, sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.exact_substrings import ESDatasetToSequence, ESMergeSequences, ESRangeRemover
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

source, work, tasks, tokenizer, tool = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sequence = work + "/es/dataset.big_sequence"
read = lambda: JsonlReader(source, glob_pattern="*.jsonl.gz")


def executor(number, pipeline, stage_tasks, workers):
    logs = f"{work}/logs/{number}"
    return LocalPipelineExecutor(pipeline=pipeline, tasks=stage_tasks, workers=workers, logging_dir=logs)


def tool_stage():
    subprocess.run([tool, "make", "--data-file", sequence], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [tool, "self-similar", "--data-file", sequence, "--length-threshold", "100", "--cache-dir", work + "/cache",
         "--num-threads", "2"], check=True, stdout=subprocess.DEVNULL)
    with open(work + "/es/dataset.bytearange", "w") as out:
        subprocess.run([tool, "collect", "--data-file", sequence, "--cache-dir", work + "/cache",
                        "--length-threshold", "100"], check=True, stdout=out)


stages = [
    ("1 sequences", lambda: executor(1, [read(), ESDatasetToSequence(work + "/es", tokenizer)], tasks, 2).run()),
    ("2 merge", lambda: executor(2, [ESMergeSequences(work + "/es", tasks_stage_1=tasks)], 1, 1).run()),
    ("tool", tool_stage),
    ("3 remove", lambda: executor(3, [
        read(), ESRangeRemover(work + "/es", tokenizer, min_doc_words=50), JsonlWriter(work + "/kept")
    ], tasks, 2).run()),
]
for name, run in stages:
    start = time.perf_counter()
    run()
    print(f"stage {name}: {time.perf_counter() - start:.2f} s", flush=True)
"""

# Runs beamtrove's transform: argv = repository, JSONL folder, output folder, tokenizer, runner mode.
_BEAMTROVE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from beamtrove.document import Document
from beamtrove.transforms.dedup.substrings import SubstringDedup

source, out, tokenizer, mode = sys.argv[2:6]
options = ["--direct_running_mode", mode] + (["--direct_num_workers", "2"] if mode == "multi_processing" else [])


def document(line):
    row = json.loads(line)
    return Document(row["text"], row["id"])


def row(document):
    return json.dumps({"id": document.id, "text": document.text}, ensure_ascii=False)


with beam.Pipeline(options=PipelineOptions(options)) as pipeline:
    result = (
        pipeline | beam.io.ReadFromText(source + "/*.jsonl.gz") | "Parse" >> beam.Map(document)
        | SubstringDedup(tokenizer)
    )
    _ = result.kept | "KeptRows" >> beam.Map(row) | "WriteKept" >> beam.io.WriteToText(out + "/kept", ".jsonl")
    _ = result.excluded | "ExcludedRows" >> beam.Map(row) | "WriteExcluded" >> beam.io.WriteToText(
        out + "/excluded", ".jsonl"
    )
"""


def _rows(folder: pathlib.Path, pattern: str) -> dict[str, str]:
    return {row["id"]: row["text"] for row in jsonl_rows(folder, pattern)}


def _source_documents(source: pathlib.Path) -> list[list[tuple[str, str]]]:
    """``(id, text)`` per file, in the order DataTrove's tasks read them."""
    return [[(row["id"], row["text"]) for row in read_jsonl([path])] for path in sorted(source.glob("*.jsonl.gz"))]


def _tool_token_ranges(work: pathlib.Path, files: list[list[tuple[str, str]]], tokens: dict[str, list[int]]):
    """The tool's byte ranges as merged token spans per document (bytes rounded inwards to whole tokens)."""
    lines = (work / "es" / "dataset.bytearange").read_text().splitlines()
    ranges = [tuple(map(int, line.split())) for line in lines[lines.index("out") + 1 :]] if "out" in lines else []
    blocks = []
    position = 0
    for documents in files:
        for key, _ in documents:
            size = _SEPARATOR + 2 * len(tokens[key])
            blocks.append((position, position + size, key))
            position += size
    spans = collections.defaultdict(list)
    starts = [start for start, _, _ in blocks]
    for begin, end in ranges:
        index = max(0, bisect.bisect_right(starts, begin) - 1)
        while index < len(blocks) and blocks[index][0] < end:
            start, stop, key = blocks[index]
            low, high = max(begin, start + _SEPARATOR) - start, min(end, stop) - start
            low += low % 2
            high -= high % 2
            if low < high:
                spans[key].append(((low - _SEPARATOR) // 2, (high - _SEPARATOR) // 2))
            index += 1
    return {key: merge_spans(value) for key, value in spans.items()}


def _window_spans(order: list[str], tokens: dict[str, list[int]]):
    """``(all copies, all but the first)`` merged token spans of repeated 50-token windows, per document."""
    first, count = {}, collections.Counter()
    for key in order:
        data = bytes(memoryview(_pack(tokens[key])))
        for start in range(len(tokens[key]) - _WINDOW + 1):
            window = hash(data[4 * start : 4 * (start + _WINDOW)])
            count[window] += 1
            first.setdefault(window, (key, start))
    every, later = {}, {}
    for key in order:
        data = bytes(memoryview(_pack(tokens[key])))
        all_spans, later_spans = [], []
        for start in range(len(tokens[key]) - _WINDOW + 1):
            window = hash(data[4 * start : 4 * (start + _WINDOW)])
            if count[window] > 1:
                all_spans.append((start, start + _WINDOW))
                if first[window] != (key, start):
                    later_spans.append((start, start + _WINDOW))
        every[key], later[key] = merge_spans(all_spans), merge_spans(later_spans)
    return every, later


def _pack(ids: list[int]) -> array.array:
    return array.array("I", ids)


def _replace_cut(tokenizer, text: str, ids: list[int], spans) -> str:
    """What ESRangeRemover leaves: each span decoded, then every occurrence of it replaced by nothing."""
    for start, end in spans:
        text = text.replace(tokenizer.decode(ids[start:end]), "")
    return text


def _parity(
    results: Results, source: pathlib.Path, ours: pathlib.Path, theirs: pathlib.Path, tokenizer_path: str
) -> None:
    tokenizer = Tokenizer.from_file(tokenizer_path)
    files = _source_documents(source)
    texts = {key: text for documents in files for key, text in documents}
    encodings = {key: tokenizer.encode(text, add_special_tokens=False) for key, text in texts.items()}
    tokens = {key: encoding.ids for key, encoding in encodings.items()}
    tool = _tool_token_ranges(theirs, files, tokens)
    every, later = _window_spans(sorted(texts), tokens)
    kept_ours, excluded_ours = _rows(ours, "kept*.jsonl"), _rows(ours, "excluded*.jsonl")
    kept_theirs = _rows(theirs / "kept", "*.jsonl.gz")
    causes = collections.Counter()
    identical = expected_ours = simulated = dt_cut = 0
    for key, text in texts.items():
        ids, offsets = tokens[key], encodings[key].offsets
        ours_text = kept_ours.get(key)
        theirs_text = kept_theirs.get(key)
        reference = cut_token_spans(text, offsets, later[key])
        if ours_text == (reference if key not in excluded_ours else None):
            expected_ours += 1
        dt_cut += bool(tool.get(key))
        replaced = _replace_cut(tokenizer, text, ids, tool.get(key, []))
        if theirs_text is None or theirs_text == replaced:
            simulated += theirs_text is not None
        if ours_text == theirs_text:
            identical += 1
            continue
        found = []
        if later[key] != every[key]:
            found.append("first_kept")
        if tool.get(key, []) != every[key]:
            edge = all(start == 0 or end == len(ids) for start, end in set(tool.get(key, [])) ^ set(every[key]))
            found.append("tool_ranges:edge" if edge else "tool_ranges:inner")
        if replaced != cut_token_spans(text, offsets, tool.get(key, [])):
            found.append("replace")
        if theirs_text is None and ours_text is not None and len(split_words(ours_text)) < 50:
            found.append("short_uncut")
        elif (theirs_text is None) == (len(split_words(replaced)) >= 50):
            found.append("word_count")
        causes["+".join(found) or "unexplained"] += 1
    total = len(texts)
    agree_all = sum(tool.get(key, []) == every[key] for key in texts)
    lines = [
        f"parity on {total} documents: same result (same text or both dropped) {identical} ({identical / total:.1%})",
        f"  beamtrove equals the plain-Python first-kept window reference on {expected_ours}/{total}",
        f"  DataTrove's kept texts equal decode+replace of the tool's ranges on {simulated}/{len(kept_theirs)}",
        f"  documents cut: beamtrove {sum(bool(v) for v in later.values())}, tool {dt_cut}",
        f"  tool's token ranges == union of repeated 50-token windows (all copies) on {agree_all}/{total}",
        *(f"  differs: {cause}: {count}" for cause, count in causes.most_common()),
    ]
    for line in lines:
        results.note(f"{source.name}: {line.strip()}")
        print(line)
    results.check(f"{source.name}: beamtrove equals the first-kept window reference", expected_ours == total)


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--tool", type=pathlib.Path, required=True, help="the built dedup_dataset binary")
    parser.add_argument("--input", type=pathlib.Path, action="append", default=[], help="folder of *.jsonl.gz")
    parser.add_argument("--records", type=int, nargs="*", default=[], help="make_warc sets (e.g. 10200 102000)")
    parser.add_argument("--parity", action="store_true", help="compare the results document by document")
    add_workdir_arguments(parser, "beamtrove-dedup")
    parser.add_argument("--tokenizer", default=str(TOKENIZER))
    add_datatrove_venv_argument(parser)
    parser.add_argument("--runner_mode", default="in_memory", choices=("in_memory", "multi_processing"))
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not args.tool.is_file():
        parser.error(f"--tool {args.tool} is not a file: build deduplicate-text-datasets with cargo build --release")
    python = datatrove_python(args.datatrove_venv)
    sources = list(args.input)
    for records in args.records:
        files = 4 if records <= 20_000 else 8
        sources.append(split_documents(args.workdir, records=records, files=files, extractor="resiliparse", parts=4))
    args.workdir.mkdir(parents=True, exist_ok=True)

    runs = []
    for source in sources:
        documents = sum(len(rows) for rows in _source_documents(source))
        tasks = len(list(source.glob("*.jsonl.gz")))
        ours = args.workdir / f"substring-beamtrove-{source.name}"
        theirs = args.workdir / f"substring-datatrove-{source.name}"
        shutil.rmtree(ours, ignore_errors=True)
        shutil.rmtree(theirs, ignore_errors=True)
        print(f"{source}: {documents} documents: beamtrove ...", file=sys.stderr)
        command = [sys.executable, "-c", _BEAMTROVE, str(REPOSITORY), str(source), str(ours), args.tokenizer]
        wall, monitor = run_measured([*command, args.runner_mode], args.workdir / f"{ours.name}.log")
        runs.append(("beamtrove", documents, wall, monitor))
        print(f"{source}: DataTrove ...", file=sys.stderr)
        theirs.mkdir(parents=True)
        log = args.workdir / f"{theirs.name}.log"
        command = [str(python), "-c", _DATATROVE_ES, str(source), str(theirs), str(tasks), args.tokenizer]
        dt_wall, dt_monitor = run_measured([*command, str(args.tool.resolve())], log)
        runs.append(("DataTrove", documents, dt_wall, dt_monitor))
        stages = [line for line in log.read_text().splitlines() if line.startswith("stage ")]
        print(f"    {results.note(f'{source.name}: DataTrove stages: ' + '; '.join(stages))}")
        if args.parity:
            _parity(results, source, ours, theirs, args.tokenizer)

    table = [
        [
            tool,
            documents,
            f"{wall:.1f}",
            f"{documents / wall:.0f}",
            f"{monitor.peak_pss / GIB:.2f}",
            f"{monitor.peak_process_pss / GIB:.2f}",
        ]
        for tool, documents, wall, monitor in runs
    ]
    columns = ["tool", "docs", "wall s", "docs/s", "peak PSS GiB", "largest process GiB"]
    print(results.table("Exact substrings against DataTrove's ExactSubstr and the paper's tool", columns, table))
    for index in range(0, len(runs), 2):
        ours, theirs = runs[index], runs[index + 1]
        print(results.note(f"{ours[1]} docs: beamtrove {theirs[2] / ours[2]:.2f}x DataTrove's speed"))
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
