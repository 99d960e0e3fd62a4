"""The benchmarks' shared helpers: flags, JSONL files, measured commands and the results file a script writes."""

from __future__ import annotations

import argparse
import gzip
import json
import sys

import pytest

from benchmarks.common import (
    Results,
    Unfinished,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    jsonl_rows,
    markdown_table,
    run_measured,
    write_jsonl,
)
from tests.conftest import wait_for


def test_flags_are_spelled_with_underscores_and_also_taken_with_dashes(tmp_path):
    parser = argument_parser("A benchmark.\n")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-example")
    parser.add_argument("--word_splitter", default="beamtrove")
    args = parser.parse_args(["--datatrove-venv", str(tmp_path), "--word_splitter", "spacy"])
    assert (args.datatrove_venv, args.word_splitter, args.results) == (tmp_path, "spacy", None)
    assert args.workdir.name == "beamtrove-example"
    assert "--word_splitter WORD_SPLITTER, --word-splitter WORD_SPLITTER" in parser.format_help()


def test_jsonl_files_are_read_in_name_order_gzipped_or_not_without_blank_lines(tmp_path):
    write_jsonl(tmp_path / "b.jsonl.gz", [{"id": "b1"}, {"id": "b2", "text": "été"}])
    (tmp_path / "a.jsonl").write_text('{"id": "a1"}\n\n')
    (tmp_path / "sub").mkdir()
    write_jsonl(tmp_path / "sub" / "c.jsonl", [{"id": "c1"}])
    assert [row["id"] for row in jsonl_rows(tmp_path)] == ["a1", "b1", "b2"]
    assert [row["id"] for row in jsonl_rows(tmp_path, "**/*.jsonl*")] == ["a1", "b1", "b2", "c1"]
    with gzip.open(tmp_path / "b.jsonl.gz", "rt", encoding="utf-8") as lines:
        assert lines.read() == '{"id": "b1"}\n{"id": "b2", "text": "été"}\n'


def test_a_markdown_table_aligns_numbers_right_and_escapes_bars():
    table = markdown_table(["run", "docs", "ratio"], [["a|b", 12_000, "1.50x"], ["c", 3, ""]])
    assert table == "| run | docs | ratio |\n|---|---:|---:|\n| a\\|b | 12,000 | 1.50x |\n| c | 3 |  |"


def test_the_results_file_holds_the_run_and_what_the_script_recorded(tmp_path):
    args = argparse.Namespace(records=300, workdir=tmp_path, results=None)
    results = Results("/repo/benchmarks/example_speed.py", "Speed of an example.\n\nMore words.\n", args)
    assert results.table("Runs", ["run", "wall s"], [["one", "1.5"]]) == "| run | wall s |\n|---|---:|\n| one | 1.5 |"
    assert results.check("faster than the other", True)
    assert not results.check("smaller than the other", False)
    assert results.note("the other used 2 cores") == "the other used 2 cores"
    assert not results.passed
    path = results.write()
    assert path == tmp_path / "results" / "example_speed.json"
    written = json.loads(path.read_text())
    assert {key: written[key] for key in ("benchmark", "title", "settings", "tables", "checks", "notes")} == {
        "benchmark": "example_speed",
        "title": "Speed of an example.",
        "settings": {"records": 300, "workdir": str(tmp_path)},
        "tables": [{"title": "Runs", "columns": ["run", "wall s"], "rows": [["one", "1.5"]]}],
        "checks": [
            {"goal": "faster than the other", "passed": True},
            {"goal": "smaller than the other", "passed": False},
        ],
        "notes": ["the other used 2 cores"],
    }
    assert written["command"].startswith("python -m benchmarks.example_speed")
    assert written["machine"]["cores"] >= 1


def test_a_measured_command_past_its_limit_is_killed_with_the_processes_it_started(tmp_path):
    # A parent holding 64 MiB that starts a child, both sleeping far past the limit.
    child = "import time; time.sleep(120)"
    parent = (
        "import subprocess, sys, time; blob = bytearray(64 << 20); "
        f"child = subprocess.Popen([sys.executable, '-c', {child!r}]); "
        f"open({str(tmp_path / 'child')!r}, 'w').write(str(child.pid)); time.sleep(120)"
    )
    with pytest.raises(Unfinished, match="did not finish within 3 s") as unfinished:
        run_measured([sys.executable, "-c", parent], tmp_path / "log", limit=3)
    assert unfinished.value.limit == 3
    assert unfinished.value.monitor.peak_pss > 64 << 20
    pid = int((tmp_path / "child").read_text())
    wait_for(lambda: _gone(pid), 10, f"the child {pid} to be killed")
    run_measured([sys.executable, "-c", "print('done')"], tmp_path / "log", limit=60)
    assert (tmp_path / "log").read_text() == "done\n"


def _gone(pid: int) -> bool:
    """Whether ``pid`` ended: no process, or a zombie left for init to reap."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
