"""A run's report: one self-contained HTML page to look at what each filter removed and why.

:func:`write_report` reads a run's output folder and writes ``report.html``
beside its ``stats.json``: the funnel of documents per step with the drops of
each step per reason, a table of the steps, a histogram per summary statistic
(``summary_stats/``), a few documents each filter dropped per reason
(``excluded/``), the dead letters and the run's options. The page needs no
network, script or other file to be viewed.

Modules: :mod:`~beamtrove.report.sampling` (what the report reads of the
output: summary statistics, samples of what steps set aside),
:mod:`~beamtrove.report.charts` (the funnel and histograms, drawn as SVG)
and :mod:`~beamtrove.report.html` (the page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from beamtrove.fs import join, write_url_atomically
from beamtrove.layout import REPORT_FILE
from beamtrove.report.charts import HISTOGRAM_COLOUR, HISTOGRAM_FACE, KEPT_COLOUR
from beamtrove.report.html import render_report
from beamtrove.report.sampling import (
    SAMPLES_PER_REASON,
    Sample,
    StatFigures,
    read_summary_stats,
    sample_dead_letters,
    sample_excluded,
)
from beamtrove.run_output import RunOutput

__all__ = [
    "HISTOGRAM_COLOUR",
    "HISTOGRAM_FACE",
    "KEPT_COLOUR",
    "SAMPLES_PER_REASON",
    "Sample",
    "StatFigures",
    "read_summary_stats",
    "render_report",
    "sample_dead_letters",
    "sample_excluded",
    "write_report",
]


def write_report(output: str, storage_options: Mapping[str, Any] | None = None, path: str | None = None) -> str:
    """Writes the report of the run whose output folder is ``output``; returns its path.

    Args:
        output: A run's output folder, holding its ``stats.json``.
        storage_options: Passed to the filesystem.
        path: Where to write the page; default ``<output>/report.html``.

    Raises:
        FileNotFoundError: ``output`` holds no ``stats.json``.
        ConfigurationError: Its ``stats.json`` is damaged (:func:`~beamtrove.stats.read_stats`).
    """
    stats = RunOutput(output, storage_options).stats()
    page = render_report(
        stats,
        read_summary_stats(output, storage_options),
        sample_excluded(output, stats.get("steps", {}), storage_options=storage_options),
        sample_dead_letters(output, storage_options=storage_options),
    )
    path = path or join(output, REPORT_FILE)
    write_url_atomically(path, page.encode("utf-8"), storage_options)
    return path
