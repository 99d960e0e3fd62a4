"""What the report reads of a run's output: its summary statistics, and samples of what its steps set aside.

Samples are chosen deterministically and read boundedly: files in name
order, records in file order, and a step's reading stops once each reason its
counters name has enough samples, or after a fixed number of records.
Records that cannot be read are passed over.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from beamtrove.dead_letter import DeadLetter
from beamtrove.fs import filesystem, join
from beamtrove.layout import SUMMARY_STATS_DIR
from beamtrove.run_output import OutputRecord, Records, RunOutput

__all__ = [
    "SAMPLES_PER_REASON",
    "Sample",
    "StatFigures",
    "read_summary_stats",
    "sample_dead_letters",
    "sample_excluded",
]

#: Samples shown per (step, reason).
SAMPLES_PER_REASON = 3
# A step's excluded documents read at most: a 10 GB folder is never read to its end.
_RECORDS_PER_STEP = 5000
_DEAD_LETTERS_SHOWN = 20
_DEAD_LETTERS_READ = 5000
_SNIPPET_CHARS = 600
# DataTrove's statistics weighted by characters or tokens rather than counted per document.
_WEIGHTED_SUFFIXES = ("__chars", "__tokens")
_UNKNOWN = "unknown"


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


def _readable(records: Records) -> Iterator[OutputRecord]:
    """``records`` without the places that could not be read: a sample is of what is there."""
    return (record for record in records if not isinstance(record, DeadLetter))


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
    run = RunOutput(output, storage_options)
    by_step: dict[str, dict[str, list[Sample]]] = {}
    for name in run.excluded_steps():
        counters = steps.get(name, {}).get("counters", {})
        wanted = {counter.removeprefix("dropped.") for counter in counters if counter.startswith("dropped.")}
        samples: dict[str, list[Sample]] = {}
        for record in itertools.islice(_readable(run.excluded(name)), records_per_step):
            document = record.document
            chosen = samples.setdefault(record.reason or _UNKNOWN, [])
            if len(chosen) < per_reason:
                chosen.append(Sample(document.id, document.metadata.get("url"), _snippet(document.text)))
            if wanted and all(len(samples.get(reason, ())) >= per_reason for reason in wanted):
                break
        if samples:
            by_step[name] = dict(sorted(samples.items()))
    return by_step


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
    for record in itertools.islice(_readable(RunOutput(output, storage_options).dead_letters()), read):
        if taken == shown:
            break
        chosen = by_reason.setdefault(record.reason or _UNKNOWN, [])
        if len(chosen) == SAMPLES_PER_REASON:
            continue
        letter = record.document.metadata
        where = letter.get("record_id") or ":".join(str(letter[k]) for k in ("file", "offset", "line") if k in letter)
        detail = f"{letter.get('step', '?')}: {letter.get('message', '')}"
        chosen.append(Sample(str(where), letter.get("url"), _snippet(record.document.text), detail))
        taken += 1
    return dict(sorted(by_reason.items()))
