"""MinHash dedup accuracy against exact Jaccard, and parity with DataTrove's four MinHash stages.

On a make_warc.py set (real pages plus exact and near copies) extracted by
``beamtrove run extract`` (trafilatura), this:

* runs ``beamtrove run dedup --dedup minhash --cluster_map`` twice (5-grams,
  14 buckets x 8 hashes): by default, which links every pair sharing a
  bucket as DataTrove does, and with ``--minhash_threshold`` (the
  ``--threshold`` below), which verifies each link on the whole signature;
* computes, by brute force, the exact Jaccard similarity of the sets of
  word 5-grams of every pair of documents that could reach the threshold
  (a pair's Jaccard is at most the ratio of its set sizes, so only pairs
  within that ratio are compared), on the same normalized words;
* prints, for both runs, pair recall (true pairs, Jaccard >= ``--threshold``,
  that ended in one cluster) and pair precision (pairs of one cluster whose
  Jaccard is >= the threshold); goals (with the threshold): recall >= 0.95,
  precision >= 0.99;
* runs DataTrove 0.10.1's MinhashDedupSignature → Buckets → Cluster →
  Filter on the same JSONL files (LocalPipelineExecutor, 4 tasks, 2
  workers) and compares its removed-document count with the default run's
  (same algorithm; goal: within 1 %).

Usage:
    python -m benchmarks.dedup_accuracy [--records 3000] [--threshold 0.85] [--workdir DIR] [--datatrove_venv PATH]
        [--results FILE]
"""

from __future__ import annotations

import collections
import itertools
import pathlib
import shutil
import subprocess
import sys

from beamtrove.text import normalize_text
from benchmarks.common import (
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    jsonl_rows,
    verdict,
)
from benchmarks.dedup_inputs import datatrove_minhash_command, datatrove_removed_ids, excluded_ids, split_documents

PRECISION_GOAL = 0.99
RECALL_GOAL = 0.95
COUNT_GOAL = 0.01
N_GRAMS = 5


def _shingle_sets(folder: pathlib.Path) -> dict[str, frozenset[str]]:
    shingles = {}
    for row in jsonl_rows(folder, "*.jsonl.gz"):
        words = normalize_text(row["text"]).split()
        grams = range(len(words) - N_GRAMS + 1)
        shingles[row["id"]] = frozenset(" ".join(words[i : i + N_GRAMS]) for i in grams)
    return shingles


def _true_pairs(shingles: dict[str, frozenset[str]], threshold: float) -> set[tuple[str, str]]:
    """Pairs with Jaccard >= threshold; only pairs whose size ratio allows it are compared."""
    by_size = sorted((len(grams), doc_id) for doc_id, grams in shingles.items() if grams)
    pairs = set()
    for position, (size, doc_id) in enumerate(by_size):
        for other_size, other_id in itertools.islice(by_size, position + 1, None):
            if size < threshold * other_size:
                break
            if jaccard(shingles[doc_id], shingles[other_id]) >= threshold:
                pairs.add(tuple(sorted((doc_id, other_id))))
    return pairs


def _cluster_pairs(cluster_map: pathlib.Path) -> set[tuple[str, str]]:
    clusters = collections.defaultdict(set)
    for row in jsonl_rows(cluster_map):
        clusters[row["kept_id"]].update((row["id"], row["kept_id"]))
    return {tuple(sorted(pair)) for members in clusters.values() for pair in itertools.combinations(members, 2)}


def _run_beamtrove(source: pathlib.Path, output: pathlib.Path, *options: str) -> None:
    shutil.rmtree(output, ignore_errors=True)
    command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(output)]
    subprocess.run(
        [*command, "--cluster_map", "--progress_interval", "0", *options], check=True, stdout=subprocess.DEVNULL
    )


def _score(name: str, output: pathlib.Path, shingles, truth, threshold: float) -> tuple[list, float, float]:
    """Prints one run's pair recall and precision; returns its table row, recall and precision."""
    found = _cluster_pairs(output / "clusters" / "minhash")
    similarity = {pair: jaccard(shingles[pair[0]], shingles[pair[1]]) for pair in found}
    recall = len(truth & found) / len(truth)
    precision = sum(value >= threshold for value in similarity.values()) / len(found)
    low = sorted(value for value in similarity.values() if value < threshold)
    print(f"{name}: {len(found)} clustered pairs; recall {recall:.4f}, missed {len(truth - found)};")
    print(f"    precision {precision:.4f}; {len(low)} pairs below {threshold}", end="")
    print(f" (Jaccard {low[0]:.3f} to {low[-1]:.3f})" if low else "")
    lowest = f"{low[0]:.3f}" if low else "-"
    row = [name, len(found), f"{recall:.4f}", len(truth - found), f"{precision:.4f}", len(low), lowest]
    return row, recall, precision


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--threshold", type=float, default=0.85)
    add_workdir_arguments(parser, "beamtrove-tok")
    add_datatrove_venv_argument(parser)
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)

    source = split_documents(args.workdir, records=args.records, files=4)
    default = args.workdir / f"dedup-accuracy-r{args.records}"
    verified = args.workdir / f"dedup-accuracy-verified-r{args.records}"
    _run_beamtrove(source, default)
    _run_beamtrove(source, verified, "--minhash_threshold", str(args.threshold))

    shingles = _shingle_sets(source)
    truth = _true_pairs(shingles, args.threshold)
    print(results.note(f"documents: {len(shingles)}; pairs with Jaccard >= {args.threshold}: {len(truth)}"))
    default_row, _, _ = _score("default (links every pair sharing a bucket)", default, shingles, truth, args.threshold)
    verified_row, recall, precision = _score(
        f"--minhash_threshold {args.threshold}", verified, shingles, truth, args.threshold
    )
    columns = ["run", "clustered pairs", "recall", "missed", "precision", "pairs below", "lowest Jaccard"]
    title = f"MinHash clusters against exact 5-gram Jaccard >= {args.threshold}"
    results.table(title, columns, [default_row, verified_row])
    print(f"goals with the threshold: recall >= {RECALL_GOAL}, precision >= {PRECISION_GOAL}")

    work = args.workdir / f"dedup-accuracy-datatrove-r{args.records}"
    shutil.rmtree(work, ignore_errors=True)
    python = datatrove_python(args.datatrove_venv)
    with (args.workdir / f"{work.name}.log").open("w") as log:
        subprocess.run(datatrove_minhash_command(python, source, work, 4), check=True, stdout=log, stderr=log)
    theirs = datatrove_removed_ids(work)
    removed = excluded_ids(default / "excluded" / "minhash")
    verified_removed = excluded_ids(verified / "excluded" / "minhash")
    difference = abs(len(removed) - len(theirs)) / len(theirs)
    print(
        results.note(
            f"removed: DataTrove {len(theirs)}; beamtrove default {len(removed)}, difference {difference:.2%}"
            f" (goal {COUNT_GOAL:.0%}); beamtrove with the threshold {len(verified_removed)}"
        )
    )
    print(f"removed by both: {len(removed & theirs)} (the rest differ in which member of a cluster is kept)")
    passed = all(
        [
            results.check(f"recall with the threshold >= {RECALL_GOAL}", recall >= RECALL_GOAL),
            results.check(f"precision with the threshold >= {PRECISION_GOAL}", precision >= PRECISION_GOAL),
            results.check(f"removed count within {COUNT_GOAL:.0%} of DataTrove's", difference <= COUNT_GOAL),
        ]
    )
    print(verdict(passed))
    results.write()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
