"""A run's report: one self-contained HTML page to look at what each filter removed and why.

:func:`write_report` reads a run's output folder and writes ``report.html``
beside its ``stats.json``: the funnel of documents per step with the drops of
each step per reason, a table of the steps, a histogram per summary statistic
(``summary_stats/``), a few documents each filter dropped per reason
(``excluded/``), the dead letters and the run's options. Charts are drawn by
matplotlib as SVG inside the page: it needs no network, script or other file
to be viewed. Every text that comes from the data or the configuration is
HTML-escaped.

Samples are chosen deterministically and read boundedly: files in name
order, records in file order, and a step's reading stops once each reason its
counters name has enough samples, or after a fixed number of records.
"""

from __future__ import annotations

import dataclasses
import html
import io
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import orjson
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from beamtrove.fs import InputFile, filesystem, join, match_inputs, open_url, write_atomically
from beamtrove.layout import (
    DEAD_LETTERS_DIR,
    EXCLUDED_DIR,
    REPORT_FILE,
    STATS_FILE,
    SUMMARY_STATS_DIR,
)
from beamtrove.metrics import OUTCOME_PREFIXES
from beamtrove.stats import read_stats

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
_UNACCOUNTED = "unaccounted"

#: Samples shown per (step, reason).
SAMPLES_PER_REASON = 3
# A step's excluded documents read at most: a 10 GB folder is never read to its end.
_RECORDS_PER_STEP = 5000
_DEAD_LETTERS_SHOWN = 20
_DEAD_LETTERS_READ = 5000
_SNIPPET_CHARS = 600
# A histogram's bars at most: more buckets are binned, as one SVG rectangle per value would bloat the page.
_MAX_BARS = 40
# DataTrove's statistics weighted by characters or tokens rather than counted per document.
_WEIGHTED_SUFFIXES = ("__chars", "__tokens")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.bz2", ".jsonl.xz")


@dataclasses.dataclass(frozen=True)
class StatFigures:
    """One summary statistic of the kept documents, as ``summary_stats/`` holds it.

    Attributes:
        name: The statistic, e.g. ``length`` or ``n_words``.
        summary: What the ``summary`` group gives over all documents (``n``,
            ``mean``, ``std_dev``, ``min``, ``max``, ``total``: those present).
        histogram: ``(value, documents)`` per bucket of the ``histogram`` group, by value.
    """

    name: str
    summary: dict[str, float] = dataclasses.field(default_factory=dict)
    histogram: list[tuple[float, float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Sample:
    """A record a step set aside, as the report shows it.

    Attributes:
        id: The document's id (or a dead letter's record id or file).
        url: The page's URL, when known.
        snippet: The start of its text.
        detail: For dead letters: the step and the message.
    """

    id: str
    url: str | None
    snippet: str
    detail: str = ""


def _stats_total(value: Any) -> float:
    """A DataTrove stats entry's total: the entry is a stats object or, when it only counted, a plain number."""
    return float(value.get("total", 0) if isinstance(value, Mapping) else value)


def read_summary_stats(output: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, StatFigures]:
    """The ``summary`` and ``histogram`` groups of ``<output>/summary_stats/``, per statistic, by name.

    The layout and format are DataTrove's: ``<group>/<stat>/metric.json``
    maps a key (``summary``; a bucket's value for histograms) to a stats
    object (``total``, ``n``, ``mean``, ``variance``/``std_dev``, ``min``,
    ``max``) or, when every value was 1, to a plain number. Other groups are
    left out, and so are the ``<stat>__chars`` and ``<stat>__tokens``
    statistics: the same values weighted by each document's characters or
    tokens, whose histograms count characters rather than documents. Returns
    ``{}`` when the folder is absent.
    """
    fs, folder = filesystem(join(output, SUMMARY_STATS_DIR), storage_options)
    if not fs.isdir(folder):
        return {}
    summaries: dict[str, dict[str, float]] = {}
    histograms: dict[str, list[tuple[float, float]]] = {}
    for path in sorted(fs.glob(f"{folder}/*/*/metric.json")):
        group, stat = path.split("/")[-3:-1]
        if stat.endswith(_WEIGHTED_SUFFIXES):
            continue
        metric = json.loads(fs.cat_file(path))
        if group == "summary":
            entry = metric.get("summary", metric) if isinstance(metric, Mapping) else metric
            figures = dict(entry) if isinstance(entry, Mapping) else {"total": entry}
            if "std_dev" not in figures and "variance" in figures:
                figures["std_dev"] = math.sqrt(figures["variance"])
            summaries[stat] = {k: float(v) for k, v in figures.items() if isinstance(v, (int, float))}
        elif group == "histogram":
            histograms[stat] = sorted((float(value), _stats_total(entry)) for value, entry in metric.items())
    return {
        stat: StatFigures(stat, summaries.get(stat, {}), histograms.get(stat, []))
        for stat in sorted({*summaries, *histograms})
    }


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + " …"


def _jsonl_files(folder: str, storage_options: Mapping[str, Any] | None) -> list[InputFile]:
    """The JSONL files under ``folder`` in name order, hidden ones left out; none when it is absent."""
    try:
        return match_inputs(folder, _JSONL_SUFFIXES, storage_options)
    except FileNotFoundError:
        return []


def _jsonl_records(files: Iterable[InputFile], storage_options: Mapping[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The records of ``files``, lazily: a file is opened only when the records before it were taken.

    Lines that are not JSON objects are skipped.
    """
    for file in files:
        with open_url(file.url, "rb", storage_options, compression="infer") as source:
            for line in source:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    yield record


def sample_excluded(
    output: str,
    steps: Mapping[str, Any],
    per_reason: int = SAMPLES_PER_REASON,
    records_per_step: int = _RECORDS_PER_STEP,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, list[Sample]]]:
    """The first ``per_reason`` documents of each reason in each step's ``<output>/excluded/<step>/``.

    Args:
        output: The run's output folder.
        steps: The ``steps`` of its ``stats.json``: a step's reading stops
            once each of its ``dropped.<reason>`` counters has its samples.
        per_reason: Samples per (step, reason).
        records_per_step: Records read at most per step.
        storage_options: Passed to the filesystem.

    Returns:
        ``{step: {reason: [Sample]}}``, steps and reasons by name.
    """
    by_step: dict[str, dict[str, list[Sample]]] = {}
    files = _jsonl_files(join(output, EXCLUDED_DIR), storage_options)
    for name, step_files in itertools.groupby(files, key=lambda file: file.name.split("/", 1)[0]):
        counters = steps.get(name, {}).get("counters", {})
        wanted = {counter.removeprefix("dropped.") for counter in counters if counter.startswith("dropped.")}
        samples = by_step.setdefault(name, {})
        for record in itertools.islice(_jsonl_records(list(step_files), storage_options), records_per_step):
            metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
            reason = str(metadata.get("filter_reason", "unknown"))
            chosen = samples.setdefault(reason, [])
            if len(chosen) < per_reason:
                chosen.append(Sample(str(record.get("id", "")), metadata.get("url"), _snippet(str(record.get("text")))))
            if wanted and all(len(samples.get(reason, ())) >= per_reason for reason in wanted):
                break
    return {step: dict(sorted(reasons.items())) for step, reasons in sorted(by_step.items())}


def sample_dead_letters(
    output: str,
    shown: int = _DEAD_LETTERS_SHOWN,
    read: int = _DEAD_LETTERS_READ,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, list[Sample]]:
    """A few dead letters of ``<output>/dead_letters/`` per reason: ``shown`` at most in all, of ``read`` records.

    Returns:
        ``{reason: [Sample]}``: the record's id (or file and offset), URL,
        excerpt, and step and message as detail; reasons by name.
    """
    by_reason: dict[str, list[Sample]] = {}
    taken = 0
    letters = _jsonl_records(_jsonl_files(join(output, DEAD_LETTERS_DIR), storage_options), storage_options)
    for letter in itertools.islice(letters, read):
        if taken == shown:
            break
        chosen = by_reason.setdefault(str(letter.get("reason", "unknown")), [])
        if len(chosen) == SAMPLES_PER_REASON:
            continue
        where = letter.get("record_id") or ":".join(str(letter[k]) for k in ("file", "offset", "line") if k in letter)
        detail = f"{letter.get('step', '?')}: {letter.get('message', '')}"
        chosen.append(Sample(str(where), letter.get("url"), _snippet(str(letter.get("excerpt") or "")), detail))
        taken += 1
    return dict(sorted(by_reason.items()))


def _svg(figure: Figure, name: str) -> str:
    """``figure`` as an SVG element for inline use: no XML prolog, ids unique to ``name``."""
    buffer = io.StringIO()
    # The salt makes the ids of each chart's clip paths differ from those of the page's other charts.
    with matplotlib.rc_context({"svg.hashsalt": name, "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def _funnel_steps(stats: Mapping[str, Any]) -> list[str]:
    """The steps records pass through: the stats' ``funnel`` when given, else every step counting in or out."""
    steps = stats.get("steps", {})
    names = stats.get("funnel") or [s for s, e in steps.items() if {"in", "out"} & set(e.get("counters", {}))]
    return [name for name in names if {"in", "out"} & set(steps.get(name, {}).get("counters", {}))]


def _outcomes(counters: Mapping[str, int]) -> dict[str, int]:
    """A step's records that were not passed on, per ``dropped.<reason>``-style counter (and unaccounted ones)."""
    outcomes = {name: value for name, value in counters.items() if name.startswith(OUTCOME_PREFIXES) and value}
    unaccounted = counters.get("in", 0) - counters.get("out", 0) - sum(outcomes.values())
    if unaccounted > 0 and "in" in counters:
        outcomes[_UNACCOUNTED] = unaccounted
    return outcomes


def _documents_read(stats: Mapping[str, Any]) -> int:
    """What the first funnel step passed on: the documents read, the whole of which the kept share is."""
    funnel = _funnel_steps(stats)
    return stats["steps"][funnel[0]]["counters"].get("out", 0) if funnel else 0


def _funnel_chart(stats: Mapping[str, Any]) -> str:
    steps = stats["steps"]
    funnel = _funnel_steps(stats)
    read = _documents_read(stats)
    outcome_names = list(dict.fromkeys(name for step in funnel for name in _outcomes(steps[step]["counters"])))
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
        for name, value in _outcomes(counters).items():
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


def _histogram_chart(stat: StatFigures) -> str:
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


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}" if abs(value) < 1 else f"{value:,.1f}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _steps_table(stats: Mapping[str, Any]) -> str:
    steps = stats.get("steps", {})
    funnel = set(_funnel_steps(stats))
    read = _documents_read(stats)
    timed = any("seconds" in entry for entry in steps.values())
    rows = []
    for step, entry in steps.items():
        counters = entry.get("counters", {})
        received, passed = counters.get("in", 0), counters.get("out", 0)
        in_funnel = step in funnel
        outcomes = "<br>".join(
            f"{_escape(name)}: {value:,}"
            for name, value in _outcomes(counters).items()
            if in_funnel or name != _UNACCOUNTED
        )
        others = ", ".join(
            f"{_escape(name)}: {_number(value)}"
            for name, value in sorted(counters.items())
            if name not in ("in", "out") and not name.startswith(OUTCOME_PREFIXES)
        )
        cells = [
            f"<th>{_escape(step)}</th>",
            f"<td>{received:,}</td>",
            f"<td>{passed:,}</td>",
            f"<td>{_share(passed, read) if in_funnel else ''}</td>",
            f"<td>{_share(passed, received) if in_funnel else ''}</td>",
            f"<td class=reasons>{outcomes}</td>",
            f"<td class=reasons>{others}</td>",
        ]
        if timed:
            seconds = entry.get("seconds")
            cells.append(f"<td>{'' if seconds is None else f'{seconds:,.1f}'}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    header = "<th>step</th><th>in</th><th>out</th><th>kept % of read</th><th>kept % of in</th>"
    header += "<th>set aside, per reason</th><th>other counters</th>" + ("<th>seconds</th>" if timed else "")
    return f"<table class=steps><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _summary_line(stat: StatFigures) -> str:
    figures = dict(stat.summary)
    if stat.histogram and "n" not in figures:
        figures["n"] = sum(count for _, count in stat.histogram)
    shown = [(key, figures[key]) for key in ("n", "mean", "std_dev", "min", "max") if key in figures]
    return ", ".join(f"{key} {_number(value)}" for key, value in shown)


def _histograms_section(summary_stats: Mapping[str, StatFigures]) -> str:
    if not summary_stats:
        return (
            "<p class=note>This run computed no summary statistics. Run the pipeline with "
            "<code>--summary_stats doc,word,line</code>, or compute them from this output with "
            "<code>beamtrove run stats --input OUTPUT --output STATS</code>: the report.html of that run "
            "shows them.</p>"
        )
    charts = [
        f"<figure>{_histogram_chart(stat)}<figcaption>{_escape(_summary_line(stat))}</figcaption></figure>"
        for stat in summary_stats.values()
        if stat.histogram
    ]
    without = [
        f"<tr><th>{_escape(stat.name)}</th><td>{_escape(_summary_line(stat))}</td></tr>"
        for stat in summary_stats.values()
        if not stat.histogram
    ]
    table = f"<table><tbody>{''.join(without)}</tbody></table>" if without else ""
    return f"<div class=histograms>{''.join(charts)}</div>{table}"


def _sample_items(samples: Sequence[Sample]) -> str:
    items = []
    for sample in samples:
        url = f" <span class=url>{_escape(sample.url)}</span>" if sample.url else ""
        detail = f"<div class=detail>{_escape(sample.detail)}</div>" if sample.detail else ""
        text = f"<pre>{_escape(sample.snippet)}</pre>" if sample.snippet else ""
        items.append(f"<li><code>{_escape(sample.id)}</code>{url}{detail}{text}</li>")
    return f"<ol>{''.join(items)}</ol>"


def _samples_section(stats: Mapping[str, Any], excluded: Mapping[str, Mapping[str, Sequence[Sample]]]) -> str:
    if not excluded:
        return "<p class=note>No step wrote excluded documents to this output.</p>"
    steps = stats.get("steps", {})
    blocks = []
    # In pipeline order, as the funnel shows them; steps stats.json does not name come last.
    rank = {step: number for number, step in enumerate(steps)}
    for step, reasons in sorted(excluded.items(), key=lambda item: rank.get(item[0], len(rank))):
        counters = steps.get(step, {}).get("counters", {})
        details = []
        for reason, samples in reasons.items():
            dropped = counters.get(f"dropped.{reason}")
            count = f"{dropped:,} dropped" if dropped is not None else f"{len(samples)} shown"
            details.append(
                f"<details><summary>{_escape(reason)} <span class=count>({count})</span></summary>"
                f"{_sample_items(samples)}</details>"
            )
        blocks.append(f"<h3>{_escape(step)}</h3>{''.join(details)}")
    return "".join(blocks)


def _dead_letters_section(stats: Mapping[str, Any], dead_letters: Mapping[str, Sequence[Sample]]) -> str:
    if not dead_letters:
        return "<p class=note>No dead letters: every record could be read and processed.</p>"
    counters = [entry.get("counters", {}) for entry in stats.get("steps", {}).values()]
    sections = []
    for reason, samples in dead_letters.items():
        errors = sum(step.get(f"errors.{reason}", 0) for step in counters)
        count = f" <span class=count>({errors:,} in all)</span>" if errors else ""
        sections.append(f"<details><summary>{_escape(reason)}{count}</summary>{_sample_items(samples)}</details>")
    return "".join(sections)


def _configuration_section(stats: Mapping[str, Any]) -> str:
    run = {
        key: stats[key] for key in ("pipeline", "runner", "state", "wall_seconds", "beamtrove_version") if key in stats
    }
    if "inputs_completed" in stats:
        run["inputs_completed"] = stats["inputs_completed"]
    rows = [*run.items(), *sorted(stats.get("options", {}).items())]
    cells = "".join(
        f"<tr><th>{_escape(name)}</th><td><code>{_escape(json.dumps(value, ensure_ascii=False))}</code></td></tr>"
        for name, value in rows
    )
    return f"<table class=config><tbody>{cells}</tbody></table>"


_STYLE = """
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; margin: 1.5em 2em; color: #1a202c;
       background: #ffffff; max-width: 1400px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #cbd5e0; }
.subtitle { color: #4a5568; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #e2e8f0; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { text-align: left; background: #f7fafc; } td.reasons, .config td { text-align: left; }
.histograms { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; } figcaption { font-size: 0.8em; color: #4a5568; text-align: center; }
svg { max-width: 100%; height: auto; }
details { margin: 0.3em 0; } summary { cursor: pointer; font-weight: bold; } .count { font-weight: normal; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7fafc; border: 1px solid #e2e8f0;
      padding: 0.5em; font-size: 0.8em; max-height: 14em; overflow: auto; }
.url { color: #2c5282; font-size: 0.85em; word-break: break-all; } .detail { font-size: 0.85em; color: #742a2a; }
.note { color: #4a5568; font-style: italic; }
"""


def render_report(
    stats: Mapping[str, Any],
    summary_stats: Mapping[str, StatFigures] | None = None,
    excluded: Mapping[str, Mapping[str, Sequence[Sample]]] | None = None,
    dead_letters: Mapping[str, Sequence[Sample]] | None = None,
) -> str:
    """The report's HTML page.

    Args:
        stats: The run's ``stats.json``.
        summary_stats: Its summary statistics (:func:`read_summary_stats`).
        excluded: Samples of what its steps dropped (:func:`sample_excluded`).
        dead_letters: Samples of its dead letters (:func:`sample_dead_letters`).
    """
    pipeline = stats.get("pipeline", "run")
    read = _documents_read(stats)
    funnel = _funnel_steps(stats)
    kept = stats["steps"][funnel[-1]]["counters"].get("out", 0) if funnel else 0
    subtitle = " · ".join(
        part
        for part in (
            _escape(stats.get("state", "")),
            f"{stats['wall_seconds']:,.1f} s" if isinstance(stats.get("wall_seconds"), (int, float)) else "",
            f"{_escape(stats.get('runner', ''))}",
            f"beamtrove {_escape(stats['beamtrove_version'])}" if "beamtrove_version" in stats else "",
            f"{read:,} documents read, {kept:,} kept ({_share(kept, read)})",
        )
        if part
    )
    funnel_chart = _funnel_chart(stats) if funnel else "<p class=note>No step counted any record.</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>beamtrove report: {_escape(pipeline)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>beamtrove report: {_escape(pipeline)}</h1>
<p class=subtitle>{subtitle}</p>
<h2 id=funnel>Funnel</h2>
{funnel_chart}
<h2 id=steps>Steps</h2>
{_steps_table(stats)}
<h2 id=summary-stats>Summary statistics of the kept documents</h2>
{_histograms_section(summary_stats or {})}
<h2 id=excluded>What each filter dropped</h2>
{_samples_section(stats, excluded or {})}
<h2 id=dead-letters>Dead letters</h2>
{_dead_letters_section(stats, dead_letters or {})}
<h2 id=configuration>Configuration</h2>
{_configuration_section(stats)}
</body></html>
"""


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
    stats = read_stats(join(output, STATS_FILE), storage_options)
    page = render_report(
        stats,
        read_summary_stats(output, storage_options),
        sample_excluded(output, stats.get("steps", {}), storage_options=storage_options),
        sample_dead_letters(output, storage_options=storage_options),
    )
    path = path or join(output, REPORT_FILE)
    write_atomically(page.encode("utf-8"), path, storage_options)
    return path
