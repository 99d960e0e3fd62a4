"""Whether speed work changed what fineweb keeps: this checkout's screen-off run against an earlier checkout's.

Builds a make_warc.py set (3000 records in 4 files, seed 1 unless told
otherwise; reused when present), then runs ``beamtrove run fineweb`` on it
with the shared assets and no runner option (the DirectRunner's workers are
those each checkout picks for the machine: a checkout before 0.15 runs one
process), three times one after the other:

* with the earlier checkout ``--before`` (a worktree, e.g. ``git worktree
  add /tmp/before 083d178`` for 0.12.1, whose fineweb had no language screen)
  and ``--before_options``;
* with this checkout and ``--no_language_screen``;
* the same again beside ``--busy`` processes that only burn CPU (a crowded
  shared node: extraction's limits are CPU time, not wall-clock time).

Compares the kept documents byte for byte: the lines of
``documents/*.jsonl.gz`` decompressed, as a sorted list (the runs may deal
documents to part files differently). Where two runs differ, prints how many
lines each has that the other lacks, whether they are equal as JSON (the same
fields and values), and the ids and fields of the first differences.

Usage:
    python -m benchmarks.output_unchanged --before CHECKOUT [--before_options ...] [--seed 1] [--records 3000]
        [--files 4] [--busy 12] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import contextlib
import gzip
import json
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence

from benchmarks.common import (
    LID_MODEL,
    URL_BLOCKLIST,
    Results,
    add_workdir_arguments,
    argument_parser,
    run_measured,
    warc_set,
)
from benchmarks.fineweb_runs import fineweb_prerequisites


@contextlib.contextmanager
def _busy(count: int) -> Iterator[None]:
    """``count`` processes that only burn CPU, killed when the block ends."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


def _fineweb(command: Sequence[str], warcs: pathlib.Path, output: pathlib.Path, *options: str) -> float:
    """A fineweb run of ``command`` (a beamtrove command line) into a fresh ``output``; its wall seconds."""
    shutil.rmtree(output, ignore_errors=True)
    arguments = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(output)]
    arguments += ["--lid_model", str(LID_MODEL), "--url_blocklist", str(URL_BLOCKLIST), *options]
    wall, _ = run_measured([*command, *arguments], output.with_suffix(".log"))
    return wall


def _kept_lines(output: pathlib.Path) -> list[bytes]:
    """The lines of a run's kept documents, decompressed, sorted."""
    lines = []
    for path in sorted((output / "documents").glob("*.jsonl.gz")):
        with gzip.open(path) as part:
            lines += [line for line in part.read().split(b"\n") if line]
    return sorted(lines)


def _differences(name: str, first: list[bytes], second: list[bytes]) -> list[str]:
    """What differs between two runs' kept lines, in a few lines of text; empty when they are the same bytes."""
    if first == second:
        return []
    only_first, only_second = set(first) - set(second), set(second) - set(first)
    rows = [json.loads(line) for line in (*only_first, *only_second)]
    canonical = sorted(json.dumps(json.loads(line), sort_keys=True) for line in first) == sorted(
        json.dumps(json.loads(line), sort_keys=True) for line in second
    )
    found = [
        f"{name}: {len(first)} / {len(second)} lines, {len(only_first)} / {len(only_second)} not in the other; "
        f"equal as JSON: {canonical}"
    ]
    by_id: dict[str, list[dict]] = {}
    for row in rows:
        by_id.setdefault(row["id"], []).append(row)
    for document_id, versions in sorted(by_id.items())[:5]:
        if len(versions) == 2:
            old, new = versions
            fields = sorted(key for key in {*old, *old.get("metadata", {})} if _field(old, key) != _field(new, key))
            found.append(f"  {document_id}: differs in {', '.join(fields) or 'key order'}")
        else:
            found.append(f"  {document_id}: kept by one run only")
    return found


def _field(row: dict, key: str):
    return row[key] if key in row else row.get("metadata", {}).get(key)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--before", type=pathlib.Path, required=True, help="a checkout of an earlier beamtrove")
    parser.add_argument(
        "--before_options", nargs="*", default=[], help="options that turn the earlier fineweb's screen off, if any"
    )
    parser.add_argument("--seed", type=int, default=1, help="make_warc.py seed (default: %(default)s)")
    parser.add_argument("--records", type=int, default=3000, help="make_warc.py records (default: %(default)s)")
    parser.add_argument("--files", type=int, default=4, help="make_warc.py files (default: %(default)s)")
    parser.add_argument("--busy", type=int, default=12, help="CPU-burning processes beside the loaded run")
    add_workdir_arguments(parser, "beamtrove-output-unchanged")
    args = parser.parse_args(argv)
    beamtrove = fineweb_prerequisites()
    results = Results(__file__, __doc__, args)
    warcs = warc_set(args.workdir, args.records, args.files, args.seed)
    runs = args.workdir / f"runs-s{args.seed}"
    runs.mkdir(parents=True, exist_ok=True)
    # The earlier checkout's modules come first on the path, in the command and in the processes it starts, which
    # run in a folder that holds no beamtrove (a Python started with -m looks in its working folder first).
    before = ["env", "-C", str(runs), f"PYTHONPATH={args.before.resolve()}", beamtrove]
    folders = {"before": runs / "before", "now": runs / "now", "now, loaded": runs / "now-loaded"}
    walls = {"before": _fineweb(before, warcs, folders["before"], *args.before_options)}
    walls["now"] = _fineweb([beamtrove], warcs, folders["now"], "--no_language_screen")
    with _busy(args.busy):
        walls["now, loaded"] = _fineweb([beamtrove], warcs, folders["now, loaded"], "--no_language_screen")
    kept = {name: _kept_lines(folder) for name, folder in folders.items()}
    rows = [[name, f"{walls[name]:.1f}", len(kept[name])] for name in walls]
    title = f"seed {args.seed}: {args.records} records, {args.busy} busy processes beside the loaded run"
    print(f"\n{title}\n{results.table(title, ['run', 'wall s', 'documents kept'], rows)}")
    for name, first, second in (
        (f"{args.before} / now", kept["before"], kept["now"]),
        ("now / now loaded", kept["now"], kept["now, loaded"]),
    ):
        for line in _differences(name, first, second):
            print(results.note(line))
        print(results.check(f"kept documents byte-identical: {name}", first == second))
    results.write()


if __name__ == "__main__":
    sys.exit(main())
