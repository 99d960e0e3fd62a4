"""The fineweb and extract pipelines end to end, on make_warc.py sets of real pages."""

from __future__ import annotations

import collections
import gzip
import html
import io
import itertools
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from beamtrove.cli import main
from beamtrove.execution.runner_parts import part_present
from tests.conftest import DATA, beamtrove, jsonl_lines, jsonl_rows, make_warc_set, require, wait_for

LID_MODEL = DATA / "models" / "lid176" / "lid.176.ftz"
BLOCKLIST = DATA / "blocklists" / "ut1"
FILTERS = ("url_filter", "language_filter", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
STEPS = ("url_filter", "extract", *FILTERS[1:])
SCREENED_STEPS = ("url_filter", "language_screen", "extract", *FILTERS[1:])


def _assets() -> list[str]:
    return ["--lid_model", str(require(LID_MODEL)), "--url_blocklist", str(require(BLOCKLIST))]


@pytest.fixture(scope="module")
def fineweb_run(faults_set, tmp_path_factory):
    """The FineWeb stack over 160 real pages and 4 faults, with the language screen off."""
    warcs, manifest = faults_set
    out = tmp_path_factory.mktemp("fineweb")
    argv = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(out), *_assets()]
    workers = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    assert main([*argv, "--no_language_screen", *workers]) == 0
    return out, manifest, json.loads((out / "stats.json").read_text())["steps"]


@pytest.fixture(scope="module")
def screened_run(faults_set, tmp_path_factory):
    """The same run as ``fineweb_run`` as fineweb runs by default: the language screen at its default threshold."""
    warcs, manifest = faults_set
    out = tmp_path_factory.mktemp("fineweb-screened")
    argv = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(out), *_assets()]
    assert main([*argv, "--direct_running_mode=multi_processing", "--direct_num_workers=2"]) == 0
    return out, manifest, json.loads((out / "stats.json").read_text())["steps"]


@pytest.mark.parametrize(("run", "step_names"), [("fineweb_run", STEPS), ("screened_run", SCREENED_STEPS)])
def test_every_record_is_accounted_for(request, run, step_names):
    out, manifest, steps = request.getfixturevalue(run)
    assert [step for step in steps if step in SCREENED_STEPS] == list(step_names)
    read = steps["read"]["counters"]
    # 160 pages and 4 injected faults, the last one a record cut short by the truncated file.
    assert read["in"] == len(manifest) == 164
    not_passed_on = sum(v for k, v in read.items() if k.startswith(("skipped.", "errors.")))
    assert read["in"] == read["out"] + not_passed_on
    passed_on = read["out"]
    for step in step_names:
        counters = steps[step]["counters"]
        assert counters["in"] == passed_on, step
        lost = sum(v for k, v in counters.items() if k.startswith(("dropped.", "errors.")))
        assert counters["in"] == counters["out"] + lost, step
        passed_on = counters["out"]
    kept = jsonl_rows(out / "documents")
    assert len(kept) == passed_on == steps["write_documents"]["counters"]["out"]
    for step in (step for step in step_names if step != "extract"):
        excluded = jsonl_rows(out / "excluded" / step) if (out / "excluded" / step).exists() else []
        dropped = {k[len("dropped.") :]: v for k, v in steps[step]["counters"].items() if k.startswith("dropped.")}
        assert len(excluded) == sum(dropped.values()), step
        assert {
            reason: sum(r["metadata"]["filter_reason"] == reason for r in excluded) for reason in dropped
        } == dropped
    dead_letters = jsonl_rows(out / "dead_letters") if (out / "dead_letters").exists() else []
    errors = sum(v for s in steps.values() for k, v in s["counters"].items() if k.startswith("errors."))
    assert len(dead_letters) == errors


def test_kept_documents_are_english_and_pass_the_rules(fineweb_run):
    out, _, steps = fineweb_run
    kept = jsonl_rows(out / "documents")
    assert kept, "the FineWeb stack kept nothing from 160 real pages"
    assert all(row["metadata"]["language"] == "en" and row["metadata"]["language_score"] > 0.65 for row in kept)
    # The language filter saw real multilingual pages and dropped the other languages.
    languages = {row["metadata"]["language"] for row in jsonl_rows(out / "excluded" / "language_filter")}
    assert len(languages) > 5
    assert steps["gopher_quality"]["counters"]["in"] == steps["gopher_repetition"]["counters"]["out"]


def test_the_language_screen_spares_extraction_the_pages_the_language_filter_drops(fineweb_run, screened_run):
    ordinary, _, ordinary_steps = fineweb_run
    screened, _, steps = screened_run
    # With --no_language_screen there is none.
    assert "language_screen" not in ordinary_steps and not (ordinary / "excluded" / "language_screen").exists()
    assert steps["language_screen"]["counters"] == {"in": 160, "out": 60, "dropped.language_screen": 100}
    assert steps["extract"]["counters"]["in"] == 60
    # The same documents are kept, texts and metadata alike, but for pages that ran out of extraction time in one
    # of the runs (that depends on the machine's load).
    timed_out = _timed_out(screened, ordinary)
    assert len(timed_out) <= 3, timed_out
    kept = _lines(screened / "documents", timed_out)
    assert kept == _lines(ordinary / "documents", timed_out) and len(kept) >= 25
    # What the screen dropped, the ordinary run dropped too, at the language filter.
    screened_out = {row["id"]: row for row in jsonl_rows(screened / "excluded" / "language_screen")}
    assert all(row["metadata"]["language_screen_score"] < 0.1 for row in screened_out.values())
    fates = {
        row["id"]: step
        for step in FILTERS
        if (ordinary / "excluded" / step).exists()
        for row in jsonl_rows(ordinary / "excluded" / step)
    }
    assert collections.Counter(fates.get(page, "not dropped") for page in screened_out) == {"language_filter": 100}
    # Every other page met the same fate in both runs.
    for step in FILTERS:
        leaving_out = timed_out | screened_out.keys()
        assert _lines(screened / "excluded" / step, leaving_out) == _lines(ordinary / "excluded" / step, leaving_out)
    assert _lines(screened / "dead_letters", timed_out) == _lines(ordinary / "dead_letters", timed_out)


# Languages of the navigation and sidebars put before English articles, from the UDHR's translations.
_OTHER_LANGUAGES = ("deu", "fra", "spa", "rus", "cmn_hans", "jpn", "arb", "por_BR", "ita", "pol", "tur", "kor")
_BODY = re.compile(r"<body[^>]*>", re.IGNORECASE)


def _after_body(page: str, block: str) -> str:
    """``page`` with ``block`` right after its ``<body>`` tag (first, if it has none)."""
    body = _BODY.search(page)
    return page[: body.end()] + block + page[body.end() :] if body else block + page


def _price_table(rows: int, rng: random.Random) -> str:
    items = ("Widget", "Adapter", "Cable", "Filter", "Valve", "Bolt", "Pump", "Sensor")
    cells = [
        f"<tr><td>{rng.randint(10000, 99999)}</td><td>{rng.choice(items)} {rng.randint(1, 99)}</td>"
        f"<td>${rng.randint(1, 999)}.{rng.randint(0, 99):02d}</td>"
        f"<td>{rng.choice('+-')}{rng.random() * 5:.2f}%</td></tr>"
        for _ in range(rows)
    ]
    return "<table><tr><th>SKU</th><th>Item</th><th>Price</th><th>Change</th></tr>" + "".join(cells) + "</table>"


def _data_table(chars: int, rng: random.Random) -> str:
    rows, written = [], 0
    while written < chars:
        numbers = [f"{rng.uniform(0, 10000):.2f}" for _ in range(6)]
        rows.append("<tr>" + "".join(f"<td>{number}</td>" for number in numbers) + "</tr>")
        written += sum(map(len, numbers)) + 6
    return "<table>" + "".join(rows) + "</table>"


def _navigation(text: str, chars: int) -> str:
    """A menu of links labelled with ``text``'s words (its characters, for a script without spaces)."""
    words = text.split() if len(text.split()) > 200 else list(text.replace(" ", ""))
    labels, written = [], 0
    for start in itertools.count(0, 2):
        label = " ".join(words[start % (len(words) - 2) :][:2])
        labels.append(f"<li><a href='/section/{start}'>{html.escape(label)}</a></li>")
        written += len(label) + 1
        if written >= chars:
            return "<nav><ul>" + "".join(labels) + "</ul></nav>"


def _sidebar(text: str, chars: int) -> str:
    """An aside of ``text``'s paragraphs."""
    paragraphs = [line.strip() for line in text.splitlines() if len(line.strip()) > 40]
    kept = list(itertools.accumulate(map(len, paragraphs)))
    count = next(at for at, written in enumerate(kept, 1) if written >= chars)
    return "<aside>" + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs[:count]) + "</aside>"


def _adversarial_page(index: int, page: str, rng: random.Random, udhr: dict[str, str]) -> str:
    """A real article page behind at least 3,000 characters of what a cheap read of the whole page meets first:
    navigation or a sidebar in another language, a data table, or all three."""
    other = udhr[_OTHER_LANGUAGES[index % len(_OTHER_LANGUAGES)]]
    kinds = (
        lambda: _navigation(other, 3000),
        lambda: _sidebar(other, 3000),
        lambda: _data_table(3000, rng),
        lambda: _navigation(other, 3000) + _data_table(1500, rng) + _sidebar(other, 3000),
    )
    return _after_body(page, kinds[index % len(kinds)]())


def _write_warc(path, pages: list[tuple[str, str]]) -> None:
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url, page in pages:
            body = page.encode("utf-8")
            headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))]
            http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))


def _article_pages(data_dir) -> list[tuple[str, str]]:
    """The 181 pages of the article-extraction-benchmark, by URL, in their files' order."""
    truth = json.loads(require(data_dir / "article-extraction-benchmark" / "ground-truth.json").read_text())
    paths = sorted((data_dir / "article-extraction-benchmark" / "html").glob("*.html.gz"))
    return [
        (truth[path.name.split(".")[0]]["url"], gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
        for path in paths
    ]


def _screened_and_not(warc, out) -> tuple[dict, list[bytes], list[bytes]]:
    """The default fineweb run and the one with --no_language_screen over ``warc``: the default run's steps, and the
    documents each kept. Without an extraction time limit, what is kept does not depend on the machine's load."""
    argv = ["run", "fineweb", "--input", str(warc), "--extract_timeout", "0", *_assets()]
    assert main([*argv, "--output", str(out / "screened")]) == 0
    assert main([*argv, "--output", str(out / "unscreened"), "--no_language_screen"]) == 0
    steps = json.loads((out / "screened" / "stats.json").read_text())["steps"]
    return steps, _lines(out / "screened" / "documents"), _lines(out / "unscreened" / "documents")


@pytest.fixture(scope="module")
def adversarial_runs(data_dir, udhr_texts, tmp_path_factory):
    """20 real article pages with a 400-row price table right after <body>, and 20 more behind other languages'
    navigation or sidebars or a data table: the default run and the screen-off run over them (0.15.0's screen
    kept 16 of their 25 documents; every article in every layout is the slow test's)."""
    rng = random.Random(48)
    articles = _article_pages(data_dir)
    pages = [(f"{url}#prices", _after_body(page, _price_table(400, rng))) for url, page in articles[:20]]
    pages += [
        (f"{url}#prefixed", _adversarial_page(index, page, rng, udhr_texts))
        for index, (url, page) in enumerate(articles[20:40])
    ]
    out = tmp_path_factory.mktemp("adversarial")
    _write_warc(out / "pages.warc.gz", pages)
    return _screened_and_not(out / "pages.warc.gz", out)


def test_the_screen_keeps_english_articles_behind_tables_and_other_languages(adversarial_runs):
    steps, screened, unscreened = adversarial_runs
    # The default run kept what the run without the screen kept, byte for byte: ids, texts, metadata.
    assert screened == unscreened
    assert len(unscreened) >= 20
    # The screen still spared extraction the pages in other languages.
    assert steps["language_screen"]["counters"]["dropped.language_screen"] > 0


@pytest.mark.slow
def test_the_screen_keeps_every_article_behind_each_layout_in_turn(data_dir, udhr_texts, tmp_path):
    # Every article once, behind the price table or one of the four adversarial layouts in turn: each layout
    # hides a fifth of the articles (every article behind every layout made five runs' worth of pages).
    rng = random.Random(4848)
    pages = []
    for index, (url, page) in enumerate(_article_pages(data_dir)):
        kind = index % 5
        if kind == 4:
            pages.append((f"{url}#prices", _after_body(page, _price_table(400, rng))))
        else:
            pages.append((f"{url}#layout{kind}", _adversarial_page(index * 4 + kind, page, rng, udhr_texts)))
    _write_warc(tmp_path / "pages.warc.gz", pages)
    steps, screened, unscreened = _screened_and_not(tmp_path / "pages.warc.gz", tmp_path)
    assert screened == unscreened
    assert len(unscreened) >= 120
    assert steps["language_screen"]["counters"]["dropped.language_screen"] > 0


def test_dump_layout_and_metadata(data_dir, tmp_path):
    warc = data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"
    argv = ["run", "fineweb", "--input", str(warc), "--output", str(tmp_path), "--dump", "CC-MAIN-2020-34"]
    assert main([*argv, "--languages", "all", "--language_threshold", "0", *_assets()]) == 0
    root = tmp_path / "CC-MAIN-2020-34"
    assert (root / "stats.json").exists()
    # Everything of the run, stats.json included, is in the dump's folder.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["CC-MAIN-2020-34"]
    documents = jsonl_rows(root / "documents") + [
        row for step in FILTERS if (root / "excluded" / step).exists() for row in jsonl_rows(root / "excluded" / step)
    ]
    assert documents
    assert {row["metadata"]["dump"] for row in documents} == {"CC-MAIN-2020-34"}


def test_a_missing_model_fails_before_the_run_saying_how_to_get_it(faults_set, tmp_path, capsys):
    warcs, _ = faults_set
    argv = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(tmp_path / "out")]
    status = main([*argv, "--lid_model", str(tmp_path / "lid.176.ftz"), "--url_blocklist", str(require(BLOCKLIST))])
    assert status != 0
    message = capsys.readouterr().err
    assert str(tmp_path / "lid.176.ftz") in message
    assert "beamtrove assets fetch" in message
    assert not (tmp_path / "out").exists()


def _lines(directory, leaving_out: frozenset[str] = frozenset()) -> list[bytes]:
    """The sorted JSONL lines of ``directory``, without those of the records whose id is in ``leaving_out``."""
    lines = sorted(jsonl_lines(sorted(directory.glob("*.jsonl*")))) if directory.exists() else []
    return [line for line in lines if not leaving_out or _record_id(line) not in leaving_out]


def _record_id(line: bytes) -> str:
    row = json.loads(line)
    return row.get("id", row.get("record_id"))


def _timed_out(*outputs) -> frozenset[str]:
    """Ids of the pages whose extraction ran out of time in any of the runs: that depends on the machine's load."""
    return frozenset(
        row["record_id"]
        for out in outputs
        for row in map(json.loads, _lines(out / "dead_letters"))
        if row["reason"] in ("timeout", "process_died")
    )


@pytest.mark.slow
def test_resumable_run_equals_the_ordinary_run_and_a_rerun_reads_nothing(fineweb_run, faults_set, tmp_path):
    warcs, _ = faults_set
    ordinary, _, _ = fineweb_run
    out = tmp_path / "resumable"
    argv = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(out), "--resumable", *_assets()]
    # As the ordinary run, without the screen.
    argv.append("--no_language_screen")
    assert main(argv) == 0
    markers = {path.stem: json.loads(path.read_text()) for path in (out / "_completed").glob("*.json")}
    assert sorted(markers) == sorted(path.name.removesuffix(".warc.gz") for path in warcs.glob("*.warc.gz"))
    assert sorted(path.name for path in (out / "documents").iterdir()) == sorted(
        f"{stem}.jsonl.gz" for stem, marker in markers.items() if marker["counts"]["documents"]
    )
    # Same documents, exclusions and dead letters as the ordinary run, the truncated file's included, but for
    # pages that ran out of extraction time in one of the runs.
    timed_out = _timed_out(out, ordinary)
    assert len(timed_out) <= 3, timed_out
    assert _lines(out / "documents", timed_out) == _lines(ordinary / "documents", timed_out)
    for step in FILTERS:
        assert _lines(out / "excluded" / step, timed_out) == _lines(ordinary / "excluded" / step, timed_out), step
    assert _lines(out / "dead_letters", timed_out) == _lines(ordinary / "dead_letters", timed_out)
    assert _lines(out / "dead_letters"), "the faults set has records that cannot be read"
    stats = json.loads((out / "stats.json").read_text())
    steps = stats["steps"]
    assert sum(m["counts"]["documents"] for m in markers.values()) == steps["write_documents"]["counters"]["out"]
    read = steps["read"]["counters"]
    assert sum(m["counts"]["read"] for m in markers.values()) == read["out"] + read.get("errors.truncated", 0) + sum(
        v for k, v in read.items() if k.startswith("errors.") and k != "errors.truncated"
    )
    assert stats["run_steps"]["process_inputs"]["counters"]["completed"] == stats["inputs_completed"] == 3

    # stats.json and report.html describe each run; every other file stays as the first run wrote it.
    stamps = {
        path: path.stat().st_mtime_ns
        for path in out.rglob("*")
        if path.is_file() and path.name not in ("stats.json", "report.html")
    }
    assert main(argv) == 0
    rerun = json.loads((out / "stats.json").read_text())
    assert rerun["run_steps"]["read"]["counters"] == {"in": 0, "out": 0} and "process_inputs" not in rerun["run_steps"]
    # The stats still total the whole output.
    assert rerun["steps"] == steps and rerun["inputs_completed"] == 3
    assert {path: path.stat().st_mtime_ns for path in stamps} == stamps


def test_resumable_output_refuses_another_configuration_unless_restarted(data_dir, tmp_path, capsys):
    warc = data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"
    argv = ["run", "fineweb", "--input", str(warc), "--output", str(tmp_path), "--resumable", *_assets()]
    # Without the screen, which would leave the language filter nothing to exclude.
    argv.append("--no_language_screen")
    assert main(argv) == 0
    marker = tmp_path / "_completed" / "cc-main-2020-34_resiliparse_warcfile.json"
    excluded_before = json.loads(marker.read_text())["counts"]["excluded"]
    assert excluded_before["language_filter"] > 0
    any_language = ["--languages", "all", "--language_threshold", "0"]
    assert main([*argv, *any_language]) == 2
    message = capsys.readouterr().err
    assert "another configuration (differing: language_threshold, languages)" in message and "--restart" in message
    assert json.loads(marker.read_text())["counts"]["excluded"] == excluded_before
    assert main([*argv, *any_language, "--restart"]) == 0
    # Every language passes now.
    assert "language_filter" not in json.loads(marker.read_text())["counts"]["excluded"]
    assert not (tmp_path / "excluded" / "language_filter").exists()
    assert json.loads((tmp_path / "_resume.json").read_text())["options"]["languages"] == "all"


@pytest.mark.slow
def test_a_run_killed_midway_resumes_without_redoing_completed_inputs(tmp_path):
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    make_warc_set(warcs, "--records", "240", "--files", "8", "--seed", "11")
    # Without an extraction time limit, what is kept does not depend on the machine's load.
    inputs = ["--input", str(warcs / "*.warc.gz"), "--extract_timeout", "0", *_assets()]
    out = tmp_path / "resumable"
    argv = [sys.executable, "-m", "beamtrove", "run", "fineweb", *inputs, "--output", str(out), "--resumable"]
    with open(tmp_path / "killed.log", "wb") as log:
        run = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: len(list((out / "_completed").glob("*.json"))) >= 2, timeout=300, what="two completed inputs")
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    completed = {path.stem for path in (out / "_completed").glob("*.json")}
    assert 2 <= len(completed) < 8, "the run was not killed midway"
    finished = {
        path: (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in out.rglob("*")
        if path.is_file() and path.name.split(".")[0] in completed
    }

    assert beamtrove("run", "fineweb", *inputs, "--output", str(out), "--resumable").returncode == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["run_steps"]["read"]["counters"]["files"] == 8 - len(completed)
    assert stats["run_steps"]["process_inputs"]["counters"]["completed"] == 8 - len(completed)
    # The stats total the whole output, the inputs the killed run completed included.
    assert (stats["steps"]["read"]["counters"]["files"], stats["inputs_completed"]) == (8, 8)
    assert {path: (path.stat().st_ino, path.stat().st_mtime_ns) for path in finished} == finished
    assert len(list((out / "_completed").glob("*.json"))) == 8
    assert not (out / ".beamtrove-staging").exists(), "temporary files were left behind"

    resumed = _lines(out / "documents")
    ids = [json.loads(line)["id"] for line in resumed]
    assert len(ids) == len(set(ids)), "a document was written twice"
    uninterrupted = tmp_path / "uninterrupted"
    assert beamtrove("run", "fineweb", *inputs, "--output", str(uninterrupted)).returncode == 0
    assert resumed == _lines(uninterrupted / "documents")
    assert resumed, "the FineWeb stack kept nothing from 240 real pages"


@pytest.fixture(scope="module")
def runner_set(tmp_path_factory) -> tuple[list[str], list[bytes]]:
    """The fineweb arguments over a make_warc.py set, and the documents the DirectRunner keeps from it."""
    warcs = tmp_path_factory.mktemp("runner-warcs")
    make_warc_set(warcs, "--records", "120", "--files", "4", "--seed", "13")
    # Without an extraction time limit, what is kept does not depend on the machine's load.
    args = ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--extract_timeout", "0", *_assets()]
    out = tmp_path_factory.mktemp("direct")
    result = beamtrove(*args, "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    documents = _lines(out / "documents")
    assert documents, "the FineWeb stack kept nothing from 120 real pages"
    return args, documents


def _on_runner(runner: str) -> list[str]:
    if runner == "prism":
        if not part_present("prism"):
            pytest.skip("no Prism in the runners directory: `beamtrove runners setup --runner prism` builds it")
        return ["--runner", "PrismRunner", "--environment_type", "LOOPBACK"]
    if runner == "flink-local":
        if not part_present("flink-job-server"):
            pytest.skip(
                "no Beam Flink job-server jar in the runners directory: the package registry serves none for this "
                "Beam (see `beamtrove runners path`)"
            )
        return ["--runner", "FlinkRunner", "--flink_master", "[local]", "--environment_type", "LOOPBACK"]
    return ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2", "--resumable"]


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["direct-2-workers-resumable", "prism", "flink-local"])
def test_every_runner_keeps_the_same_documents(runner_set, runner, tmp_path):
    args, documents = runner_set
    runner_args = _on_runner(runner)
    result = beamtrove(*args, "--output", str(tmp_path), *runner_args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _lines(tmp_path / "documents") == documents
    steps = json.loads((tmp_path / "stats.json").read_text())["steps"]
    assert steps["write_documents"]["counters"]["out"] == len(documents)
    # Each runner's workers report their progress to the command, which ends on all inputs read, quietly.
    progress = [line for line in result.stderr.splitlines() if line.startswith("fineweb: ")]
    assert progress[-1].startswith("fineweb: 4/4 inputs"), result.stderr[-3000:]
    assert [noise for noise in ("fork_posix", "Really starting service", "PrismRunner") if noise in result.stderr] == []


@pytest.mark.slow
@pytest.mark.slurm
def test_a_run_through_slurm_keeps_the_same_documents(slurm, runner_set, tmp_path):
    args, documents = runner_set
    command = shlex.join([sys.executable, "-m", "beamtrove", *args, "--output", str(tmp_path / "out")])
    submitted = subprocess.run(
        ["sbatch", "--wait", "--output", str(tmp_path / "job.log"), "--wrap", command],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert _lines(tmp_path / "out" / "documents") == documents
