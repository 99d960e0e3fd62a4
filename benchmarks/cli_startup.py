"""How soon the commands that run no pipeline answer, and whether they import Beam.

Makes a small run (``beamtrove run fineweb`` on a make_warc.py set, 60 records
in 1 file by default) and an elastic job directory over the same WARC, then
times each command a user runs to look at them, as a fresh process each time
(``--repeat`` runs, 10 by default): ``--help``, ``stats``, ``inspect``,
``report``, ``assets path`` and ``elastic status``. One more run of each under
``python -X importtime`` says whether it imported ``apache_beam`` and which
top-level module cost the most. Prints the median and the slowest wall per
command, beside the wall of a Python that imports nothing (the floor): as
this machine's Python starts, and with the bytecode of the modules cached
(as a package installed by pip starts; where PYTHONDONTWRITEBYTECODE is set,
beamtrove's modules are compiled at every start of a Python).

    python -m benchmarks.cli_startup [--records 60 --files 1 --seed 1] [--repeat 10] [--workdir DIR]
        [--results FILE]
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from benchmarks.common import LID_MODEL, URL_BLOCKLIST, Results, add_warc_set_arguments, argument_parser, warc_set_of

_FLOOR = "python (imports nothing)"
# The slowest start a command that runs no pipeline may have on a 2-core machine.
_AT_ONCE = 0.4
# "import time: self [us] | cumulative | module": the modules a process imported and what each cost.
_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+(?P<cumulative>\d+) \| (?P<indent>\s*)(?P<module>\S+)$")


def _finished(done: subprocess.CompletedProcess, command: Sequence[str]) -> None:
    # elastic status exits 1 while the job is incomplete, as this one is: its answer is what is timed.
    if done.returncode not in (0, 1) or (done.returncode == 1 and "status" not in command):
        sys.exit(f"{' '.join(command)} failed with exit status {done.returncode}: {done.stderr[-2000:]}")


def _wall(command: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - started
    _finished(done, command)
    return wall


def _imports(command: Sequence[str]) -> tuple[bool, str]:
    """Whether ``command`` imports apache_beam, and its costliest top-level import (its script run by this Python)."""
    arguments = command[1:] if command[0] == sys.executable else command
    done = subprocess.run([sys.executable, "-X", "importtime", *arguments], check=False, capture_output=True, text=True)
    _finished(done, command)
    top: dict[str, int] = {}
    beam = False
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match is None:
            continue
        beam = beam or match["module"].split(".")[0] == "apache_beam"
        if not match["indent"]:
            top[match["module"]] = int(match["cumulative"])
    costliest = max(top, key=top.get, default="")
    return beam, f"{costliest} {top.get(costliest, 0) / 1e6:.2f} s"


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=60, files=1, workdir_name="beamtrove-cli-startup")
    parser.add_argument("--repeat", type=int, default=10, help="fresh processes timed per command")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    workdir, warcs = warc_set_of(args)
    # One folder, made anew by each run: runs of the benchmark do not pile up in the work directory.
    work = workdir / "cli-startup"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    # The command users type: the script pip installs beside this Python (python -m beamtrove where there is none).
    script = pathlib.Path(sys.executable).with_name("beamtrove")
    beamtrove = [str(script)] if script.is_file() else [sys.executable, "-m", "beamtrove"]
    run, job, inputs = f"{work}/run", f"{work}/job", f"{warcs}/*.warc.gz"
    assets = ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST)]
    subprocess.run([*beamtrove, "run", "fineweb", "--input", inputs, "--output", run, *assets], check=True)
    prepare = ["elastic", "prepare", "--pipeline", "fineweb", "--input", inputs, "--job-dir", job, "--num-shards", "1"]
    subprocess.run([*beamtrove, *prepare, "--", *assets], check=True, capture_output=True)
    commands = {
        _FLOOR: [sys.executable, "-c", "pass"],
        "--help": [*beamtrove, "--help"],
        "stats": [*beamtrove, "stats", run],
        "inspect": [*beamtrove, "inspect", run, "--limit", "5"],
        "inspect --excluded": [*beamtrove, "inspect", run, "--excluded", "--limit", "5"],
        "report": [*beamtrove, "report", run, "--out", f"{work}/report.html"],
        "assets path": [*beamtrove, "assets", "path"],
        "elastic status": [*beamtrove, "elastic", "status", "--job-dir", job],
    }
    # As an installed package starts: its modules' bytecode cached (a Python run with PYTHONDONTWRITEBYTECODE, as
    # this machine's are, compiles every beamtrove module at each start), the cache kept in the work directory.
    cached = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(work / "bytecode")
    rows = []
    answers_at_once = True
    for name, command in commands.items():
        walls = sorted(_wall(command) for _ in range(args.repeat))
        _wall(command, cached)
        cached_walls = sorted(_wall(command, cached) for _ in range(args.repeat))
        beam, costliest = _imports(command)
        figures = [statistics.median(walls), walls[-1], statistics.median(cached_walls), cached_walls[-1]]
        rows.append([name, *(f"{figure:.3f}" for figure in figures), "yes" if beam else "no", costliest])
        answers_at_once = answers_at_once and (name == _FLOOR or (not beam and walls[-1] <= _AT_ONCE))
    columns = ["command", "median", "slowest", "cached: median", "cached: slowest", "imports Beam", "costliest"]
    print(results.table("Wall of a fresh process, s (cached: with its bytecode cached)", columns, rows))
    print(results.check(f"every command imports no Beam and answers within {_AT_ONCE} s, slowest run", answers_at_once))
    results.write()


if __name__ == "__main__":
    main()
