"""The report's HTML page: its sections, drawn from a run's stats and what the report read of its output.

Every text that comes from the data or the configuration is HTML-escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from beamtrove.report.charts import UNACCOUNTED, documents_read, funnel_steps, funnel_svg, histogram_svg, set_aside
from beamtrove.report.sampling import Sample, StatFigures
from beamtrove.stats import LANGUAGE_COUNTERS, OUTCOME_PREFIXES, by_language

__all__ = ["render_report"]


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}" if abs(value) < 1 else f"{value:,.1f}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _steps_table(stats: Mapping[str, Any]) -> str:
    steps = stats.get("steps", {})
    funnel = set(funnel_steps(stats))
    read = documents_read(stats)
    timed = any("seconds" in entry for entry in steps.values())
    rows = []
    for step, entry in steps.items():
        counters = entry.get("counters", {})
        received, passed = counters.get("in", 0), counters.get("out", 0)
        in_funnel = step in funnel
        outcomes = "<br>".join(
            f"{_escape(name)}: {value:,}"
            for name, value in set_aside(counters).items()
            if in_funnel or name != UNACCOUNTED
        )
        others = ", ".join(
            f"{_escape(name)}: {_number(value)}"
            for name, value in sorted(counters.items())
            if name not in ("in", "out") and not name.startswith((*OUTCOME_PREFIXES, LANGUAGE_COUNTERS))
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


def _languages_section(stats: Mapping[str, Any]) -> str:
    """Per language, what each step that counts languages passed on, and why it set documents aside."""
    languages = by_language(stats.get("steps", {}))
    if not languages:
        return ""
    counting = list(dict.fromkeys(step for per_step in languages.values() for step in per_step))
    rows = []
    for language, per_step in languages.items():
        received = per_step.get(counting[0], {}).get("in", 0)
        passed = [per_step.get(step, {}).get("out", 0) for step in counting]
        reasons = "<br>".join(
            f"{_escape(step)}: {_escape(name)}: {value:,}"
            for step in counting
            for name, value in per_step.get(step, {}).items()
            if name.startswith(OUTCOME_PREFIXES) and value
        )
        cells = "".join(f"<td>{value:,}</td>" for value in (received, *passed))
        rows.append(
            f"<tr><th>{_escape(language)}</th>{cells}<td>{_share(passed[-1], received)}</td>"
            f"<td class=reasons>{reasons}</td></tr>"
        )
    header = "<th>language</th><th>in</th>" + "".join(f"<th>{_escape(step)}</th>" for step in counting)
    header += "<th>kept % of in</th><th>set aside, per step and reason</th>"
    table = f"<table class=steps><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return f"<h2 id=languages>Languages</h2>\n{table}\n"


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
        f"<figure>{histogram_svg(stat)}<figcaption>{_escape(_summary_line(stat))}</figcaption></figure>"
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
    read = documents_read(stats)
    funnel = funnel_steps(stats)
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
    funnel_chart = funnel_svg(stats) if funnel else "<p class=note>No step counted any record.</p>"
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
{_languages_section(stats)}<h2 id=summary-stats>Summary statistics of the kept documents</h2>
{_histograms_section(summary_stats or {})}
<h2 id=excluded>What each filter dropped</h2>
{_samples_section(stats, excluded or {})}
<h2 id=dead-letters>Dead letters</h2>
{_dead_letters_section(stats, dead_letters or {})}
<h2 id=configuration>Configuration</h2>
{_configuration_section(stats)}
</body></html>
"""
