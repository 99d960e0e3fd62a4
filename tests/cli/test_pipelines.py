"""``beamtrove run``, ``stats`` and ``assets``: a real run, its table, help and configuration errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beamtrove import __version__
from beamtrove.cli import main
from beamtrove.cli.pipelines import _forks_sdk_workers
from beamtrove.execution.direct_workers import INPUT_PER_WORKER, default_workers


def test_run_convert_writes_documents_dead_letters_and_stats(faults_set, tmp_path, capsys):
    warcs, manifest = faults_set
    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(warcs / "*.warc.gz"), "--output", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["state"] == "DONE" and stats["pipeline"] == "convert" and stats["beamtrove_version"] == __version__
    assert list(stats["steps"]) == ["read", "write", "write_dead_letters"]
    read = stats["steps"]["read"]["counters"]
    assert read["in"] == len(manifest) and read["out"] == 160
    assert stats["steps"]["write"]["counters"]["out"] == 160
    dead = [json.loads(line) for path in (out / "dead_letters").glob("*.jsonl") for line in path.open()]
    assert sorted(d["reason"] for d in dead) == ["truncated_record", "undecodable"]
    assert all(d["step"] == "read" and d["file"].startswith(str(warcs)) and d["offset"] > 0 for d in dead)
    printed = capsys.readouterr().out
    assert "\nread " in printed and "errors.truncated_record: 1" in printed and "stats written to" in printed

    assert main(["stats", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split()[:8] == ["read", f"{len(manifest)}", "160", "97.6%", "100.0%", "2", "0", "2"]


def test_configuration_errors_fail_before_running(tmp_path, capsys):
    assert main(["run", "convert", "--input", str(tmp_path / "*.warc.gz"), "--output", str(tmp_path)]) == 2
    assert "No files match" in capsys.readouterr().err
    assert main(["run", "convert", "--inptu", "x", "--output", str(tmp_path)]) == 2
    assert "unknown options --inptu" in capsys.readouterr().err
    assert main(["run", "nosuch"]) == 2
    assert "Unknown pipeline 'nosuch'" in capsys.readouterr().err
    assert main(["run", "convert", "--output", str(tmp_path)]) == 2
    assert "No input given: pass --input" in capsys.readouterr().err
    assert main(["run", "convert", "--input", str(tmp_path)]) == 2
    assert "convert needs --output." in capsys.readouterr().err
    # An option of another pipeline is refused with the name of the pipeline that takes it.
    assert main(["run", "convert", "--input", "x", "--output", str(tmp_path), "--extractor", "resiliparse"]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: --extractor is an option of the extract and fineweb and fineweb2 pipeline, not of convert "
        "(see beamtrove run convert --help)."
    )
    assert main(["run", "convert", "--input", "x", "--output", str(tmp_path), "--output_format", "csv"]) == 2
    assert "convert writes --output_format jsonl or parquet, not 'csv'." in capsys.readouterr().err
    assert main(["stats", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"beamtrove: error: no stats.json at {tmp_path}"
    assert not (tmp_path / "stats.json").exists()


def test_help_lists_pipelines_and_their_options_by_group(capsys):
    assert main(["run", "--help"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing[3:]] == [
        "convert", "decont_index", "dedup", "dedup_index", "extract", "filter", "fineweb", "fineweb2", "merge_tokens",
        "stats", "tokenize",
    ]  # fmt: skip
    assert main(["run"]) == 2
    capsys.readouterr()
    assert main(["run", "convert", "--help"]) == 0
    help_text = capsys.readouterr().out
    for option in ("--input_format", "--output", "--progress_interval", "--runner", "--direct_running_mode"):
        assert option in help_text
    groups = [line.removesuffix(":") for line in help_text.splitlines() if line.endswith(":") and line[0] != " "]
    assert groups == [
        "options",
        "Options of the convert pipeline",
        "Input format and the fields of table rows",
        "The format of the files a run writes",
        "Which of DataTrove's summary statistics to compute, and how to group them",
        "What splits words",
        "Input, output and progress options every beamtrove pipeline takes",
        "Runner",
        "DirectRunner",
    ]
    assert main(["run", "fineweb", "-h"]) == 0
    assert "Resumable runs:" in capsys.readouterr().out


def test_console_script_is_installed():
    result = subprocess.run(["beamtrove", "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"beamtrove {__version__}"
    module = subprocess.run(
        [sys.executable, "-m", "beamtrove", "--version"], capture_output=True, text=True, check=True
    )
    assert module.stdout == result.stdout


@pytest.mark.parametrize(
    ("argv", "forks"),
    [
        (["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"], True),
        (["--direct_running_mode=multi_processing", "--runner=DirectRunner"], True),
        (["--runner", "direct", "--direct_running_mode", "multi_processing"], True),
        (["--direct_num_workers", "1"], False),
        (["--direct_running_mode", "in_memory"], False),
        (["--staged"], False),
        (["--runner", "PrismRunner", "--direct_running_mode", "multi_processing"], False),
        (["--direct_running_mode"], False),
    ],
)
def test_run_starts_the_worker_zygote_only_for_direct_runs_with_worker_processes(argv, forks):
    assert _forks_sdk_workers(["--input", "x", *argv]) is forks


def test_a_run_that_names_no_workers_starts_the_zygote_when_its_input_is_foreseen_to_take_several(tmp_path):
    several = default_workers() > 1
    # A remote input is not listed before Beam is imported: the machine alone decides.
    assert _forks_sdk_workers(["--input", "gs://bucket/crawl/*.warc.gz"]) is several
    # A small local input runs in memory, in the command's process: no zygote to start.
    small = tmp_path / "small"
    small.mkdir()
    for name in ("a.warc.gz", "b.warc.gz"):
        (small / name).write_bytes(b"x" * 1000)
    assert _forks_sdk_workers(["--input", str(small / "*.warc.gz")]) is False
    assert _forks_sdk_workers([f"--input={small}"]) is False
    # Two files of INPUT_PER_WORKER bytes each (sparse): two workers, where the machine allows them.
    large = tmp_path / "large"
    large.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        with open(large / name, "wb") as file:
            file.truncate(INPUT_PER_WORKER)
    assert _forks_sdk_workers(["--input", str(large)]) is several
    assert _forks_sdk_workers(["--input", str(large / "a.jsonl"), "--input", str(large / "b.jsonl")]) is several
    assert _forks_sdk_workers(["--input", str(large / "a.jsonl")]) is False
