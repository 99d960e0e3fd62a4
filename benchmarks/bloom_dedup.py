"""Bloom-filter dedup against DataTrove 0.10.1's SingleBloomFilter: kept-set agreement, wall time and memory.

For each size, a make_warc.py set (real pages plus exact and near copies) is
extracted once with resiliparse and split into 4 JSONL files
(:func:`benchmarks.dedup_inputs.split_documents`). Then:

* beamtrove's :class:`~beamtrove.transforms.dedup.bloom.BloomDedup` runs on
  the DirectRunner, in a process of its own, reading the 4 files: once exact
  (``fpr`` 0), which also counts the distinct shingles, then at ``--fpr``
  with ``expected_shingles`` set to that count. Both give the same kept set
  by design; the second reports its filter's measured false-positive rate.
* DataTrove's SingleBloomFilter runs in its venv, in one task (it is
  sequential), on the same documents in id order (beamtrove's
  :class:`KeepOrder`), twice: with a filter whose real false-positive rate is
  about 0, and with one whose real rate is about ``--fpr``. Only ``m_bytes``
  and ``expected_elements`` are chosen; ``k`` is DataTrove's own derivation.
  DataTrove picks bit positions with ``hash & m_bytes`` instead of
  ``hash % (8 * m_bytes)``, so only the positions whose bits lie inside
  ``m_bytes``'s are reachable: an ``m_bytes`` of the form ``2**j - 1`` is the
  only one that uses ``m_bytes`` bits (of the ``8 * m_bytes`` allocated), and
  those are the sizes picked here. Its ``k`` is 8 times the optimum for
  even its nominal size (``get_optimal_k`` multiplies by 8 a size already in
  bits), so ``expected_elements`` is set to get the ``k`` wanted. The real
  false-positive rate is printed beside the rate DataTrove's own formula gives.
* An untimed pass in DataTrove's venv recomputes, for every document, the
  fraction of repeated shingles with DataTrove's own shingles (simplified
  text, spaCy words, 32-bit xxhash) and an exact set: it tells whether a
  difference comes from DataTrove's filter or from the shingles.

It prints the kept-set Jaccard of each DataTrove run with beamtrove's and the
differing ids with their explanation, wall time, the speed ratio, and peak
PSS of the whole process tree and of its largest process.

Usage:
    python -m benchmarks.bloom_dedup [--records 10200 102000] [--fpr 0.01] [--word_splitter spacy]
        [--workdir DIR] [--datatrove_venv PATH] [--show 10] [--datatrove_fpr_only] [--results FILE]
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import subprocess
import sys

from benchmarks.common import (
    GIB,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    jsonl_rows,
    run_measured,
    write_jsonl,
)
from benchmarks.dedup_inputs import excluded_ids, split_documents

# DataTrove asserts 8 * m_bytes < 2**31.
_DATATROVE_MAX_M_BYTES = (1 << 28) - 1
_THRESHOLD = 0.8

# Runs in DataTrove's venv: argv = sorted JSONL, work folder, m_bytes, expected_elements.
_DATATROVE_BLOOM = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.bloom_filter import BloomFilterConfig, SingleBloomFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

source, work, m_bytes, expected = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = BloomFilterConfig(m_bytes=m_bytes, expected_elements=expected)
print(f"k = {config.k}", flush=True)
LocalPipelineExecutor(
    pipeline=[
        JsonlReader(source, glob_pattern="*.jsonl.gz"),
        SingleBloomFilter(work + "/filter", config=config, exclusion_writer=JsonlWriter(work + "/removed")),
        JsonlWriter(work + "/kept"),
    ],
    tasks=1,
    workers=1,
    logging_dir=work + "/logs",
).run()
"""

# Runs in DataTrove's venv: argv = sorted JSONL file, output JSON. The repeated fraction of every
# document with DataTrove's shingles and an exact set instead of its filter.
_DATATROVE_EXACT = """
import gzip, json, sys
from datatrove.pipeline.dedup.bloom_filter import BloomFilterConfig, SingleBloomFilter

step = SingleBloomFilter("/tmp", config=BloomFilterConfig(m_bytes=1, k=1))
seen, fractions = set(), {}
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as lines:
    for line in lines:
        row = json.loads(line)
        shingles = step.get_shingles(row["text"]).ravel().tolist()
        if shingles:
            fractions[row["id"]] = sum(s in seen for s in shingles) / len(shingles)
            seen.update(shingles)
json.dump({"fractions": fractions, "distinct": len(seen)}, open(sys.argv[2], "w"))
"""


def run_beamtrove(source: str, output: str, fpr: float, expected: int, word_splitter: str) -> None:
    """Reads the JSONL files, runs BloomDedup, writes removed ids and counters (called in a subprocess)."""
    import apache_beam as beam  # noqa: PLC0415 - only the measured subprocess needs Beam
    from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415

    from beamtrove.document import Document  # noqa: PLC0415
    from beamtrove.metrics import collect_stats  # noqa: PLC0415
    from beamtrove.transforms.dedup.bloom import BloomDedup, BloomDedupConfig  # noqa: PLC0415

    def document(line: str) -> Document:
        row = json.loads(line)
        return Document(row["text"], row["id"], metadata=row["metadata"])

    config = BloomDedupConfig(fpr=fpr, expected_shingles=expected, word_splitter=word_splitter)
    pipeline = beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"]))
    result = pipeline | beam.io.ReadFromText(source) | "Parse" >> beam.Map(document) | BloomDedup(config)
    _ = (
        result.kept
        | "KeptRows" >> beam.Map(lambda d: json.dumps({"id": d.id, "text": d.text, "metadata": d.metadata}))
        | "Kept" >> beam.io.WriteToText(output + "/kept/part", file_name_suffix=".jsonl")
    )
    removed_rows = result.excluded | "RemovedRows" >> beam.Map(
        lambda d: json.dumps([d.id, d.metadata["bloom_duplicate_fraction"], d.metadata["duplicate_of"]])
    )
    _ = removed_rows | "Removed" >> beam.io.WriteToText(output + "/removed/part", file_name_suffix=".jsonl")
    run = pipeline.run()
    run.wait_until_finish()
    stats = collect_stats(run, pipeline)["bloom"]["counters"]
    pathlib.Path(output, "counters.json").write_text(json.dumps(stats))


def _removed(folder: pathlib.Path) -> dict[str, tuple[float, str]]:
    rows = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            doc_id, fraction, source = json.loads(line)
            rows[doc_id] = (fraction, source)
    return rows


def _sorted_copy(source: pathlib.Path, target: pathlib.Path) -> list[str]:
    """The documents in one gzipped JSONL file in id order (DataTrove's single task); returns the ids."""
    rows = sorted(jsonl_rows(source, "*.jsonl.gz"), key=lambda row: row["id"])
    write_jsonl(target / "sorted.jsonl.gz", rows)
    return [row["id"] for row in rows]


def _real_fpr(bits: int, k: int, shingles: int) -> float:
    return (1 - math.exp(-k * shingles / bits)) ** k


def _datatrove_sizing(effective_bits: int, shingles: int, k: int) -> tuple[int, int, int, float, float]:
    """``(m_bytes, expected_elements, k, real fpr, DataTrove's own fpr)``: ``2**j - 1`` usable bits, about k hashes."""
    m_bytes = min((1 << max(3, round(math.log2(effective_bits)))) - 1, _DATATROVE_MAX_M_BYTES)
    # DataTrove derives k as ceil(64 * m_bytes * ln 2 / expected_elements): its get_optimal_k multiplies
    # by 8 a size that is already in bits.
    expected = math.floor(64 * m_bytes * math.log(2) / k)
    k = math.ceil(64 * m_bytes * math.log(2) / expected)
    own = (1 - (1 - 1 / (8 * m_bytes)) ** (k * shingles)) ** k
    return m_bytes, expected, k, _real_fpr(m_bytes, k, shingles), own


def _explain(doc_id, ours, theirs_removed, exact_fractions) -> str:
    exact = exact_fractions.get(doc_id)
    exact_text = "no shingles" if exact is None else f"{exact:.3f}"
    our_text = f"{ours[doc_id][0]:.3f}" if doc_id in ours else f"<= {_THRESHOLD}"
    datatrove_exact_removes = exact is not None and exact > _THRESHOLD
    if datatrove_exact_removes == (doc_id in theirs_removed):
        cause = "shingles differ (normalization, words or 32-bit hash collisions)"
    else:
        cause = "DataTrove's filter (false positives)"
    side = "DataTrove removed" if doc_id in theirs_removed else "DataTrove kept"
    return f"{doc_id}: {side}; repeated fraction beamtrove {our_text}, DataTrove exact {exact_text}: {cause}"


def _measure_size(args, python, records: int, results: Results) -> list[tuple]:
    """Runs both tools on one size, printing and recording what their filters did; returns each run's figures."""
    source = split_documents(
        args.workdir, records=records, files=4 if records <= 20_000 else 8, extractor="resiliparse"
    )
    documents = int((source / "done").read_text())
    base = args.workdir / f"bloom-r{records}"
    shutil.rmtree(base, ignore_errors=True)
    ids = set(_sorted_copy(source, base / "sorted"))
    rows = []

    ours = {}
    counters = {}
    expected = 10_000_000
    for label, fpr in (("exact", 0.0), (f"fpr {args.fpr}", args.fpr)):
        out = base / f"beamtrove-{label.replace(' ', '')}"
        command = [sys.executable, "-m", "benchmarks.bloom_dedup", "--run_beamtrove", str(source / "*.jsonl.gz")]
        command += [str(out), str(fpr), str(expected), args.word_splitter]
        print(f"{documents} documents: beamtrove {label} ...", file=sys.stderr)
        wall, monitor = run_measured(command, base / f"beamtrove-{label.replace(' ', '')}.log")
        ours[label] = _removed(out / "removed")
        counters[label] = json.loads((out / "counters.json").read_text())
        rows.append(("beamtrove", label, documents, wall, len(ours[label]), monitor))
        if fpr == 0:
            expected = counters[label]["shared_shingles"] + counters[label]["unshared_candidates"]
    exact_removed = ours["exact"]
    assert set(ours[f"fpr {args.fpr}"]) == set(exact_removed), "beamtrove's kept set must not depend on fpr"
    filtered = counters[f"fpr {args.fpr}"]
    unshared = filtered["shingles"] - filtered["candidates"] + filtered["unshared_candidates"]
    print(
        results.note(
            f"{documents} docs: beamtrove filter: {filtered['filter_bits']} bits, k={filtered['filter_hashes']}, "
            f"{expected} distinct shingles; candidates {filtered['candidates']} of {filtered['shingles']} document "
            f"shingles; measured fpr {filtered['unshared_candidates']}/{unshared} = "
            f"{filtered['unshared_candidates'] / unshared:.4f}"
        )
    )

    if args.datatrove_fpr_only:
        # Without the untimed pass, beamtrove's count of distinct shingles sizes DataTrove's filter.
        exact_fractions, datatrove_distinct = {}, expected
    else:
        print(f"{documents} documents: DataTrove exact pass (untimed) ...", file=sys.stderr)
        exact_json = base / "datatrove-exact.json"
        exact_command = [str(python), "-c", _DATATROVE_EXACT, str(base / "sorted" / "sorted.jsonl.gz"), str(exact_json)]
        subprocess.run(exact_command, check=True, stdout=subprocess.DEVNULL)
        exact = json.loads(exact_json.read_text())
        exact_fractions, datatrove_distinct = exact["fractions"], exact["distinct"]
        datatrove_exact_removed = {doc_id for doc_id, fraction in exact_fractions.items() if fraction > _THRESHOLD}
        print(
            results.note(
                f"{documents} docs: DataTrove shingles with an exact set: {datatrove_distinct} distinct; removes "
                f"{len(datatrove_exact_removed)}; kept-set Jaccard with beamtrove "
                f"{jaccard(ids - datatrove_exact_removed, ids - set(exact_removed)):.5f}"
            )
        )

    near_zero_bits = 32 * datatrove_distinct
    sizings = (
        () if args.datatrove_fpr_only else (("fpr ~0", *_datatrove_sizing(near_zero_bits, datatrove_distinct, 10)),)
    ) + (
        (
            f"fpr ~{args.fpr}",
            *_datatrove_sizing(filtered["filter_bits"], datatrove_distinct, filtered["filter_hashes"]),
        ),
    )
    for label, m_bytes, elements, k, real, own in sizings:
        work = base / f"datatrove-{label.replace(' ', '').replace('~', '')}"
        command = [str(python), "-c", _DATATROVE_BLOOM, str(base / "sorted"), str(work), str(m_bytes), str(elements)]
        print(f"{documents} documents: DataTrove {label} ...", file=sys.stderr)
        log = base / f"{work.name}.log"
        wall, monitor = run_measured(command, log)
        assert f"k = {k}" in log.read_text().splitlines(), f"DataTrove derived another k than {k}"
        theirs = excluded_ids(work / "removed")
        rows.append(("DataTrove", label, documents, wall, len(theirs), monitor))
        differing = sorted(set(exact_removed) ^ theirs)
        print(
            results.note(
                f"{documents} docs: DataTrove {label}: m_bytes={m_bytes} ({m_bytes} usable bits), "
                f"expected_elements={elements}, k={k}; real fpr {real:.2e}, DataTrove's formula {own:.2e}; removes "
                f"{len(theirs)} vs beamtrove {len(exact_removed)}; kept-set Jaccard "
                f"{jaccard(ids - theirs, ids - set(exact_removed)):.5f}; {len(differing)} ids differ"
            )
        )
        if args.datatrove_fpr_only:
            continue
        causes = [_explain(doc_id, exact_removed, theirs, exact_fractions) for doc_id in differing]
        by_filter = sum(cause.endswith("(false positives)") for cause in causes)
        print(f"    {by_filter} from DataTrove's filter, {len(causes) - by_filter} from the shingles")
        for cause in causes[: args.show]:
            print(f"    {cause}")
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--run_beamtrove":
        source, output, fpr, expected, word_splitter = sys.argv[2:7]
        run_beamtrove(source, output, float(fpr), int(expected), word_splitter)
        return 0
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, nargs="+", default=[10_200, 102_000])
    parser.add_argument("--fpr", type=float, default=0.01)
    parser.add_argument("--word_splitter", default="spacy", choices=("beamtrove", "spacy"))
    add_workdir_arguments(parser, "beamtrove-dedup")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--show", type=int, default=10, help="differing ids to list per DataTrove run")
    parser.add_argument(
        "--datatrove_fpr_only",
        action="store_true",
        help="run DataTrove only at --fpr, without the fpr ~0 run and the untimed pass that explains differences "
        "(for large sizes, where each DataTrove run takes tens of minutes)",
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    python = datatrove_python(args.datatrove_venv)
    rows = []
    for records in args.records:
        rows += _measure_size(args, python, records, results)
    table = [
        [
            tool,
            label,
            documents,
            f"{wall:.1f}",
            removed,
            f"{monitor.peak_pss / GIB:.2f}",
            f"{monitor.peak_process_pss / GIB:.2f}",
        ]
        for tool, label, documents, wall, removed, monitor in rows
    ]
    columns = ["tool", "run", "docs", "wall s", "removed", "peak PSS GiB", "largest process GiB"]
    print(results.table("Bloom dedup against DataTrove's SingleBloomFilter", columns, table))
    per_size = 3 if args.datatrove_fpr_only else 4
    for index in range(0, len(rows), per_size):
        ours_exact, ours_filter, *theirs = rows[index : index + per_size]
        speed = f"{ours_exact[2]} docs: beamtrove at fpr {args.fpr} is {theirs[-1][3] / ours_filter[3]:.2f}x DataTrove"
        speed += " at the same fpr"
        if not args.datatrove_fpr_only:
            speed += (
                f", {theirs[0][3] / ours_filter[3]:.2f}x DataTrove at fpr ~0;"
                f" beamtrove exact is {theirs[0][3] / ours_exact[3]:.2f}x DataTrove at fpr ~0"
            )
        print(results.note(speed))
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
