"""``beamtrove merge-stats``: add up the summary statistics of several runs or dumps."""

from __future__ import annotations

import argparse

from beamtrove.cli.parsing import command
from beamtrove.configuration import ConfigurationError

__all__ = ["add_commands"]


def _merge_stats(args: argparse.Namespace, _: list[str]) -> int:
    """Merge summary statistics folders (DataTrove's layout) into one, as DataTrove's StatsMerger does.

    Each INPUT is a summary_stats folder (<group>/<statistic>/metric.json),
    beamtrove's or DataTrove's. Every statistic's figures are added key by
    key and written under OUTPUT in the same layout; fqdn and suffix keep
    their --top_k keys with the most documents. Prints the files written.
    """
    # The summary package imports Beam and the statistics blocks: only this command pays for them.
    from beamtrove.transforms.summary import merge_summary_stats  # noqa: PLC0415

    try:
        written = merge_summary_stats(args.inputs, args.output, args.top_k)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None
    print("\n".join(written))
    return 0


def add_commands(commands) -> None:
    """Adds ``merge-stats`` to the tree."""
    merge = command(commands, "merge-stats", _merge_stats)
    merge.add_argument("output", help="folder to write the merged statistics to")
    merge.add_argument("inputs", nargs="+", metavar="INPUT", help="summary statistics folders to merge")
    merge.add_argument("--top_k", type=int, default=100_000, help="keys kept in fqdn and suffix; default 100000")
