"""stats.json: metrics merged per step, in pipeline order, and the table."""

from __future__ import annotations

from beamtrove.stats import format_stats, read_stats, write_stats
from beamtrove.transforms.readers import ReadWarc
from beamtrove.transforms.writers import WriteJsonl
from tests.conftest import require, run_and_collect


def test_steps_in_pipeline_order_with_merged_counters_and_distributions(data_dir, tmp_path):
    path = require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz")

    def build(pipeline):
        pipeline | "Zeta" >> ReadWarc(str(path)) | "Alpha" >> WriteJsonl(str(tmp_path / "out"))

    stats = run_and_collect(build)
    assert list(stats) == ["Zeta", "Alpha"]
    assert stats["Zeta"]["counters"]["in"] == 50
    assert stats["Alpha"]["counters"]["files"] == 1  # counted by the finalize step, merged into Alpha
    lengths = stats["Zeta"]["distributions"]["doc_chars"]
    assert lengths["count"] == 16
    assert lengths["min"] <= lengths["mean"] <= lengths["max"]

    written = write_stats({"steps": stats}, str(tmp_path))
    assert read_stats(str(tmp_path)) == read_stats(written) == {"steps": stats}


def test_table_flags_records_a_step_lost():
    table = format_stats(
        {
            "steps": {
                "Read": {"counters": {"in": 10, "out": 7, "skipped.request_record": 2}, "distributions": {}},
                "Write": {"counters": {"in": 7, "out": 7, "files": 1}, "distributions": {}},
            }
        }
    )
    lines = table.splitlines()
    assert lines[0].split() == ["step", "in", "out", "skipped", "dropped", "errors"]
    assert lines[1].split() == ["Read", "10", "7", "2", "0", "0"]
    assert "    unaccounted: 1" in lines
    assert "    skipped.request_record: 2" in lines
    assert lines[-2].split() == ["Write", "7", "7", "0", "0", "0"]
