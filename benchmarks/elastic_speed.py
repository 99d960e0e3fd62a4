"""FineWeb through elastic shard workers, against one beamtrove run and DataTrove, in one run.

Builds a WARC set with make_warc.py (unless it exists), then measures, one
after the other on this machine:

* DataTrove 0.10.1's FineWeb stack on LocalPipelineExecutor(tasks=4,
  workers=2), in its venv (the script of ``benchmarks.fineweb_parity``);
* ``beamtrove run fineweb`` once over the whole input (DirectRunner,
  multi_processing, 2 workers);
* ``beamtrove elastic``: prepare (scan, hash, cut shards), ``--workers``
  worker processes started together (each runs every shard it claims with
  its own in-memory DirectRunner), then merge (verify and concatenate);

and prints wall time, documents read per second and peak PSS of each, the
ratios to DataTrove, and whether the merged output holds exactly the single
run's documents. The workers pay a fixed start-up per shard (a new
pipeline process that loads the URL blocklist and language model), so fewer,
larger shards amortize it. Run nothing else meanwhile: 2 cores are shared.

Usage:
    python -m benchmarks.elastic_speed [--records 3000] [--files 12] [--seed 1] [--shards 4] [--workers 2]
        [--workdir DIR] [--datatrove-venv PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import shlex
import shutil
import sys

from beamtrove.stats import read_stats
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python
from benchmarks.fineweb_parity import (
    DATATROVE_FINEWEB_SCRIPT,
    LID_MODEL,
    URL_BLOCKLIST,
    beamtrove_counts,
    datatrove_counts,
    fineweb_prerequisites,
)
from benchmarks.measure import run_measured
from benchmarks.warc_sets import add_warc_set_arguments, warc_set_of


def sorted_lines(paths) -> list[bytes]:
    """Every line of the given JSONL files (gzipped when named .gz), sorted."""
    lines = []
    for path in paths:
        with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as source:
            lines.extend(source)
    return sorted(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_warc_set_arguments(parser, records=3000, files=12, workdir_name="beamtrove-elastic-speed")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    args = parser.parse_args()
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    workdir, warc_dir = warc_set_of(args)
    runs = {name: workdir / name for name in ("datatrove", "single", "elastic")}
    for path in runs.values():
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
    assets = ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
    table = {}

    print("running DataTrove's FineWeb stack", file=sys.stderr)
    script = workdir / "datatrove_fineweb.py"
    script.write_text(DATATROVE_FINEWEB_SCRIPT)
    out = runs["datatrove"]
    wall, monitor = run_measured([str(python), str(script), str(warc_dir), str(out), str(LID_MODEL)], out / "log")
    table["DataTrove 0.10.1 (4 tasks, 2 workers)"] = (datatrove_counts(out / "logs")[0], wall, monitor.peak_pss)

    print("running beamtrove fineweb once over the whole input", file=sys.stderr)
    out = runs["single"]
    command = [beamtrove, "run", "fineweb", "--input", str(warc_dir / "*.warc.gz"), "--output", str(out / "run")]
    command += [*assets, "--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]
    wall, monitor = run_measured(command, out / "log")
    read = beamtrove_counts(read_stats(str(out / "run")))[0]
    table["beamtrove run (multi_processing, 2 workers)"] = (read, wall, monitor.peak_pss)

    print(f"running beamtrove elastic: prepare, {args.workers} workers, merge", file=sys.stderr)
    out = runs["elastic"]
    job, merged = out / "job", out / "merged.jsonl.gz"
    prepare = [beamtrove, "elastic", "prepare", "--pipeline", "fineweb", "--input", str(warc_dir / "*.warc.gz")]
    prepare += ["--job-dir", str(job), "--num-shards", str(args.shards), "--", *assets]
    prepare_wall, prepare_monitor = run_measured(prepare, out / "prepare.log")
    worker = shlex.join([beamtrove, "elastic", "worker", "--job-dir", str(job)])
    # Each worker's own exit status counts: wait for them one by one.
    together = " ".join(f"{worker} --host w{k} & p{k}=$!;" for k in range(args.workers))
    together += " status=0;" + "".join(f" wait $p{k} || status=1;" for k in range(args.workers)) + " exit $status"
    workers_wall, workers_monitor = run_measured(["bash", "-c", together], out / "workers.log")
    merge_wall, _ = run_measured(
        [beamtrove, "elastic", "merge", "--job-dir", str(job), "--output", str(merged)], out / "merge.log"
    )
    elastic_wall = prepare_wall + workers_wall + merge_wall
    read = beamtrove_counts(json.loads((out / "merged.jsonl.gz.stats.json").read_text()))[0]
    peak = max(prepare_monitor.peak_pss, workers_monitor.peak_pss)
    table[f"beamtrove elastic ({args.shards} shards, {args.workers} workers)"] = (read, elastic_wall, peak)

    same = sorted_lines([merged]) == sorted_lines(sorted((runs["single"] / "run" / "documents").glob("*.jsonl.gz")))
    dt_speed = next(iter(table.values()))[0] / next(iter(table.values()))[1]
    print(f"make_warc.py --records {args.records} --files {args.files} --seed {args.seed}; 2 cores\n")
    print("| run | docs read | wall s | docs/s | vs DataTrove | peak PSS |")
    print("|---|---|---|---|---|---|")
    for name, (docs, wall, pss) in table.items():
        speed = docs / wall
        print(f"| {name} | {docs} | {wall:.1f} | {speed:.1f} | {speed / dt_speed:.2f}x | {pss / 2**30:.2f} GiB |")
    print(
        f"\nelastic: prepare {prepare_wall:.1f} s, workers {workers_wall:.1f} s, merge {merge_wall:.1f} s; "
        f"merged output {'holds exactly' if same else 'DIFFERS from'} the single run's documents: "
        f"{'PASS' if same else 'FAIL'}"
    )
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
