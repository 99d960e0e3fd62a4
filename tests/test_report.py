"""The report page: a real fineweb run's report seen by headless Chromium, escaping, missing pieces, sampling."""

from __future__ import annotations

import gzip
import html
import json
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib.image import imread

from beamtrove.cli import main
from beamtrove.layout import READ, WRITE_DOCUMENTS
from beamtrove.report import (
    HISTOGRAM_COLOUR,
    HISTOGRAM_FACE,
    KEPT_COLOUR,
    Sample,
    StatFigures,
    read_summary_stats,
    render_report,
    sample_dead_letters,
    sample_excluded,
    write_report,
)
from tests.conftest import DATA, beamtrove, beamtrove_here, jsonl_rows, require

LID_MODEL = DATA / "models" / "lid176" / "lid.176.ftz"
BLOCKLIST = DATA / "blocklists" / "ut1"
WARCS = ("cc-main-2020-34_resiliparse_warcfile.warc.gz", "dolma_wget_sample-0000.warc.gz")
# Each with what it measures of a document, and whether DataTrove rounds its histogram buckets to 3 digits.
DOCUMENT_STATS = {
    "length": (len, False),
    "n_words": (lambda text: len(text.split()), False),
    "avg_word_length": (lambda text: np.mean([len(w) for w in text.split()] or [0]), True),
    "n_lines": (lambda text: len(text.splitlines()), False),
    "avg_line_length": (lambda text: np.mean([len(line) for line in text.splitlines()] or [0]), True),
    "white_space_ratio": (lambda text: sum(c.isspace() for c in text) / max(len(text), 1), True),
}


def write_summary_stats(output: pathlib.Path, texts: list[str]) -> None:
    """Writes ``summary_stats/{summary,histogram}/<stat>/metric.json`` of ``texts`` as DataTrove lays them out.

    Histogram buckets are plain numbers (what DataTrove writes for a bucket of counted documents), except
    those of ``length``, written as stats objects with their ``total``; ``n_lines``'s summary is not nested
    under ``summary`` and has a variance but no std_dev: the reader takes both.
    """
    for stat, (measure, rounded) in DOCUMENT_STATS.items():
        values = np.array([float(measure(text)) for text in texts])
        buckets: dict[str, int] = {}
        for value in values:
            key = str(round(value, 3)) if rounded else str(int(value))
            buckets[key] = buckets.get(key, 0) + 1
        histogram = {k: {"total": v} for k, v in buckets.items()} if stat == "length" else buckets
        summary = {
            "total": values.sum(),
            "n": len(values),
            "mean": values.mean(),
            "variance": values.var(ddof=1),
            "min": values.min(),
            "max": values.max(),
        }
        if stat != "n_lines":
            summary["std_dev"] = float(np.sqrt(summary["variance"]))
        for group, metric in (
            ("summary", summary if stat == "n_lines" else {"summary": summary}),
            ("histogram", histogram),
        ):
            folder = output / "summary_stats" / group / stat
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "metric.json").write_text(json.dumps(metric, default=float))


@pytest.fixture(scope="module")
def fineweb_output(tmp_path_factory) -> pathlib.Path:
    """A fineweb run over two real WARC files, with summary statistics of its kept documents."""
    out = tmp_path_factory.mktemp("report") / "run"
    inputs = [argument for name in WARCS for argument in ("--input", str(require(DATA / "warc" / name)))]
    assets = ["--lid_model", str(require(LID_MODEL)), "--url_blocklist", str(require(BLOCKLIST))]
    assert main(["run", "fineweb", *inputs, "--output", str(out), *assets]) == 0
    write_summary_stats(out, [row["text"] for row in jsonl_rows(out / "documents")])
    return out


def test_report_page_holds_the_steps_samples_and_configuration(fineweb_output):
    stats = json.loads((fineweb_output / "stats.json").read_text())
    path = write_report(str(fineweb_output))
    assert path == str(fineweb_output / "report.html")
    page = pathlib.Path(path).read_text()
    assert len(page) < 1_000_000
    # Self-contained: no script, no resource from elsewhere.
    assert "<script" not in page and not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert page.count("<svg") == 1 + len(DOCUMENT_STATS)
    read = stats["steps"][READ]["counters"]["out"]
    kept = stats["steps"][WRITE_DOCUMENTS]["counters"]["out"]
    assert f"{read:,} documents read, {kept:,} kept ({kept / read:.1%})" in page
    for step in stats["funnel"]:
        counters = stats["steps"][step]["counters"]
        assert f"<th>{step}</th><td>{counters['in']:,}</td><td>{counters['out']:,}</td>" in page
        assert f"<td>{counters['out'] / read:.1%}</td><td>{counters['out'] / counters['in']:.1%}</td>" in page
    dropped = {
        (step, name.removeprefix("dropped.")): value
        for step, entry in stats["steps"].items()
        for name, value in entry["counters"].items()
        if name.startswith("dropped.") and (fineweb_output / "excluded" / step).exists()
    }
    assert len(dropped) >= 4
    excluded = {step: jsonl_rows(fineweb_output / "excluded" / step) for step, _ in dropped}
    for (step, reason), count in dropped.items():
        assert f"<summary>{reason} <span class=count>({count:,} dropped)</span></summary>" in page
        first = next(row for row in excluded[step] if row["metadata"]["filter_reason"] == reason)
        # WARC record ids are <urn:uuid:...>: escaped like any text of the data.
        assert f"<code>{html.escape(first['id'])}</code>" in page
    assert "No dead letters" in page
    assert f"<th>lid_model</th><td><code>&quot;{LID_MODEL}&quot;</code></td>" in page
    assert "n 28" not in page and f"n {kept}, mean" in page


def _colour_mask(image: np.ndarray, colour: str) -> np.ndarray:
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.all(np.abs(image[:, :, :3] - rgb) < 2.5 / 255, axis=2)


def _runs(present: np.ndarray, gap: int = 1) -> list[tuple[int, int]]:
    """``[start, end)`` of the runs of True in ``present``, runs closer than ``gap`` merged."""
    indices = np.flatnonzero(present)
    if not len(indices):
        return []
    breaks = np.flatnonzero(np.diff(indices) > gap)
    starts = [indices[0], *indices[breaks + 1]]
    ends = [*(indices[breaks] + 1), indices[-1] + 1]
    return list(zip(starts, ends, strict=True))


def _screenshot(page: pathlib.Path, png: pathlib.Path, width: int, height: int) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is absent: .ci/run installs Debian's chromium package (apt-get install chromium)")
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={png.parent / 'chromium-profile'}",
        f"--window-size={width},{height}",
        f"--screenshot={png}",
        page.as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=180)


def test_chromium_renders_the_funnel_and_every_histogram(fineweb_output, tmp_path):
    stats = json.loads((fineweb_output / "stats.json").read_text())
    page = pathlib.Path(write_report(str(fineweb_output)))
    png = tmp_path / "report.png"
    _screenshot(page, png, 1280, 3200)
    image = imread(png)
    assert image.shape[:2] == (3200, 1280)

    # One blue bar per step of the funnel, all starting at the axis, each as long as what the step passed on.
    kept = _colour_mask(image, KEPT_COLOUR)
    left = min(np.flatnonzero(kept.any(axis=0)))
    funnel_bars = [(top, bottom) for top, bottom in _runs(kept[:, left]) if bottom - top > 5]
    passed = [stats["steps"][step]["counters"]["out"] for step in stats["funnel"]]
    assert len(funnel_bars) == len(passed)
    lengths = [kept[(top + bottom) // 2, left:].sum() for top, bottom in funnel_bars]
    assert all(length > 50 for length in lengths)
    np.testing.assert_allclose(np.array(lengths) / lengths[0], np.array(passed) / passed[0], atol=0.02)

    # Each histogram: a plot area of its own colour, found by rows then columns, holding orange bars.
    face = _colour_mask(image, HISTOGRAM_FACE)
    bars = _colour_mask(image, HISTOGRAM_COLOUR)
    # A bar as tall as the plot hides the face behind it: the plot area is the face and its bars.
    area = face | bars
    plots = [
        (top, bottom, start, end)
        # Anti-aliased edges elsewhere can have a pixel of that colour here and there: a plot is large.
        for top, bottom in _runs(face.sum(axis=1) > 100)
        for start, end in _runs(area[top:bottom].sum(axis=0) > 20, gap=20)
    ]
    assert len(plots) == len(DOCUMENT_STATS)
    for top, bottom, start, end in plots:
        assert bottom - top > 100 and end - start > 200
        assert bars[top:bottom, start:end].sum() > 100
    # The histograms come below the funnel.
    assert min(top for top, _, _, _ in plots) > funnel_bars[-1][1]


def _write_jsonl(path: pathlib.Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if path.name.endswith(".gz") else open)(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)


def _excluded_row(number: int, reason: str, text: str = "") -> dict:
    return {
        "id": f"doc-{number}",
        "text": text or f"text of document {number}",
        "metadata": {"filter_reason": reason, "url": f"https://example.com/{number}"},
    }


def _stats(steps: dict[str, dict[str, int]], **run) -> dict:
    return {
        "pipeline": "fineweb",
        "state": "DONE",
        "wall_seconds": 1.5,
        **run,
        "steps": {step: {"counters": counters, "distributions": {}} for step, counters in steps.items()},
    }


def test_text_from_the_data_and_the_configuration_is_escaped(tmp_path):
    hostile = "<script>alert(1)</script>"
    # A step's name is a folder name of the output: no "/" in it.
    step = "filter<img src=x onerror=alert(1)>"
    stats = _stats(
        {"Read": {"in": 3, "out": 2, f"errors.{hostile}": 1}, step: {"in": 2, "out": 1, f"dropped.{hostile}": 1}},
        options={"input": [f"/data/{hostile}.jsonl"], hostile: "x"},
    )
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    _write_jsonl(
        tmp_path / "excluded" / step / "part-00000.jsonl.gz",
        [{"id": hostile, "text": f"before {hostile} after", "metadata": {"filter_reason": hostile, "url": '"><b>'}}],
    )
    _write_jsonl(
        tmp_path / "dead_letters" / "part-00000.jsonl",
        [{"step": "Read", "reason": hostile, "message": hostile, "file": "a.warc.gz", "offset": 7, "excerpt": hostile}],
    )
    page = pathlib.Path(write_report(str(tmp_path))).read_text()
    assert "<script" not in page and "<b>" not in page and "<img" not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<pre>before {escaped} after</pre>" in page
    assert "<h3>filter&lt;img src=x onerror=alert(1)&gt;</h3>" in page
    assert f"<summary>{escaped} <span class=count>(1 dropped)</span></summary>" in page
    assert f"<code>{escaped}</code> <span class=url>&quot;&gt;&lt;b&gt;</span>" in page
    assert f"<summary>{escaped} <span class=count>(1 in all)</span></summary>" in page
    assert f"<code>a.warc.gz:7</code><div class=detail>Read: {escaped}</div>" in page
    assert f"<th>{escaped}</th><td><code>&quot;x&quot;</code></td>" in page


def test_a_run_with_only_its_stats_has_a_funnel_and_says_how_to_get_summary_statistics(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps(_stats({"Read": {"in": 10, "out": 8, "skipped.request": 2}})))
    page = pathlib.Path(write_report(str(tmp_path))).read_text()
    assert page.count("<svg") == 1
    assert "--summary_stats doc,word,line" in page and "beamtrove run stats --input OUTPUT" in page
    assert "No step wrote excluded documents" in page and "No dead letters" in page
    assert "8 documents read, 8 kept (100.0%)" in page
    assert sorted(path.name for path in tmp_path.iterdir()) == ["report.html", "stats.json"]


@pytest.mark.parametrize(
    "steps",
    [
        # --limit 0: the steps are listed and counted nothing.
        {READ: {}, "extract": {}, WRITE_DOCUMENTS: {}},
        # Inputs without a single document.
        {READ: {"in": 0, "out": 0}, "extract": {"in": 0, "out": 0}, WRITE_DOCUMENTS: {"in": 0, "out": 0}},
        {},
    ],
)
def test_a_run_of_no_documents_has_a_report(steps):
    page = render_report(_stats(steps, funnel=list(steps)), {}, {}, {})
    assert "0 documents read, 0 kept (-)" in page
    for step in steps:
        assert f"<th>{step}</th><td>0</td><td>0</td>" in page
    assert ("<svg" in page) == bool(steps.get(READ))
    assert ("No step counted any record." in page) == (not steps.get(READ))


def test_samples_are_the_first_per_reason_in_file_order_and_reading_is_bounded(tmp_path):
    folder = tmp_path / "excluded" / "gopher_quality"
    _write_jsonl(folder / "part-00001.jsonl.gz", [_excluded_row(n, "short") for n in range(10, 20)])
    _write_jsonl(folder / "part-00000.jsonl.gz", [_excluded_row(n, "short" if n % 2 else "alpha") for n in range(10)])
    _write_jsonl(folder / ".part-00002.jsonl.gz.tmp", [_excluded_row(99, "hidden")])
    # Not gzip, then a reason of its own: where the samples hold it, reading went past the damage.
    (folder / "part-00003.jsonl.gz").write_bytes(b"not gzip")
    _write_jsonl(folder / "part-00004.jsonl.gz", [_excluded_row(40, "beyond")])
    _write_jsonl(tmp_path / "excluded" / "c4_quality" / "part-00000.jsonl.gz", [_excluded_row(50, "late")])
    steps = {"gopher_quality": {"counters": {"in": 50, "out": 29, "dropped.short": 15, "dropped.alpha": 5}}}

    samples = sample_excluded(str(tmp_path), steps, per_reason=2)
    assert samples == sample_excluded(str(tmp_path), steps, per_reason=2)
    assert {step: {reason: [s.id for s in chosen] for reason, chosen in r.items()} for step, r in samples.items()} == {
        "c4_quality": {"late": ["doc-50"]},
        "gopher_quality": {"alpha": ["doc-0", "doc-2"], "short": ["doc-1", "doc-3"]},
    }
    assert samples["gopher_quality"]["alpha"][0] == Sample("doc-0", "https://example.com/0", "text of document 0")
    # Once every reason its counters name has its samples, a step's files are read no further.
    assert [
        len(chosen) for chosen in sample_excluded(str(tmp_path), steps, per_reason=5)["gopher_quality"].values()
    ] == [5, 5]
    # Without counters naming its reasons, a step is read up to the bound; a file it cannot read is passed over.
    unbounded = sample_excluded(str(tmp_path), {}, per_reason=20, records_per_step=20)
    assert {reason: len(chosen) for reason, chosen in unbounded["gopher_quality"].items()} == {"alpha": 5, "short": 15}
    beyond = sample_excluded(str(tmp_path), {}, records_per_step=21)["gopher_quality"]["beyond"]
    assert beyond == [Sample("doc-40", "https://example.com/40", "text of document 40")]


def test_long_texts_are_cut_and_dead_letters_are_bounded(tmp_path):
    _write_jsonl(tmp_path / "excluded" / "c4" / "part-00000.jsonl.gz", [_excluded_row(0, "long", "word " * 1000)])
    letters = [{"step": "Read", "reason": f"reason{n % 3}", "record_id": f"r{n}", "excerpt": "x"} for n in range(40)]
    _write_jsonl(tmp_path / "dead_letters" / "part-00000.jsonl", letters)
    (snippet,) = sample_excluded(str(tmp_path), {})["c4"]["long"]
    assert snippet.snippet == "word " * 120 + " …"
    dead = sample_dead_letters(str(tmp_path), shown=5)
    assert {reason: [s.id for s in chosen] for reason, chosen in dead.items()} == {
        "reason0": ["r0", "r3"],
        "reason1": ["r1", "r4"],
        "reason2": ["r2"],
    }


def test_summary_statistics_are_read_in_both_of_datatroves_forms(tmp_path):
    write_summary_stats(tmp_path, ["one two\nthree", "four five six seven", "eight"])
    (tmp_path / "summary_stats" / "fqdn" / "length").mkdir(parents=True)
    (tmp_path / "summary_stats" / "fqdn" / "length" / "metric.json").write_text('{"example.com": 3}')
    # The character-weighted twin of a statistic counts characters per bucket, not documents: not drawn.
    for group in ("summary", "histogram"):
        (tmp_path / "summary_stats" / group / "length__chars").mkdir(parents=True)
        (tmp_path / "summary_stats" / group / "length__chars" / "metric.json").write_text('{"5.0": 5}')
    figures = read_summary_stats(str(tmp_path))
    assert list(figures) == sorted(DOCUMENT_STATS)
    assert figures["length"].histogram == [(5.0, 1.0), (13.0, 1.0), (19.0, 1.0)]
    assert figures["n_words"].histogram == [(1.0, 1.0), (3.0, 1.0), (4.0, 1.0)]
    assert figures["n_lines"].summary["std_dev"] == pytest.approx(np.std([2, 1, 1], ddof=1))
    assert figures["length"].summary["mean"] == pytest.approx(37 / 3)
    assert read_summary_stats(str(tmp_path / "nothing")) == {}


def test_a_statistic_without_histogram_is_a_line_of_figures():
    page = render_report(
        _stats({"Read": {"in": 1, "out": 1}}), {"tokens": StatFigures("tokens", {"n": 1.0, "mean": 5.0})}
    )
    assert page.count("<svg") == 1 and "<tr><th>tokens</th><td>n 1, mean 5</td></tr>" in page


def test_write_report_needs_a_runs_output(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_report(str(tmp_path))
    assert not list(tmp_path.iterdir())


def _damage(stats_json: pathlib.Path, damage: str) -> str:
    """Damages a real run's stats.json as a user or a full disk would; returns what the refusal says is wrong."""
    data = stats_json.read_bytes()
    output = stats_json.parent
    if damage == "truncated":
        stats_json.write_bytes(data[: len(data) // 2])
        return f"cut short: its {len(data) // 2:,} bytes end inside the JSON"
    if damage == "emptied":
        stats_json.write_bytes(b"")
        return "empty"
    if damage == "binary garbage":
        # A kept documents part: gzip's second byte is not UTF-8.
        stats_json.write_bytes(next((output / "documents").iterdir()).read_bytes())
        return "not JSON: byte 1 is not UTF-8 text"
    if damage == "text garbage":
        stats_json.write_bytes((output / "report.html").read_bytes())
        return "not JSON: Expecting value at line 1 column 1"
    if damage == "a summary statistic":
        stats_json.write_bytes((output / "summary_stats" / "summary" / "length" / "metric.json").read_bytes())
        return 'no "steps" in it'
    if damage == "its steps as a list":
        stats_json.write_text(json.dumps(list(json.loads(data)["steps"].values())))
        return "a JSON list, not an object"
    assert damage == "counters as text"
    stats = json.loads(data)
    reader = stats["funnel"][0]
    stats["steps"][reader]["counters"]["out"] = "many"
    stats_json.write_text(json.dumps(stats))
    return f'"steps" -> "{reader}" -> "counters" is not an object of numbers'


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "emptied",
        "binary garbage",
        "text garbage",
        "a summary statistic",
        "its steps as a list",
        "counters as text",
    ],
)
def test_a_damaged_stats_json_is_named_in_one_line_by_stats_report_and_inspect(fineweb_output, tmp_path, damage):
    output = tmp_path / "run"
    shutil.copytree(fineweb_output, output)
    problem = _damage(output / "stats.json", damage)
    files = {path: path.read_bytes() for path in output.rglob("*") if path.is_file()}
    refusal = (
        f"beamtrove: error: {output}/stats.json is damaged ({problem}): restore it, or rerun the pipeline to "
        "write it again\n"
    )

    def command(*args: str) -> tuple[int, str, str]:
        # In this process, and for one damage in a process of its own as well: the same status and lines.
        here = beamtrove_here(*args)
        if damage == "truncated":
            alone = beamtrove(*args)
            assert (alone.returncode, alone.stdout, alone.stderr) == (here.returncode, here.stdout, here.stderr)
        return here.returncode, here.stdout, here.stderr

    for name in ("stats", "report"):
        assert command(name, str(output)) == (2, "", refusal), name
    # Nothing written: no report, no temporary file.
    assert {path: path.read_bytes() for path in output.rglob("*") if path.is_file()} == files
    # inspect shows the records all the same, and says why it cannot count them.
    status, out, err = command("inspect", str(output), "--excluded", "--limit", "1", "--json")
    assert status == 0, err
    assert err == refusal.replace("error", "warning", 1).replace(
        "again\n", "again; the counts per step and reason are not shown\n"
    )
    assert json.loads(out)["metadata"]["filter_reason"]
