"""How soon a run shows progress and how close its ETA comes to the real end.

Runs ``beamtrove run fineweb`` on a make_warc.py set (3000 records in 4 files
by default) as a user would, reads its progress lines off stderr as they come
and stamps each with the time since the command started. Prints when the
first line came, the real duration, and for each line with an ETA the end it
predicted (time of the line + ETA) against the real end, as a share of the
run's duration.

    python -m benchmarks.progress_eta [--records 3000 --files 4 --seed 1] [--interval 5] [--workdir DIR]
        [--results FILE]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time

from benchmarks.common import LID_MODEL, URL_BLOCKLIST, Results, add_warc_set_arguments, argument_parser, warc_set_of

_ETA = re.compile(r"ETA (?:(?P<h>\d+)h (?P<hm>\d+)m|(?P<m>\d+)m (?P<ms>\d+)s|(?P<s>\d+) s)$")


def _seconds(match: re.Match) -> int:
    if match["h"]:
        return int(match["h"]) * 3600 + int(match["hm"]) * 60
    if match["m"]:
        return int(match["m"]) * 60 + int(match["ms"])
    return int(match["s"])


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=3000, files=4, workdir_name="beamtrove-progress-eta")
    parser.add_argument("--interval", type=float, default=10.0, help="--progress_interval of the run")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    _, warcs = warc_set_of(args)
    output = tempfile.mkdtemp(prefix="progress-eta-")
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", f"{warcs}/*.warc.gz"]
    command += ["--output", f"{output}/out", "--progress_interval", str(args.interval)]
    command += ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as run:
        for line in run.stderr:
            if line.startswith("fineweb: "):
                lines.append((time.monotonic() - started, line.rstrip("\n")))
    duration = time.monotonic() - started
    if run.returncode != 0 or not lines:
        sys.exit(f"the run failed (exit {run.returncode}) or showed no progress")
    print(f"records {args.records}, files {args.files}, progress interval {args.interval:g} s")
    print(results.note(f"first progress line after {lines[0][0]:.1f} s; the command took {duration:.1f} s"))
    rows = []
    for at, line in lines:
        match = _ETA.search(line)
        if match is not None:
            eta = _seconds(match)
            rows.append([f"{at:.1f}", eta, f"{at + eta:.1f}", f"{(at + eta - duration) / duration:+.1%}", line])
    columns = ["line at s", "ETA s", "predicted end s", "error", "line"]
    print(results.table("Each ETA against the real end", columns, rows))
    results.write()


if __name__ == "__main__":
    main()
