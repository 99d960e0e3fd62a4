"""Run statistics: ``stats.json``, its steps in pipeline order, and the table ``beamtrove stats`` prints.

Every beamtrove step counts into its own metrics namespace; after a run,
:func:`beamtrove.metrics.collect_stats` merges the results per step.
:func:`write_stats` stores them beside the output, :func:`read_stats` reads
them back, :func:`merge_stats` adds up several runs' and :func:`format_stats`
renders them. This module imports no Beam: reading a run's stats does not
pay for Beam's import.
"""

from __future__ import annotations

import collections
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import filesystem, join, open_url, write_url_atomically
from beamtrove.layout import STATS_FILE, TOKENS_AFTER_DEDUP, TOKENS_BEFORE_DEDUP

__all__ = [
    "LANGUAGE_COUNTERS",
    "OUTCOME_PREFIXES",
    "add_distribution",
    "by_language",
    "format_stats",
    "merge_stats",
    "order_steps",
    "read_stats",
    "write_stats",
]

#: The counters of what a step did not pass on, by prefix (see :mod:`beamtrove.metrics`).
OUTCOME_PREFIXES = ("skipped.", "dropped.", "errors.")
#: The prefix of a step's counters of one language: ``language.<key>.in``, ``.out`` and ``.dropped.<reason>``
#: (see :attr:`~beamtrove.transforms.filters.base.DocumentFilter.counts_by_language`).
LANGUAGE_COUNTERS = "language."


def by_language(steps: Mapping[str, Any]) -> dict[str, dict[str, dict[str, int]]]:
    """Each language's counters, per step that counts them: ``{language: {step: {"in": n, "out": n, ...}}}``.

    Languages come by the documents their first step received, most first; steps in the order of ``steps``.
    """
    found: dict[str, dict[str, dict[str, int]]] = {}
    for step, entry in steps.items():
        for name, value in entry.get("counters", {}).items():
            if name.startswith(LANGUAGE_COUNTERS):
                language, _, counter = name[len(LANGUAGE_COUNTERS) :].partition(".")
                found.setdefault(language, {}).setdefault(step, {})[counter] = value
    return dict(sorted(found.items(), key=lambda item: (-next(iter(item[1].values())).get("in", 0), item[0])))


def order_steps(
    steps: Mapping[str, Any], funnel: Sequence[str], writers: Sequence[str], rank: Mapping[str, int] | None = None
) -> dict:
    """``steps`` in pipeline order: each funnel step followed by those applied within or after it, then writers.

    Every step of ``funnel`` and ``writers`` is listed, with ``in`` and ``out``
    counters of 0 when it counted nothing.

    Args:
        steps: Stats per step name.
        funnel: The steps records pass through, in order.
        writers: The writers of what steps set aside, in order.
        rank: The order labels were applied in the graph; places steps that
            are in neither list. Without it they follow the funnel, by name.
    """
    rank = rank or {}
    known = set(funnel) | set(writers)
    inside: dict[str | None, list[str]] = collections.defaultdict(list)
    unranked = []
    for step in sorted((s for s in steps if s not in known), key=lambda s: (rank.get(s, math.inf), s)):
        if step not in rank:
            unranked.append(step)
            continue
        before = [f for f in funnel if rank.get(f, math.inf) <= rank[step]]
        inside[before[-1] if before else None].append(step)
    names = [*inside[None]]
    for step in funnel:
        names += [step, *inside[step]]
    names += unranked + list(writers)
    ordered = {name: steps.get(name) or {"counters": {}, "distributions": {}} for name in names}
    # Records pass through funnel steps and writers: each says what it got and passed on, 0 when nothing.
    for name in known:
        ordered[name] = {**ordered[name], "counters": {"in": 0, "out": 0, **ordered[name]["counters"]}}
    return ordered


def add_distribution(
    distributions: dict[str, dict], name: str, count: int, total: float, low: float, high: float
) -> None:
    """Merges a distribution's count, sum, minimum and maximum into ``distributions[name]``, and its mean."""
    merged = distributions.setdefault(name, {"count": 0, "sum": 0, "min": math.inf, "max": -math.inf})
    merged["count"] += count
    merged["sum"] += total
    merged["min"] = min(merged["min"], low)
    merged["max"] = max(merged["max"], high)
    merged["mean"] = merged["sum"] / merged["count"]


def merge_stats(runs: Iterable[Mapping[str, Any]]) -> dict:
    """Adds up the per-step stats of several runs (the ``steps`` of their ``stats.json``).

    Counters and seconds are summed; distributions merge their count, sum,
    min and max. Steps keep the order in which they first appear.
    """
    steps: dict[str, dict] = {}
    for run in runs:
        for step, entry in run.items():
            merged = steps.setdefault(step, {"counters": {}, "distributions": {}})
            if "seconds" in entry:
                merged["seconds"] = round(merged.get("seconds", 0) + entry["seconds"], 3)
            for name, value in entry.get("counters", {}).items():
                merged["counters"][name] = merged["counters"].get(name, 0) + value
            for name, d in entry.get("distributions", {}).items():
                add_distribution(merged["distributions"], name, d["count"], d["sum"], d["min"], d["max"])
    return steps


def write_stats(stats: Mapping[str, Any], output_dir: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Writes ``stats`` as ``<output_dir>/stats.json``; returns its path."""
    path = join(output_dir, STATS_FILE)
    fs, fs_path = filesystem(output_dir, storage_options)
    fs.makedirs(fs_path, exist_ok=True)
    # An interrupted write leaves no half stats.json.
    write_url_atomically(path, (json.dumps(stats, indent=2) + "\n").encode(), storage_options)
    return path


def read_stats(path: str, storage_options: Mapping[str, Any] | None = None) -> dict:
    """Reads a ``stats.json`` file, or the one inside the directory ``path``.

    Raises:
        FileNotFoundError: There is no such file.
        ConfigurationError: The file cannot be read, is not JSON (empty, cut
            short, garbage) or is JSON of another shape than the stats a run
            writes; the message names the file and what is wrong.
    """
    fs, fs_path = filesystem(path, storage_options)
    if fs.isdir(fs_path):
        path = join(path, STATS_FILE)
    try:
        with open_url(path, "rb", storage_options) as source:
            data = source.read()
    except (IsADirectoryError, PermissionError) as exc:
        raise ConfigurationError(f"{path} cannot be read ({exc.strerror}): pass a run's stats.json") from None
    stats, problem = _parse_json(data)
    problem = problem or _shape_problem(stats)
    if problem is not None:
        raise ConfigurationError(f"{path} is damaged ({problem}): restore it, or rerun the pipeline to write it again")
    return stats


def _parse_json(data: bytes) -> tuple[Any, str | None]:
    """The JSON document ``data`` holds, or why it holds none: empty, not text, cut short or not JSON."""
    if not data.strip():
        return None, "empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not JSON: byte {exc.start} is not UTF-8 text"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        if _ends_unfinished(exc):
            return None, f"cut short: its {len(data):,} bytes end inside the JSON"
        return None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"


# The words JSON (as Python writes it) spells its constants with.
_CONSTANTS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")


def _ends_unfinished(error: json.JSONDecodeError) -> bool:
    """Whether the decoder failed only because the text ended: nothing, or a begun value or escape, is left."""
    if error.msg.startswith("Unterminated string"):  # only the end of the text leaves a string open
        return True
    rest = error.doc[error.pos :].rstrip()
    return (
        not rest
        or any(constant.startswith(rest) for constant in _CONSTANTS)
        or re.fullmatch(r"[-+0-9.eE]+|u[0-9a-fA-F]{0,4}", rest) is not None
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_DISTRIBUTION_FIGURES = ("count", "sum", "min", "max", "mean")


def _steps_problem(steps: Any, key: str) -> str | None:
    """What makes ``steps`` (the ``key`` of a stats.json) other than ``{step: {counters, distributions, seconds}}``."""
    if not isinstance(steps, dict):
        return f'"{key}" is {type(steps).__name__}, not an object of steps'
    for step, entry in steps.items():
        where = f'"{key}" -> "{step}"'
        if not isinstance(entry, dict):
            return f"{where} is {type(entry).__name__}, not an object"
        counters, distributions = entry.get("counters", {}), entry.get("distributions", {})
        if not isinstance(counters, dict) or not all(map(_is_number, counters.values())):
            return f'{where} -> "counters" is not an object of numbers'
        if not isinstance(distributions, dict) or not all(
            isinstance(figures, dict) and all(_is_number(figures.get(name)) for name in _DISTRIBUTION_FIGURES)
            for figures in distributions.values()
        ):
            return f'{where} -> "distributions" is not an object of {", ".join(_DISTRIBUTION_FIGURES)} figures'
        if "seconds" in entry and not _is_number(entry["seconds"]):
            return f'{where} -> "seconds" is not a number'
    return None


def _shape_problem(stats: Any) -> str | None:
    """What makes a JSON document other than the stats a run writes; None when it has their shape."""
    if not isinstance(stats, dict):
        return f"a JSON {type(stats).__name__}, not an object"
    if "steps" not in stats:
        return 'no "steps" in it'
    for key in ("steps", "run_steps"):
        if key in stats and (problem := _steps_problem(stats[key], key)):
            return problem
    funnel = stats.get("funnel", [])
    if not isinstance(funnel, list) or not all(isinstance(step, str) for step in funnel):
        return '"funnel" is not a list of step names'
    if not isinstance(stats.get("options", {}), dict):
        return '"options" is not an object'
    for key in ("inputs_completed", "wall_seconds"):
        if key in stats and not _is_number(stats[key]):
            return f'"{key}" is not a number'
    return None


def _number(value: float) -> str:
    return f"{value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{int(value):,}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


_COLUMNS = ("in", "out", "kept%", "total%", "skipped", "dropped", "errors", "seconds")


def format_stats(stats: Mapping[str, Any]) -> str:
    """Renders stats as a table: per step, the record funnel, then the details of its counters.

    Steps come in the order of ``stats.json``. For the steps records pass
    through (``funnel`` when the stats name them; otherwise every step),
    ``kept%`` is what the step passed on of what it received and ``total%``
    what it passed on of the documents read. ``seconds`` is the time
    the runner measured in the step, where it reports one. A step with no
    ``in`` and ``out`` counters (one that works on the whole input, such as
    MinHash's banding) shows only its details. ``unaccounted`` shows records
    a step received but neither emitted, skipped, dropped nor errored; it is
    0 for every sound per-record step.
    """
    steps = stats.get("steps", stats)
    funnel = set(stats.get("funnel", steps))
    read = next((entry["counters"]["out"] for entry in steps.values() if "out" in entry.get("counters", {})), 0)
    rows = []
    for step, entry in steps.items():
        counters = entry.get("counters", {})
        outcomes = {prefix: 0 for prefix in OUTCOME_PREFIXES}
        for name, value in counters.items():
            for prefix in OUTCOME_PREFIXES:
                if name.startswith(prefix):
                    outcomes[prefix] += value
        seconds = entry.get("seconds")
        cells = [""] * len(_COLUMNS)
        if "in" in counters or "out" in counters or not counters:
            received, passed = counters.get("in", 0), counters.get("out", 0)
            cells[:2] = _number(received), _number(passed)
            if step in funnel:
                cells[2:4] = _share(passed, received), _share(passed, read)
            cells[4:7] = (_number(value) for value in outcomes.values())
        if seconds is not None:
            cells[7] = f"{seconds:,.1f}"
        details = []
        if "in" in counters and "out" in counters:
            unaccounted = counters["in"] - counters["out"] - sum(outcomes.values())
            if unaccounted:
                details.append(f"unaccounted: {_number(unaccounted)}")
        details += [
            f"{name}: {_number(counters[name])}"
            for name in sorted(counters)
            if name not in ("in", "out") and not name.startswith(LANGUAGE_COUNTERS)
        ]
        details += [
            f"{name}: count {_number(d['count'])}, mean {_number(d['mean'])}, min {_number(d['min'])}, "
            f"max {_number(d['max'])}"
            for name, d in entry.get("distributions", {}).items()
        ]
        rows.append((step, cells, details))
    width = max([len("step"), *(len(step) for step, _, _ in rows)])
    lines = [f"{'step':<{width}}  " + "  ".join(f"{column:>10}" for column in _COLUMNS)]
    for step, cells, details in rows:
        lines.append((f"{step:<{width}}  " + "  ".join(f"{cell:>10}" for cell in cells)).rstrip())
        lines += [f"    {detail}" for detail in details]
    if not rows:
        lines.append("(no step counted anything)")
    lines += ["", "kept%: out of in, per step; total%: out of the documents read.", *_notes(stats)]
    return "\n".join(lines + _language_lines(steps))


def _language_lines(steps: Mapping[str, Any]) -> list[str]:
    """Per language, what the steps that count languages received and passed on (none when no step does)."""
    languages = by_language(steps)
    if not languages:
        return []
    counting = list(dict.fromkeys(step for per_step in languages.values() for step in per_step))
    width = max(len("language"), *map(len, languages))
    columns = ["in", *counting, "kept%"]
    lines = ["", "Per language (documents each step passed on):"]
    lines.append(f"{'language':<{width}}  " + "  ".join(f"{column:>{max(10, len(column))}}" for column in columns))
    for language, per_step in languages.items():
        received = per_step[counting[0]].get("in", 0) if counting[0] in per_step else 0
        passed = [per_step.get(step, {}).get("out", 0) for step in counting]
        cells = [_number(received), *map(_number, passed), _share(passed[-1], received)]
        lines.append(
            f"{language:<{width}}  "
            + "  ".join(f"{cell:>{max(10, len(column))}}" for cell, column in zip(cells, columns, strict=True))
        )
    return lines


def _notes(stats: Mapping[str, Any]) -> list[str]:
    """What the table's figures cover, and ratios that need two steps."""
    notes = []
    if "inputs_completed" in stats:
        run_steps = stats.get("run_steps", {}).values()
        this_run = next((entry["counters"]["files"] for entry in run_steps if "files" in entry["counters"]), 0)
        notes.append(
            f"Totals over the {stats['inputs_completed']:,} inputs the output holds; this run completed {this_run:,}."
        )
    steps = stats.get("steps", stats)
    before, after = (
        steps.get(step, {}).get("counters", {}).get("tokens") for step in (TOKENS_BEFORE_DEDUP, TOKENS_AFTER_DEDUP)
    )
    if before:
        notes.append(
            f"Tokens: {before:,} before dedup, {after or 0:,} after: dedup kept {(after or 0) / before:.1%} of them."
        )
    for step, entry in steps.items():
        counters = entry.get("counters", {})
        if counters.get("chars_in") and counters.get("in"):
            notes.append(
                f"{step} kept {counters.get('out', 0) / counters['in']:.1%} of its documents and "
                f"{counters.get('chars_out', 0) / counters['chars_in']:.1%} of their characters."
            )
    return notes
