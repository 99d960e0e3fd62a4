"""SummaryStats over real documents: DataTrove's merged layout, exact and order-independent figures, merging."""

from __future__ import annotations

import json
import pathlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.summary import DocStats, LineStats, MetricStats, SummaryStats, merge_summary_stats


@pytest.fixture(scope="module")
def speeches(inaugural) -> list[Document]:
    """Inaugural speeches with made-up URLs on two hosts."""
    return [
        Document(
            text, name, metadata={"url": f"https://{'www.whitehouse.gov' if i % 3 else 'avalon.law.yale.edu'}/{name}"}
        )
        for i, (name, text) in enumerate(sorted(inaugural.items()))
    ]


def _run(documents: list[Document], output: pathlib.Path, groups=("summary", "histogram", "fqdn", "suffix")) -> None:
    with TestPipeline() as pipeline:
        written = pipeline | beam.Create(documents) | SummaryStats(str(output), [DocStats(), LineStats()], groups)
        expected = [str(output / group / stat / "metric.json") for group in ("summary",) for stat in ("length",)]
        assert_that(written | beam.Filter(lambda path: path.endswith("summary/length/metric.json")), equal_to(expected))


def _read(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("metric.json"))}


def test_summary_and_histogram_hold_datatrove_figures(speeches, tmp_path):
    _run(speeches, tmp_path)
    lengths = [len(document.text) for document in speeches]
    summary = json.loads((tmp_path / "summary" / "length" / "metric.json").read_text())["summary"]
    assert summary["total"] == sum(lengths) and summary["n"] == len(speeches)
    assert summary["min"] == min(lengths) and summary["max"] == max(lengths)
    assert summary["mean"] == pytest.approx(sum(lengths) / len(lengths), rel=1e-15)
    histogram = json.loads((tmp_path / "histogram" / "n_lines" / "metric.json").read_text())
    # Each bucket's total is its number of documents; __chars adds up their characters.
    assert sum(entry["total"] for entry in histogram.values()) == len(speeches)
    chars = json.loads((tmp_path / "histogram" / "n_lines__chars" / "metric.json").read_text())
    assert sum(entry["total"] for entry in chars.values()) == sum(lengths)
    fqdn = json.loads((tmp_path / "fqdn" / "length" / "metric.json").read_text())
    assert sorted(fqdn) == ["avalon.law.yale.edu", "www.whitehouse.gov"]
    assert fqdn["avalon.law.yale.edu"]["n"] == len(speeches[::3])
    assert sorted(json.loads((tmp_path / "suffix" / "length" / "metric.json").read_text())) == ["edu", "gov"]


def test_same_bytes_whatever_the_order_of_the_documents(speeches, tmp_path):
    _run(speeches, tmp_path / "forward")
    _run(speeches[::-1], tmp_path / "backward")
    assert _read(tmp_path / "forward") == _read(tmp_path / "backward")


def test_merging_two_halves_gives_the_whole(speeches, tmp_path):
    half = len(speeches) // 2
    _run(speeches[:half], tmp_path / "a", ("summary", "histogram"))
    _run(speeches[half:], tmp_path / "b", ("summary", "histogram"))
    _run(speeches, tmp_path / "all", ("summary", "histogram"))
    merge_summary_stats([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "merged"))
    merged, whole = _read(tmp_path / "merged"), _read(tmp_path / "all")
    halves = [_read(tmp_path / "a"), _read(tmp_path / "b")]
    assert merged.keys() == whole.keys()
    compared = 0
    for name in whole:
        ours, theirs = json.loads(merged[name]), json.loads(whole[name])
        assert ours.keys() == theirs.keys()
        for key in theirs:
            # DataTrove's format writes a total of 0 as a bare 0, which forgets how many values made it.
            if any(json.loads(half.get(name, b"{}")).get(key) == 0 for half in halves):
                continue
            compared += 1
            a, b = MetricStats.from_json(ours[key]), MetricStats.from_json(theirs[key])
            assert (a.n, a.min, a.max) == (b.n, b.min, b.max)
            assert a.mean == pytest.approx(b.mean, rel=1e-12) and a.variance == pytest.approx(b.variance, rel=1e-9)
    assert compared > 100


def test_figures_round_trip_datatrove_json():
    stats = MetricStats.of(2) + MetricStats.of(4) + MetricStats.of(9)
    assert stats.to_json() == {
        "total": 15,
        "n": 3,
        "mean": 5.0,
        "variance": 13.0,
        "std_dev": 13**0.5,
        "min": 2,
        "max": 9,
        "unit": "task",
    }
    assert MetricStats.from_json(stats.to_json()) == stats
    counts = MetricStats.of(1) + MetricStats.of(1)
    assert counts.to_json() == {"total": 2, "unit": "task"}
    assert MetricStats.from_json({"total": 2, "unit": "task"}).n == 2
    assert (MetricStats.of(0.0) + MetricStats.of(0.0)).to_json() == 0


def test_bad_groups_fail_fast(tmp_path):
    with pytest.raises(ValueError, match="summary, histogram, fqdn, suffix"):
        SummaryStats(str(tmp_path), [DocStats()], ("summary", "hosts"))
    with pytest.raises(ValueError, match="at least one"):
        SummaryStats(str(tmp_path), [])
