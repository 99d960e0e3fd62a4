"""FineWeb docs/s on each runner beamtrove can use here, against DataTrove, in one run.

Builds a WARC set with make_warc.py (unless it exists), then measures, one
after the other on this machine:

* DataTrove 0.10.1's FineWeb stack on LocalPipelineExecutor(tasks=4) with
  the workers a plain beamtrove run forks here, in its venv
  (``benchmarks.fineweb_runs``);
* ``beamtrove run fineweb`` on the DirectRunner as a user types it (the
  workers beamtrove picks for the machine), the ordinary way and with
  ``--resumable``;
* the same on the PrismRunner (the Prism binary ``beamtrove runners setup``
  built), LOOPBACK: Prism starts a single Python SDK worker for the job, so
  this run has one worker process whatever the machine has;
* the FlinkRunner, when a Beam Flink job-server jar is available
  (``--flink_job_server_jar`` or ``beamtrove runners setup``); otherwise the
  table says why it was not run;

and prints wall time, documents read per second and peak PSS of each, the
ratios to DataTrove, and whether every beamtrove run kept exactly the same
documents (exit status 1 when not). Run nothing else meanwhile: 2 cores are
shared.

Usage:
    python -m benchmarks.runner_speed [--records 1200] [--files 8] [--seed 1] [--workdir DIR]
        [--datatrove_venv PATH] [--prism PATH] [--flink_job_server_jar PATH] [--results FILE]
"""

from __future__ import annotations

import sys

from beamtrove.execution.runner_parts import part_path, part_present
from benchmarks.common import (
    GIB,
    Results,
    add_datatrove_venv_argument,
    add_warc_set_arguments,
    argument_parser,
    canonical_rows,
    datatrove_python,
    verdict,
    warc_set_of,
)
from benchmarks.fineweb_runs import (
    default_run_workers,
    fineweb_prerequisites,
    run_beamtrove_fineweb,
    run_datatrove_fineweb,
)


def _runs(prism: str | None, flink_jar: str | None, workers: int) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The runner options of each beamtrove run, and why the runners left out were not run."""
    runs = {
        f"DirectRunner (the plain command: {workers} workers)": [],
        f"DirectRunner --resumable ({workers} workers)": ["--resumable"],
    }
    not_run = {}
    if prism:
        runs["PrismRunner (LOOPBACK, 1 SDK worker)"] = [
            "--runner",
            "PrismRunner",
            "--prism_location",
            prism,
            "--environment_type",
            "LOOPBACK",
        ]
    else:
        not_run["PrismRunner"] = "no Prism binary: run `beamtrove runners setup --runner prism` or pass --prism"
    if flink_jar:
        runs["FlinkRunner [local] (parallelism 2, LOOPBACK)"] = [
            "--runner",
            "FlinkRunner",
            "--flink_master",
            "[local]",
            "--flink_job_server_jar",
            flink_jar,
            "--parallelism",
            "2",
            "--environment_type",
            "LOOPBACK",
        ]
    else:
        not_run["FlinkRunner"] = "no Beam Flink job-server jar (the package registry does not serve one here)"
    return runs, not_run


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=1200, files=8, workdir_name="beamtrove-runner-speed")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--prism", help="Prism binary (default: the one `beamtrove runners setup` obtained)")
    parser.add_argument(
        "--flink_job_server_jar",
        help="Beam Flink job-server jar (default: `beamtrove runners setup`)",
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    prism = args.prism or (str(part_path("prism")) if part_present("prism") else None)
    flink_jar = args.flink_job_server_jar or (
        str(part_path("flink-job-server")) if part_present("flink-job-server") else None
    )
    workdir, warc_dir = warc_set_of(args)
    workers = default_run_workers(warc_dir)
    runs, not_run = _runs(prism, flink_jar, workers)

    print("running DataTrove's FineWeb stack", file=sys.stderr)
    datatrove = run_datatrove_fineweb(python, warc_dir, workdir / "datatrove", workdir / "datatrove.log")
    table = {f"DataTrove 0.10.1 LocalPipelineExecutor (4 tasks, {workers} workers)": datatrove}
    documents = {}
    for number, (name, runner_args) in enumerate(runs.items()):
        print(f"running beamtrove fineweb on {name}", file=sys.stderr)
        out = workdir / f"beamtrove-{number}"
        run = run_beamtrove_fineweb(beamtrove, warc_dir, out, out.with_suffix(".log"), *runner_args)
        table[f"beamtrove {name}"] = run
        documents[name] = canonical_rows(sorted((out / "documents").glob("*.jsonl.gz")))

    print(f"make_warc.py --records {args.records} --files {args.files} --seed {args.seed}; 2 cores\n")
    rows = []
    for name, run in table.items():
        ratio = (run.docs_read / run.wall) / (datatrove.docs_read / datatrove.wall)
        speed = f"{run.docs_read / run.wall:.1f}"
        memory = f"{run.monitor.peak_pss / GIB:.2f}"
        rows.append([name, run.docs_read, f"{run.wall:.1f}", speed, f"{ratio:.2f}x", memory])
    rows += [[name, f"not run: {reason}", "", "", "", ""] for name, reason in not_run.items()]
    columns = ["run", "docs read", "wall s", "docs/s", "vs DataTrove", "peak PSS GiB"]
    print(results.table("FineWeb per runner", columns, rows))
    reference = next(iter(documents.values()))
    same = results.check(
        "every beamtrove run kept exactly the same documents", all(kept == reference for kept in documents.values())
    )
    print(f"\n{len(reference)} documents kept; every beamtrove run kept the same documents: {verdict(same)}")
    results.write()
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
