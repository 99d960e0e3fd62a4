"""``beamtrove report``: write a run's report page."""

from __future__ import annotations

import argparse
import posixpath

from beamtrove.cli.parsing import command
from beamtrove.configuration import ConfigurationError
from beamtrove.fs import filesystem, join
from beamtrove.layout import REPORT_FILE, STATS_FILE
from beamtrove.run_output import RunOutput, ready_to_read

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

    output = _run_folder(args.output)
    ready_to_read(output)
    page = args.out or join(output, REPORT_FILE)
    try:
        write_report(output, path=page)
    except OSError as exc:
        if not RunOutput(output).holds(STATS_FILE):
            raise ConfigurationError(
                f"{output} holds no {STATS_FILE}: it is not a run's output folder; pass the --output of a finished run"
            ) from None
        raise ConfigurationError(
            f"cannot write the report to {page} ({exc.strerror or exc}): pass --out with a file that can be written"
        ) from None
    print(page)
    return 0


def _run_folder(path: str) -> str:
    """The run's output folder ``path`` names: the folder itself, or the one holding the ``stats.json`` it names."""
    fs, fs_path = filesystem(path)
    if posixpath.basename(fs_path.rstrip("/")) == STATS_FILE and fs.isfile(fs_path):
        return posixpath.dirname(path.rstrip("/")) or "."
    return path


def add_commands(commands) -> None:
    """Adds ``report`` to the tree."""
    report = command(commands, "report", _report)
    report.add_argument("output", help="the output folder of a run (the folder holding its stats.json) or that file")
    report.add_argument("--out", help=f"where to write the page; default OUTPUT/{REPORT_FILE}")
