"""The extract pipeline: WARC pages to their main text, nothing filtered."""

from __future__ import annotations

import json

from beamtrove.cli import main
from beamtrove.pipelines import pipeline_spec
from tests.conftest import jsonl_rows


def test_extract_pipeline_keeps_every_page_with_text(data_dir, tmp_path):
    warc = data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"
    assert main(["run", "extract", "--input", str(warc), "--output", str(tmp_path)]) == 0
    steps = json.loads((tmp_path / "stats.json").read_text())["steps"]
    rows = jsonl_rows(tmp_path / "documents")
    assert (
        len(rows)
        == steps["extract"]["counters"]["out"]
        == steps["read"]["counters"]["out"]
        - steps["extract"]["counters"].get("dropped.empty", 0)
        - sum(v for k, v in steps["extract"]["counters"].items() if k.startswith("errors."))
    )
    assert all("<html" not in row["text"].lower() for row in rows)


def test_extract_is_shard_safe_resumable_and_takes_the_extraction_options():
    spec = pipeline_spec("extract")
    assert spec.shard_safe and spec.resumable and spec.read_label == "read"
    assert [c.__name__ for c in spec.option_classes] == [
        "ExtractionOptions",
        "ResumeOptions",
        "SummaryStatsOptions",
        "WordSplitterOptions",
        "BeamtroveOptions",
    ]
