"""Cross-dump dedup: dump B against dump A's index removes from B what a dedup over A and B together does.

For each seed, a make_warc.py set (real pages with exact and near copies) is
extracted once and its documents dealt in turn to two "dumps", A and B
(metadata ``dump``: ``A`` then ``B``), so copies fall on both sides. Then:

* ``beamtrove run dedup_index`` on A (exact, url, minhash, sentence keys);
* ``beamtrove run dedup --against INDEX_A`` on B;
* ``beamtrove run dedup --keep_by dump`` on A and B together, where A's
  documents come first, as an index's do;

for the step sets given (by default ``exact,url,minhash`` with
``--minhash_threshold 0.8``, the same without a threshold, and ``sentence``
alone), and prints, per step, the documents each run removed from B and
whether the sets are equal, whether B's kept documents and texts are equal,
and the wall time of each run. Exits 1 when a removed set differs.

Usage:
    python -m benchmarks.cross_dump_dedup [--records 3000] [--seeds 1 2] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import pathlib
import shutil
import sys

from benchmarks.common import (
    Results,
    add_workdir_arguments,
    argument_parser,
    jsonl_rows,
    run_measured,
    write_jsonl,
)
from benchmarks.token_inputs import extract_warc_set

_INDEX_OPTIONS = ["--dedup", "exact,url,minhash,sentence", "--keep_by", "dump", "--index_name", "dump-A"]
_CONFIGURATIONS = {
    "minhash-threshold": ["--dedup", "exact,url,minhash", "--minhash_threshold", "0.8"],
    "minhash-bands": ["--dedup", "exact,url,minhash"],
    "sentence": ["--dedup", "sentence"],
}


def _dumps(workdir: pathlib.Path, records: int, seed: int, extractor: str) -> tuple[pathlib.Path, set[str]]:
    """Folders A, B and AB of the extracted documents dealt in turn; returns the base folder and B's ids."""
    extracted = extract_warc_set(workdir, records, 4, seed, extractor)
    base = workdir / f"dumps-{extracted.name}"
    rows = list(jsonl_rows(extracted / "documents", "*.jsonl.gz"))
    dealt = {
        name: [{**row, "metadata": {**row["metadata"], "dump": name}} for row in rows[start::2]]
        for start, name in enumerate("AB")
    }
    if not (base / "AB").exists():
        write_jsonl(base / "A" / "part-0.jsonl.gz", dealt["A"])
        write_jsonl(base / "B" / "part-0.jsonl.gz", dealt["B"])
        write_jsonl(base / "AB" / "part-0.jsonl.gz", dealt["A"] + dealt["B"])
    return base, {row["id"] for row in dealt["B"]}


def _beamtrove(arguments: list[str], output: pathlib.Path) -> float:
    shutil.rmtree(output, ignore_errors=True)
    command = ["beamtrove", "run", *arguments, "--output", str(output), "--progress_interval", "0"]
    wall, _ = run_measured(command, output.with_suffix(".log"))
    return wall


def _excluded(output: pathlib.Path, ids: set[str]) -> dict[str, set[str]]:
    """Step -> the ids of ``ids`` it removed (a step that removed nothing has no folder)."""
    folders = sorted(path for path in (output / "excluded").glob("*") if path.is_dir())
    return {
        folder.name: {row["id"] for row in jsonl_rows(folder, "*.jsonl.gz") if row["id"] in ids} for folder in folders
    }


def _kept(output: pathlib.Path, ids: set[str] | None = None) -> dict[str, str]:
    return {
        row["id"]: row["text"]
        for row in jsonl_rows(output / "documents", "*.jsonl.gz")
        if ids is None or row["id"] in ids
    }


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--extractor", default="trafilatura", choices=("trafilatura", "resiliparse"))
    add_workdir_arguments(parser, "beamtrove-cross-dump")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    equal = True
    rows = []
    for seed in args.seeds:
        base, b_ids = _dumps(args.workdir, args.records, seed, args.extractor)
        index = base / "index-A"
        index_seconds = _beamtrove(
            ["dedup_index", "--input", str(base / "A" / "*.jsonl.gz"), *_INDEX_OPTIONS],
            index,
        )
        print(f"seed {seed}: {len(b_ids)} documents in B; A's index built in {index_seconds:.1f} s")
        for name, options in _CONFIGURATIONS.items():
            against, union = base / f"{name}-B-against-A", base / f"{name}-A-and-B"
            against_seconds = _beamtrove(
                ["dedup", "--input", str(base / "B" / "*.jsonl.gz"), "--against", str(index), *options], against
            )
            union_seconds = _beamtrove(
                ["dedup", "--input", str(base / "AB" / "*.jsonl.gz"), "--keep_by", "dump", *options], union
            )
            removed_against, removed_union = _excluded(against, b_ids), _excluded(union, b_ids)
            kept_against, kept_union = _kept(against), _kept(union, b_ids)
            print(f"  {name}: B against A's index {against_seconds:.1f} s, A and B together {union_seconds:.1f} s")
            texts = sum(kept_against[id_] != kept_union.get(id_) for id_ in kept_against)
            same_kept = kept_against.keys() == kept_union.keys()
            for step in options[options.index("--dedup") + 1].split(","):
                ours, reference = removed_against.get(step, set()), removed_union.get(step, set())
                equal &= ours == reference
                verdict_text = "equal" if ours == reference else f"DIFFER ({len(ours ^ reference)} documents)"
                counts = f"{len(ours):>5} against the index, {len(reference):>5} together"
                print(f"    {step:<10} removed from B: {counts}: {verdict_text}")
                rows.append([seed, name, step, len(ours), len(reference), verdict_text])
            kept = f"{len(kept_against)} / {len(kept_union)}"
            print(f"    kept in B: {kept}, same ids: {same_kept}, texts differing: {texts}")
            rows.append(
                [
                    seed,
                    name,
                    "kept in B",
                    len(kept_against),
                    len(kept_union),
                    f"same ids: {same_kept}, texts differing: {texts}",
                ]
            )
    columns = ["seed", "configuration", "step", "removed from B against A's index", "B's part of A and B", "equal"]
    results.table("Dump B against dump A's index, and B's part of a dedup over A and B together", columns, rows)
    equal = results.check("every step removes the same documents from B either way", equal)
    print("EQUAL" if equal else "DIFFERENT")
    results.write()
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
