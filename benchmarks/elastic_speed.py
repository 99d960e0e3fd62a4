"""FineWeb through elastic shard workers, against one beamtrove run and DataTrove, in one run.

Builds a WARC set with make_warc.py (unless it exists), then measures, one
after the other on this machine:

* DataTrove 0.10.1's FineWeb stack on LocalPipelineExecutor(tasks=4) with
  the workers a plain beamtrove run forks here, in its venv
  (``benchmarks.fineweb_runs``);
* ``beamtrove run fineweb`` once over the whole input, as a user types it
  (the DirectRunner's workers are those beamtrove picks for the machine);
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
        [--workdir DIR] [--datatrove_venv PATH] [--results FILE]
"""

from __future__ import annotations

import shlex
import shutil
import sys

from beamtrove.stats import read_stats
from benchmarks.common import (
    GIB,
    LID_MODEL,
    URL_BLOCKLIST,
    Results,
    add_datatrove_venv_argument,
    add_warc_set_arguments,
    argument_parser,
    canonical_rows,
    datatrove_python,
    run_measured,
    verdict,
    warc_set_of,
)
from benchmarks.fineweb_runs import (
    beamtrove_counts,
    default_run_workers,
    fineweb_prerequisites,
    run_beamtrove_fineweb,
    run_datatrove_fineweb,
)


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=3000, files=12, workdir_name="beamtrove-elastic-speed")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    add_datatrove_venv_argument(parser)
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    workdir, warc_dir = warc_set_of(args)
    table = {}

    print("running DataTrove's FineWeb stack", file=sys.stderr)
    run = run_datatrove_fineweb(python, warc_dir, workdir / "datatrove", workdir / "datatrove.log")
    workers = default_run_workers(warc_dir)
    table[f"DataTrove 0.10.1 (4 tasks, {workers} workers)"] = (run.docs_read, run.wall, run.monitor.peak_pss)

    print("running beamtrove fineweb once over the whole input", file=sys.stderr)
    single = workdir / "single"
    run = run_beamtrove_fineweb(beamtrove, warc_dir, single, workdir / "single.log")
    table[f"beamtrove run ({workers} workers)"] = (run.docs_read, run.wall, run.monitor.peak_pss)

    print(f"running beamtrove elastic: prepare, {args.workers} workers, merge", file=sys.stderr)
    out = workdir / "elastic"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    job, merged = out / "job", out / "merged"
    prepare = [beamtrove, "elastic", "prepare", "--pipeline", "fineweb", "--input", str(warc_dir / "*.warc.gz")]
    prepare += ["--job-dir", str(job), "--num-shards", str(args.shards), "--"]
    prepare += ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
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
    read = beamtrove_counts(read_stats(str(merged)))[0]
    peak = max(prepare_monitor.peak_pss, workers_monitor.peak_pss)
    table[f"beamtrove elastic ({args.shards} shards, {args.workers} workers)"] = (read, elastic_wall, peak)

    same = canonical_rows(sorted((merged / "documents").glob("*.jsonl.gz"))) == canonical_rows(
        sorted((single / "documents").glob("*.jsonl.gz"))
    )
    dt_docs, dt_wall, _ = next(iter(table.values()))
    print(f"make_warc.py --records {args.records} --files {args.files} --seed {args.seed}; 2 cores\n")
    rows = []
    for name, (docs, wall, pss) in table.items():
        speed = docs / wall
        rows.append(
            [name, docs, f"{wall:.1f}", f"{speed:.1f}", f"{speed / (dt_docs / dt_wall):.2f}x", f"{pss / GIB:.2f}"]
        )
    columns = ["run", "docs read", "wall s", "docs/s", "vs DataTrove", "peak PSS GiB"]
    print(results.table("FineWeb through elastic workers", columns, rows))
    same = results.check("the merged output holds exactly the single run's documents", same)
    print(
        results.note(
            f"elastic: prepare {prepare_wall:.1f} s, workers {workers_wall:.1f} s, merge {merge_wall:.1f} s; "
            f"merged output {'holds exactly' if same else 'DIFFERS from'} the single run's documents: {verdict(same)}"
        )
    )
    results.write()
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
