"""The report's charts: the funnel of documents per step, and a histogram per summary statistic.

Each is an SVG element drawn here, to put inside the page: no other file,
script or network is needed to view it, and no plotting library to write
it (``beamtrove report`` answers in a fraction of a second). Each bar says
its figures when pointed at. Also what the charts and the steps table read of
a run's ``stats.json``: the funnel and what each step set aside.
"""

from __future__ import annotations

import bisect
import html
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from beamtrove.report.sampling import StatFigures
from beamtrove.stats import OUTCOME_PREFIXES

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


_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_INK = "#1a202c"
_AXIS = "#4a5568"
# About the width of a character of _FONT per pixel of its size: what a label column is sized by.
_CHARACTER_WIDTH = 0.6


def _svg(width: float, height: float, body: Sequence[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
        f'viewBox="0 0 {width:g} {height:g}" font-family="{_FONT}" role="img" aria-label="{html.escape(title)}">'
        f"{''.join(body)}</svg>"
    )


def _rect(x: float, y: float, width: float, height: float, fill: str, tip: str | None = None) -> str:
    title = f"<title>{html.escape(tip)}</title>" if tip else ""
    return (
        f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(width, 0):.2f}" height="{height:.2f}" fill="{fill}">{title}</rect>'
    )


def _text(x: float, y: float, content: str, size: float = 12, anchor: str = "start", transform: str = "") -> str:
    turned = f' transform="{transform}"' if transform else ""
    return (
        f'<text x="{x:.2f}" y="{y:.2f}" font-size="{size:g}" text-anchor="{anchor}" dominant-baseline="middle" '
        f'fill="{_INK}"{turned}>{html.escape(content)}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line x1="{x1:.2f}" y1="{y1:.2f}" x2="{x2:.2f}" y2="{y2:.2f}" stroke="{_AXIS}" stroke-width="1"/>'


def _nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round values from ``low`` to ``high`` a step of 1, 2 or 5 times a power of ten apart, at most ``most``."""
    if high <= low:
        return [low]
    raw = (high - low) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(power * factor for factor in (1, 2, 5, 10) if power * factor >= raw)
    first = math.ceil(low / step - 1e-9)
    return [round(index * step, 12) for index in range(first, math.floor(high / step + 1e-9) + 1)]


def _tick_label(value: float) -> str:
    if value == int(value) and abs(value) < 1e7:
        return f"{int(value):,}"
    return f"{value:.3g}"


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
    """The funnel: a bar per step as long as what it received, blue for what it passed on, a colour per reason
    for what it set aside, and a legend of the reasons."""
    steps = stats["steps"]
    funnel = funnel_steps(stats)
    read = documents_read(stats)
    outcome_names = list(dict.fromkeys(name for step in funnel for name in set_aside(steps[step]["counters"])))
    colours = dict(zip(outcome_names, itertools.cycle(_OUTCOME_COLOURS), strict=False))
    widest = max([1, *(max(steps[s]["counters"].get("in", 0), steps[s]["counters"].get("out", 0)) for s in funnel)])
    width, row_height, bar_height, top = 1100, 28, 20, 10
    plot_left = 16 + _CHARACTER_WIDTH * 12 * max(len(step) for step in funnel)
    # Room right of the widest bar for its "kept" label.
    scale = (width - plot_left - 20) / (widest * 1.3)
    body = []
    for row, step in enumerate(funnel):
        counters = steps[step]["counters"]
        kept = counters.get("out", 0)
        y = top + row * row_height + (row_height - bar_height) / 2
        body.append(_text(plot_left - 8, y + bar_height / 2, step, anchor="end"))
        body.append(_rect(plot_left, y, kept * scale, bar_height, KEPT_COLOUR, f"{step}: {kept:,} kept"))
        left = kept
        for name, value in set_aside(counters).items():
            body.append(
                _rect(
                    plot_left + left * scale, y, value * scale, bar_height, colours[name], f"{step}: {value:,} {name}"
                )
            )
            left += value
        share = f" ({kept / read:.1%} of read)" if read else ""
        body.append(_text(plot_left + left * scale + 6, y + bar_height / 2, f"{kept:,} kept{share}", size=11))
    axis = top + len(funnel) * row_height + 4
    body.append(_line(plot_left, top, plot_left, axis))
    body.append(_line(plot_left, axis, plot_left + widest * 1.3 * scale, axis))
    for tick in _nice_ticks(0, widest * 1.3):
        x = plot_left + tick * scale
        body += [_line(x, axis, x, axis + 4), _text(x, axis + 14, _tick_label(tick), size=11, anchor="middle")]
    label = "records (bar: received; blue: passed on; colours: set aside, per reason)"
    body.append(_text(plot_left + widest * 0.65 * scale, axis + 34, label, anchor="middle"))
    legend = [("kept", KEPT_COLOUR), *colours.items()]
    # Indented from the bars, so that no swatch lines up with them.
    column = (width - plot_left - 60) / 3
    for index, (name, colour) in enumerate(legend):
        x, y = plot_left + 60 + (index % 3) * column, axis + 56 + (index // 3) * 20
        body += [_rect(x, y - 6, 12, 12, colour), _text(x + 18, y, name, size=11)]
    height = axis + 56 + math.ceil(len(legend) / 3) * 20
    return _svg(width, height, body, "documents per step")


def _binned(stat: StatFigures) -> tuple[list[tuple[float, float, float]], bool]:
    """The histogram's bars as (left edge, right edge, documents), and whether its axis is logarithmic.

    Too many buckets, or buckets too close to be seen apart (a statistic of
    few documents), are binned into at most :data:`_MAX_BARS` bins: equally
    wide, or equally wide on a log axis when the values span over two orders
    of magnitude.
    """
    values = [value for value, _ in stat.histogram]
    low, high = values[0], values[-1]
    spread_widely = low > 0 and high / low > 100
    gaps = [after - before for before, after in itertools.pairwise(values)]
    if len(values) > _MAX_BARS or (gaps and min(gaps) < (high - low) / (2 * _MAX_BARS)):
        if spread_widely:
            edges = [low * (high / low) ** (index / _MAX_BARS) for index in range(_MAX_BARS + 1)]
        else:
            edges = [low + (high - low) * index / _MAX_BARS for index in range(_MAX_BARS + 1)]
        documents = [0.0] * _MAX_BARS
        for value, count in stat.histogram:
            # Each bin holds its left edge; the last one its right edge too.
            documents[min(bisect.bisect_right(edges, value) - 1, _MAX_BARS - 1)] += count
        return [(edges[i], edges[i + 1], documents[i]) for i in range(_MAX_BARS)], spread_widely
    width = min(gaps) * 0.9 if gaps else max(abs(values[0]) * 0.1, 0.5)
    if spread_widely:
        # Centred on its value on the log axis: as wide there as its neighbours are apart.
        ratio = min(after / before for before, after in itertools.pairwise(values)) ** 0.45 if gaps else 1.1
        return [(value / ratio, value * ratio, count) for value, count in stat.histogram], True
    return [(value - width / 2, value + width / 2, count) for value, count in stat.histogram], False


def histogram_svg(stat: StatFigures) -> str:
    """A statistic's histogram: documents per value, on a plot area of :data:`HISTOGRAM_FACE`."""
    bars, logarithmic = _binned(stat)
    width, height = 400, 260
    left, right, top, bottom = 60, 388, 30, 218
    position = math.log10 if logarithmic else float
    low, high = position(bars[0][0]), position(bars[-1][1])
    margin = (high - low) * 0.05 or 0.5
    low, high = low - margin, high + margin
    most = max(count for _, _, count in bars) or 1

    def x_of(value: float) -> float:
        return left + (position(value) - low) / (high - low) * (right - left)

    def y_of(count: float) -> float:
        return bottom - count / (most * 1.05) * (bottom - top)

    body = [
        _text(width / 2, 14, stat.name, size=13, anchor="middle"),
        _rect(left, top, right - left, bottom - top, HISTOGRAM_FACE),
    ]
    for start, end, count in bars:
        tip = f"{_tick_label(start)} to {_tick_label(end)}: {count:,.0f} documents"
        body.append(
            _rect(x_of(start), y_of(count), x_of(end) - x_of(start), bottom - y_of(count), HISTOGRAM_COLOUR, tip)
        )
    body += [_line(left, top, left, bottom), _line(left, bottom, right, bottom)]
    ticks = [10.0**power for power in range(math.ceil(low), math.floor(high) + 1)] if logarithmic else []
    for tick in ticks or _nice_ticks(low, high, 5):
        x = x_of(tick)
        body += [_line(x, bottom, x, bottom + 4), _text(x, bottom + 14, _tick_label(tick), size=10, anchor="middle")]
    for tick in _nice_ticks(0, most * 1.05, 5):
        if tick != int(tick):
            continue
        y = y_of(tick)
        body += [_line(left - 4, y, left, y), _text(left - 7, y, _tick_label(tick), size=10, anchor="end")]
    body.append(
        _text(
            14,
            (top + bottom) / 2,
            "documents",
            size=10,
            anchor="middle",
            transform=f"rotate(-90 14 {(top + bottom) / 2:.2f})",
        )
    )
    return _svg(width, height, body, f"histogram of {stat.name}")
