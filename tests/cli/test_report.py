"""``beamtrove report``: writes the page where asked, refuses a folder that is not a run's output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beamtrove.cli import main
from tests.conftest import permissions_bind, require


@pytest.fixture
def extract_run(data_dir, tmp_path):
    """The output folder of a real run, without its report."""
    warc = require(data_dir / "warc" / "cc-main-2024-22_whirlwind.warc.gz")
    assert main(["run", "extract", "--input", str(warc), "--output", str(tmp_path / "run")]) == 0
    (tmp_path / "run" / "report.html").unlink()
    return tmp_path / "run"


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


def test_report_of_a_runs_stats_json_is_the_report_of_its_folder(extract_run, capsys):
    # It was a NotADirectoryError's traceback; `beamtrove stats` took the same path.
    assert main(["report", str(extract_run / "stats.json")]) == 0
    assert capsys.readouterr().out.strip() == str(extract_run / "report.html")
    assert "beamtrove report: extract" in (extract_run / "report.html").read_text()


def test_report_into_a_read_only_folder_is_one_line_that_names_out(extract_run, tmp_path):
    # It was a PermissionError's traceback.
    extract_run.chmod(0o555)
    command = [sys.executable, "-m", "beamtrove", "report", str(extract_run)]
    refused = subprocess.run(command, capture_output=True, text=True, preexec_fn=permissions_bind(), check=False)
    assert (refused.returncode, refused.stderr) == (
        2,
        f"beamtrove: error: cannot write the report to {extract_run / 'report.html'} (Permission denied): "
        "pass --out with a file that can be written\n",
    )
    assert sorted(path.name for path in extract_run.iterdir()) == ["documents", "stats.json"]
    elsewhere = tmp_path / "report.html"
    written = subprocess.run(
        [*command, "--out", str(elsewhere)], capture_output=True, text=True, preexec_fn=permissions_bind(), check=False
    )
    assert (written.returncode, written.stdout, written.stderr) == (0, f"{elsewhere}\n", "")
