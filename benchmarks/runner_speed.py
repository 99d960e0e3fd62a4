"""FineWeb docs/s on each runner beamtrove can use here, against DataTrove, in one run.

Builds a WARC set with make_warc.py (unless it exists), then measures, one
after the other on this machine:

* DataTrove 0.10.1's FineWeb stack on LocalPipelineExecutor(tasks=4,
  workers=2), in its venv (the script of ``benchmarks.fineweb_parity``);
* ``beamtrove run fineweb`` on the DirectRunner, multi_processing with 2
  workers, the ordinary way and with ``--resumable``;
* the same on the PrismRunner (the Prism binary ``beamtrove runners setup``
  built), LOOPBACK: Prism starts a single Python SDK worker for the job, so
  this run has one worker process whatever the machine has;
* the FlinkRunner, when a Beam Flink job-server jar is available (``--flink-
  job-server-jar`` or ``beamtrove runners setup``); otherwise the table says
  why it was not run;

and prints wall time, documents read per second and peak PSS of each, the
ratios to DataTrove, and whether every beamtrove run kept exactly the same
documents (exit status 1 when not). Run nothing else meanwhile: 2 cores are
shared.

Usage:
    python -m benchmarks.runner_speed [--records 1200] [--files 8] [--seed 1] [--workdir DIR]
        [--datatrove-venv PATH] [--prism PATH] [--flink-job-server-jar PATH]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

from beamtrove.execution.runner_parts import part_path, part_present
from beamtrove.stats import read_stats
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python
from benchmarks.elastic_speed import sorted_lines
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

_TWO_WORKERS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_warc_set_arguments(parser, records=1200, files=8, workdir_name="beamtrove-runner-speed")
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    parser.add_argument("--prism", help="Prism binary (default: the one `beamtrove runners setup` obtained)")
    parser.add_argument("--flink-job-server-jar", help="Beam Flink job-server jar (default: `beamtrove runners setup`)")
    args = parser.parse_args()
    beamtrove = fineweb_prerequisites()
    python = datatrove_python(args.datatrove_venv)
    prism = args.prism or (str(part_path("prism")) if part_present("prism") else None)
    flink_jar = args.flink_job_server_jar or (
        str(part_path("flink-job-server")) if part_present("flink-job-server") else None
    )
    workdir, warc_dir = warc_set_of(args)
    fineweb = [beamtrove, "run", "fineweb", "--input", str(warc_dir / "*.warc.gz")]
    fineweb += ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
    runs = {
        "DirectRunner (multi_processing, 2 workers)": [*_TWO_WORKERS],
        "DirectRunner --resumable (multi_processing, 2 workers)": [*_TWO_WORKERS, "--resumable"],
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

    table = {}
    print("running DataTrove's FineWeb stack", file=sys.stderr)
    out = workdir / "datatrove"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    script = workdir / "datatrove_fineweb.py"
    script.write_text(DATATROVE_FINEWEB_SCRIPT)
    wall, monitor = run_measured([str(python), str(script), str(warc_dir), str(out), str(LID_MODEL)], out / "log")
    table["DataTrove 0.10.1 LocalPipelineExecutor (4 tasks, 2 workers)"] = (
        datatrove_counts(out / "logs")[0],
        wall,
        monitor.peak_pss,
    )
    documents = {}
    for number, (name, runner_args) in enumerate(runs.items()):
        print(f"running beamtrove fineweb on {name}", file=sys.stderr)
        out = workdir / f"beamtrove-{number}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        wall, monitor = run_measured([*fineweb, "--output", str(out / "run"), *runner_args], out / "log")
        stats = read_stats(str(out / "run"))
        table[f"beamtrove {name}"] = (beamtrove_counts(stats)[0], wall, monitor.peak_pss)
        documents[name] = sorted_lines(sorted((out / "run" / "documents").glob("*.jsonl.gz")))

    dt_docs, dt_wall, _ = next(iter(table.values()))
    print(f"make_warc.py --records {args.records} --files {args.files} --seed {args.seed}; 2 cores\n")
    print("| run | docs read | wall s | docs/s | vs DataTrove | peak PSS |")
    print("|---|---|---|---|---|---|")
    for name, (docs, wall, pss) in table.items():
        ratio = (docs / wall) / (dt_docs / dt_wall)
        print(f"| {name} | {docs} | {wall:.1f} | {docs / wall:.1f} | {ratio:.2f}x | {pss / 2**30:.2f} GiB |")
    for name, reason in not_run.items():
        print(f"| {name} | not run: {reason} | | | | |")
    reference = next(iter(documents.values()))
    same = all(kept == reference for kept in documents.values())
    print(
        f"\n{len(reference)} documents kept; every beamtrove run kept "
        f"{'exactly the same documents: PASS' if same else 'DIFFERENT documents: FAIL'}"
    )
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
