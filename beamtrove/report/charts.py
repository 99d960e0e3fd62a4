"""The report's charts: the funnel of documents per step, and a histogram per summary statistic.

matplotlib draws each as an SVG element to put inside the page: no other
file, script or network is needed to view it. Also what the charts and the
steps table read of a run's ``stats.json``: the funnel and what each step
set aside.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Mapping
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from beamtrove.metrics import OUTCOME_PREFIXES
from beamtrove.report.sampling import StatFigures

__all__ = [
    "HISTOGRAM_COLOUR",
    "HISTOGRAM_FACE",
    "KEPT_COLOUR",
    "UNACCOUNTED",
    "documents_read",
    "funnel_steps",
    "funnel_svg",
    "histogram_svg",
    "set_aside",
]

#: The funnel's bars of documents a step passed on.
KEPT_COLOUR = "#2b6cb0"
#: The bars of the summary-statistics histograms.
HISTOGRAM_COLOUR = "#dd6b20"
#: The plot area of each histogram: no other part of the page has this colour.
HISTOGRAM_FACE = "#eef3f8"
# The outcomes other than kept, in the order they appear: colours that neither blue nor orange.
_OUTCOME_COLOURS = (
    "#38a169",
    "#e53e3e",
    "#805ad5",
    "#d69e2e",
    "#319795",
    "#d53f8c",
    "#718096",
    "#975a16",
    "#9ae6b4",
    "#feb2b2",
    "#d6bcfa",
    "#faf089",
    "#81e6d9",
    "#fbb6ce",
    "#cbd5e0",
    "#22543d",
    "#742a2a",
    "#44337a",
)
#: What a step received but neither passed on nor counted as set aside.
UNACCOUNTED = "unaccounted"
# A histogram's bars at most: more buckets are binned, as one SVG rectangle per value would bloat the page.
_MAX_BARS = 40


def _svg(figure: Figure, name: str) -> str:
    """``figure`` as an SVG element for inline use: no XML prolog, ids unique to ``name``."""
    buffer = io.StringIO()
    # The salt makes the ids of each chart's clip paths differ from those of the page's other charts.
    with matplotlib.rc_context({"svg.hashsalt": name, "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def funnel_steps(stats: Mapping[str, Any]) -> list[str]:
    """The steps records pass through: the stats' ``funnel`` when given, else every step counting in or out."""
    steps = stats.get("steps", {})
    names = stats.get("funnel") or [s for s, e in steps.items() if {"in", "out"} & set(e.get("counters", {}))]
    return [name for name in names if {"in", "out"} & set(steps.get(name, {}).get("counters", {}))]


def set_aside(counters: Mapping[str, int]) -> dict[str, int]:
    """A step's records that were not passed on, per ``dropped.<reason>``-style counter (and unaccounted ones)."""
    outcomes = {name: value for name, value in counters.items() if name.startswith(OUTCOME_PREFIXES) and value}
    unaccounted = counters.get("in", 0) - counters.get("out", 0) - sum(outcomes.values())
    if unaccounted > 0 and "in" in counters:
        outcomes[UNACCOUNTED] = unaccounted
    return outcomes


def documents_read(stats: Mapping[str, Any]) -> int:
    """What the first funnel step passed on: the documents read, the whole of which the kept share is."""
    funnel = funnel_steps(stats)
    return stats["steps"][funnel[0]]["counters"].get("out", 0) if funnel else 0


def funnel_svg(stats: Mapping[str, Any]) -> str:
    steps = stats["steps"]
    funnel = funnel_steps(stats)
    read = documents_read(stats)
    outcome_names = list(dict.fromkeys(name for step in funnel for name in set_aside(steps[step]["counters"])))
    colours = dict(zip(outcome_names, itertools.cycle(_OUTCOME_COLOURS), strict=False))
    legend_rows = math.ceil((len(outcome_names) + 1) / 3)
    figure = Figure(figsize=(11, 0.9 + 0.42 * len(funnel) + 0.24 * legend_rows), dpi=100)
    axes = figure.add_subplot()
    widest = max([1, *(max(steps[s]["counters"].get("in", 0), steps[s]["counters"].get("out", 0)) for s in funnel)])
    labelled = set()
    for row, step in enumerate(funnel):
        counters = steps[step]["counters"]
        kept = counters.get("out", 0)
        axes.barh(row, kept, color=KEPT_COLOUR, label="kept" if row == 0 else None, height=0.7)
        left = kept
        for name, value in set_aside(counters).items():
            axes.barh(row, value, left=left, color=colours[name], height=0.7, label=None if name in labelled else name)
            labelled.add(name)
            left += value
        share = f" ({kept / read:.1%} of read)" if read else ""
        axes.text(left + widest * 0.01, row, f"{kept:,} kept{share}", va="center", fontsize=9)
    axes.set_yticks(range(len(funnel)), funnel)
    axes.invert_yaxis()
    axes.set_xlim(0, widest * 1.3)
    axes.set_xlabel("records (bar: received; blue: passed on; colours: set aside, per reason)")
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    # Below the axis label, which takes about as much height as a row of bars.
    axes.legend(
        loc="upper center", bbox_to_anchor=(0.45, -0.9 / (len(funnel) + 1.5)), ncol=3, fontsize=8, frameon=False
    )
    figure.tight_layout()
    return _svg(figure, "funnel")


def histogram_svg(stat: StatFigures) -> str:
    values = np.array([value for value, _ in stat.histogram])
    counts = np.array([count for _, count in stat.histogram])
    figure = Figure(figsize=(4.0, 2.6), dpi=100)
    axes = figure.add_subplot(facecolor=HISTOGRAM_FACE)
    spread_widely = values.min() > 0 and values.max() / values.min() > 100
    gaps = np.diff(values)
    if len(values) > _MAX_BARS or (len(values) > 1 and gaps.min() < np.ptp(values) / (2 * _MAX_BARS)):
        # Too many buckets, or buckets too close to be seen (a statistic of few documents): wider bins.
        edges = (
            np.geomspace(values.min(), values.max(), _MAX_BARS + 1)
            if spread_widely
            else np.linspace(values.min(), values.max(), _MAX_BARS + 1)
        )
        counts, edges = np.histogram(values, bins=edges, weights=counts)
        axes.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color=HISTOGRAM_COLOUR, linewidth=0)
    else:
        width = gaps.min() * 0.9 if len(values) > 1 else max(abs(values[0]) * 0.1, 0.5)
        axes.bar(values, counts, width=width, color=HISTOGRAM_COLOUR, linewidth=0)
    if spread_widely:
        axes.set_xscale("log")
    axes.set_title(stat.name, fontsize=10)
    axes.set_ylabel("documents", fontsize=8)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.tick_params(labelsize=8)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    figure.tight_layout()
    return _svg(figure, f"histogram-{stat.name}")
