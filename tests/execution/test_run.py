"""Running a pipeline: built, run, waited for, and its stats written where its results are."""

from __future__ import annotations

import json

import pytest

from beamtrove import __version__
from beamtrove.execution.run import run_pipeline
from beamtrove.layout import STAGING_DIR
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import pipeline_spec
from beamtrove.stats import format_stats
from tests.conftest import jsonl_rows, require


def test_a_run_writes_its_stats_beside_its_results(data_dir, tmp_path, prism_tries):
    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path), "--extractor", "resiliparse", "--progress_interval", "0"]
    result = run_pipeline(extract, parse(extract, argv))
    assert result.succeeded and result.state == "DONE"
    # Beam's DirectRunner would have tried Prism first (tests/execution/test_direct_runner.py).
    assert prism_tries == []
    assert result.stats_path == str(tmp_path / "stats.json")
    assert result.report_path == str(tmp_path / "report.html")
    assert "<svg" in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "stats.json").read_text()) == result.stats
    assert {key: result.stats[key] for key in ("beamtrove_version", "pipeline", "runner")} == {
        "beamtrove_version": __version__,
        "pipeline": "extract",
        "runner": "DirectRunner",
    }
    steps = result.stats["steps"]
    assert list(steps)[:2] == ["read", "extract"]
    assert steps["write_documents"]["counters"]["out"] == len(jsonl_rows(tmp_path / "documents")) > 0


def test_a_resumable_runs_stats_list_its_steps_as_an_ordinary_run_does(data_dir, tmp_path):
    extract = pipeline_spec("extract")
    warcs = [
        str(require(data_dir / "warc" / name))
        for name in ("dolma_wget_sample-0000.warc.gz", "clueweb09-ja_quirk.warc.gz")
    ]
    common = ["--extractor", "resiliparse", "--progress_interval", "0"]
    ordinary = run_pipeline(extract, parse(extract, ["--input", warcs[0], "--output", str(tmp_path / "a"), *common]))
    argv = ["--input", warcs[0], "--output", str(tmp_path / "b"), "--resumable", *common]
    run_pipeline(extract, parse(extract, argv))
    # The second run completes the second input only; the stats total both, in the flow's order.
    resumed = run_pipeline(extract, parse(extract, [*argv[:2], "--input", warcs[1], *argv[2:]]))
    funnel = ["read", "extract", "write_documents"]
    assert ordinary.stats["funnel"] == resumed.stats["funnel"] == funnel
    assert list(resumed.stats["steps"])[:3] == list(ordinary.stats["steps"])[:3] == funnel
    assert list(resumed.stats["steps"])[-1] == list(ordinary.stats["steps"])[-1] == "write_dead_letters"
    assert resumed.stats["inputs_completed"] == 2
    assert resumed.stats["steps"]["read"]["counters"]["files"] == 2
    assert resumed.stats["run_steps"]["read"]["counters"]["files"] == 1
    table = format_stats(resumed.stats)
    assert "Totals over the 2 inputs the output holds; this run completed 1." in table
    assert not any(line.startswith("ProcessInputs ") and line.split()[1:3] == ["0", "0"] for line in table.splitlines())


def test_a_report_that_cannot_be_drawn_does_not_fail_the_run(data_dir, tmp_path, monkeypatch, caplog):
    def fails(output, *args, **kwargs):
        raise ValueError("no fonts")

    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path), "--extractor", "resiliparse", "--progress_interval", "0"]
    # A resumable output keeps its files across runs: the first run's report describes the first run.
    assert run_pipeline(extract, parse(extract, [*argv, "--resumable"])).report_path == str(tmp_path / "report.html")
    monkeypatch.setattr("beamtrove.execution.run_result.write_report", fails)
    result = run_pipeline(extract, parse(extract, [*argv, "--resumable"]))
    assert result.succeeded and result.report_path == "" and (tmp_path / "stats.json").exists()
    assert not (tmp_path / "report.html").exists(), "a report of an earlier run stayed"
    assert f"report.html was not written (ValueError: no fonts); `beamtrove report {tmp_path}` retries" in caplog.text


def test_summary_statistics_of_what_a_run_keeps_are_published_with_it_and_drawn_in_its_report(data_dir, tmp_path):
    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path), "--extractor", "resiliparse", "--progress_interval", "0"]
    result = run_pipeline(extract, parse(extract, [*argv, "--summary_stats", "doc,line"]))
    kept = result.stats["steps"]["write_documents"]["counters"]["out"]
    assert result.stats["steps"]["summary_stats"]["counters"]["in"] == kept > 0
    summary = json.loads((tmp_path / "summary_stats" / "summary" / "length" / "metric.json").read_text())
    assert summary["summary"]["n"] == kept
    assert summary["summary"]["total"] == sum(len(row["text"]) for row in jsonl_rows(tmp_path / "documents"))
    assert sorted(path.name for path in (tmp_path / "summary_stats").iterdir()) == ["histogram", "summary"]
    assert not (tmp_path / STAGING_DIR).exists()
    page = (tmp_path / "report.html").read_text()
    assert page.count("<figure>") >= 3 and "This run computed no summary statistics" not in page


def test_summary_statistics_are_refused_with_resumable_saying_how_to_get_them(data_dir, tmp_path):
    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path / "out"), "--resumable", "--summary_stats", "doc"]
    with pytest.raises(ConfigurationError, match=r"not --resumable .*`beamtrove run stats --input OUTPUT"):
        run_pipeline(extract, parse(extract, argv))
    assert not (tmp_path / "out").exists()


# The error Prism 2.77 raised when a worker in the image lacked the model the launcher had (a worker pool in
# beamtrove's image; tests/execution/dataflow/test_worker_image.py), its two tracebacks cut short.
_PRISM_FAILURE = (
    "Pipeline job-001 failed in state FAILED: bundle inst002 stage-020 failed:Traceback (most recent call last):\n"
    '  File "/template/beamtrove/resources.py", line 66, in require_on_worker\n    raise MissingOnWorker(\n'
    "beamtrove.resources.MissingOnWorker: The language-ID model {model} (--lid_model) is not on the worker that "
    "needs it, though the machine that built the job has it: workers read it from their own file system.\n\n"
    "During handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.11/dist-packages/apache_beam/runners/worker/sdk_worker.py", line 310, in '
    "_execute\n    response = task()\n"
    "beamtrove.resources.MissingOnWorker: The language-ID model {model} (--lid_model) is not on the worker that "
    "needs it, though the machine that built the job has it: workers read it from their own file system. "
    "[while running 'language_filter/ParDo(_FilterFn)']\n"
)


def test_a_worker_missing_a_model_fails_the_run_with_its_message_alone(data_dir, tmp_path, monkeypatch):
    model = require(data_dir / "models" / "lid176" / "lid.176.ftz")

    def fails_on_the_worker(pipeline, *args, **kwargs):
        raise RuntimeError(_PRISM_FAILURE.format(model=model))

    monkeypatch.setattr("apache_beam.Pipeline.run", fails_on_the_worker)
    fineweb = pipeline_spec("fineweb")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    output = tmp_path / "out"
    argv = ["--input", warc, "--output", str(output), "--lid_model", str(model)]
    with pytest.raises(ConfigurationError) as raised:
        run_pipeline(fineweb, parse(fineweb, argv))
    assert str(raised.value) == (
        f"The language-ID model {model} (--lid_model) is not on the worker that needs it, though the machine that "
        "built the job has it: workers read it from their own file system."
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert not output.exists() or sorted(output.iterdir()) == []
