"""``beamtrove report``: writes the page where asked, refuses a folder that is not a run's output."""

from __future__ import annotations

import json

from beamtrove.cli import main


def test_report_writes_the_page_beside_the_stats_or_where_asked(tmp_path, capsys):
    stats = {"pipeline": "convert", "state": "DONE", "steps": {"Read": {"counters": {"in": 3, "out": 3}}}}
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "report.html")
    assert "beamtrove report: convert" in (tmp_path / "report.html").read_text()
    elsewhere = tmp_path / "pages" / "run.html"
    assert main(["report", str(tmp_path), "--out", str(elsewhere)]) == 0
    assert "3 documents read, 3 kept (100.0%)" in elsewhere.read_text()


def test_report_of_a_folder_without_stats_says_it_is_not_a_runs_output(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"beamtrove: error: {tmp_path} holds no stats.json: it is not a run's output folder; "
        "pass the --output of a finished run"
    )
