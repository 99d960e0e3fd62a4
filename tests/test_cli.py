"""The beamtrove command: run, stats, help and configuration errors."""

from __future__ import annotations

import json
import subprocess
import sys

from beamtrove import __version__
from beamtrove.cli import main


def test_run_convert_writes_documents_dead_letters_and_stats(faults_set, tmp_path, capsys):
    warcs, manifest = faults_set
    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(warcs / "*.warc.gz"), "--output", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["state"] == "DONE" and stats["pipeline"] == "convert" and stats["beamtrove_version"] == __version__
    assert list(stats["steps"]) == ["Read", "Write", "WriteDeadLetters"]
    read = stats["steps"]["Read"]["counters"]
    assert read["in"] == len(manifest) and read["out"] == 400
    assert stats["steps"]["Write"]["counters"]["out"] == 400
    dead = [json.loads(line) for path in (out / "dead_letters").glob("*.jsonl") for line in path.open()]
    assert sorted(d["reason"] for d in dead) == ["truncated_record", "undecodable"]
    assert all(d["step"] == "Read" and d["file"].startswith(str(warcs)) and d["offset"] > 0 for d in dead)
    printed = capsys.readouterr().out
    assert "Read" in printed and "errors.truncated_record: 1" in printed and "stats written to" in printed

    assert main(["stats", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split() == ["Read", f"{len(manifest)}", "400", "2", "0", "2"]


def test_configuration_errors_fail_before_running(tmp_path, capsys):
    assert main(["run", "convert", "--input", str(tmp_path / "*.warc.gz"), "--output", str(tmp_path)]) == 2
    assert "No files match" in capsys.readouterr().err
    assert main(["run", "convert", "--inptu", "x", "--output", str(tmp_path)]) == 2
    assert "unknown options --inptu" in capsys.readouterr().err
    assert main(["run", "nosuch"]) == 2
    assert "Unknown pipeline 'nosuch'" in capsys.readouterr().err
    assert main(["run", "convert", "--output", str(tmp_path)]) == 2
    assert "needs --input and --output" in capsys.readouterr().err
    assert not (tmp_path / "stats.json").exists()


def test_help_lists_pipelines_and_their_options(capsys):
    assert main(["run", "--help"]) == 0
    assert "convert" in capsys.readouterr().out
    assert main(["run", "convert", "--help"]) == 0
    help_text = capsys.readouterr().out
    for option in ("--input_format", "--output", "--progress_interval", "--runner", "--direct_running_mode"):
        assert option in help_text


def test_console_script_is_installed():
    result = subprocess.run(["beamtrove", "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"beamtrove {__version__}"
    subprocess.run([sys.executable, "-m", "beamtrove.cli", "--version"], capture_output=True, check=True)
