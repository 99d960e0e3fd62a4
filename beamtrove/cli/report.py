"""``beamtrove report``: write a run's report page."""

from __future__ import annotations

import argparse

from beamtrove.cli.parsing import command
from beamtrove.configuration import ConfigurationError
from beamtrove.layout import REPORT_FILE, STATS_FILE
from beamtrove.run_output import ready_to_read

__all__ = ["add_commands"]


def _report(args: argparse.Namespace, _: list[str]) -> int:
    """Write a run's report: one HTML page that needs no network to be viewed.

    It shows the funnel of documents per step with what each step set aside
    per reason, a table of the steps, a histogram per summary statistic of
    the kept documents (summary_stats/), a few documents each filter dropped
    per reason, the dead letters and the run's options.
    """
    # Drawing a page is this command's alone: the others start without its modules.
    from beamtrove.report import write_report  # noqa: PLC0415

    ready_to_read(args.output)
    try:
        path = write_report(args.output, path=args.out)
    except FileNotFoundError:
        raise ConfigurationError(
            f"{args.output} holds no {STATS_FILE}: it is not a run's output folder; pass the --output of a finished run"
        ) from None
    print(path)
    return 0


def add_commands(commands) -> None:
    """Adds ``report`` to the tree."""
    report = command(commands, "report", _report)
    report.add_argument("output", help="the output folder of a run (the folder holding its stats.json)")
    report.add_argument("--out", help=f"where to write the page; default OUTPUT/{REPORT_FILE}")
