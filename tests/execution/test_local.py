"""Running a pipeline locally: built, run, waited for, and its stats written where its results are."""

from __future__ import annotations

import json

from beamtrove import __version__
from beamtrove.execution.local import run_pipeline
from beamtrove.options import parse
from beamtrove.pipelines import pipeline_spec
from tests.conftest import jsonl_rows, require


def test_a_run_writes_its_stats_beside_its_results(data_dir, tmp_path):
    extract = pipeline_spec("extract")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    argv = ["--input", warc, "--output", str(tmp_path), "--extractor", "resiliparse", "--progress_interval", "0"]
    result = run_pipeline(extract, parse(extract, argv))
    assert result.succeeded and result.state == "DONE"
    assert result.stats_path == str(tmp_path / "stats.json")
    assert json.loads((tmp_path / "stats.json").read_text()) == result.stats
    assert {key: result.stats[key] for key in ("beamtrove_version", "pipeline", "runner")} == {
        "beamtrove_version": __version__,
        "pipeline": "extract",
        "runner": "DirectRunner",
    }
    steps = result.stats["steps"]
    assert list(steps)[:2] == ["ReadWarc", "extract"]
    assert steps["WriteDocuments"]["counters"]["out"] == len(jsonl_rows(tmp_path / "documents")) > 0
