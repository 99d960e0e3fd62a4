"""What the terminal shows: no noise that reads as failure, and errors that say what to do (with "did you mean")."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from beamtrove.cli import main
from beamtrove.execution.runner_parts import default_flink_minor
from beamtrove.pipelines import PIPELINES
from tests.conftest import beamtrove, require, wait_for

REPO = pathlib.Path(__file__).resolve().parents[2]
NOISE = ("fork_posix", "Discarding unparseable args", "Traceback", "No module named", "semi_persistent_directory")


@pytest.fixture
def fineweb_args(data_dir, tmp_path) -> list[str]:
    return [
        "--input",
        str(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"),
        "--output",
        str(tmp_path / "out"),
        "--lid_model",
        str(data_dir / "models" / "lid176" / "lid.176.ftz"),
        "--url_blocklist",
        str(data_dir / "blocklists" / "ut1"),
    ]


@pytest.mark.slow
def test_a_multi_processing_run_shows_no_grpc_fork_or_discarded_options_lines(fineweb_args):
    result = beamtrove(
        "run", "fineweb", *fineweb_args, "--language_threshold=0.65",
        "--direct_num_workers", "2", "--direct_running_mode", "multi_processing",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert [noise for noise in NOISE if noise in result.stderr] == []
    assert "DONE in" in result.stdout


@pytest.mark.slow
def test_dataflow_graph_with_a_setup_file_shows_no_failed_build_attempt(fineweb_args):
    result = beamtrove("dataflow", "graph", "fineweb", "--", *fineweb_args, "--setup_file", str(REPO / "setup.py"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [noise for noise in NOISE if noise in result.stderr] == []
    assert "workflow.tar.gz" in result.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "fineweb", "--inptu", "x"],
            "unknown options --inptu x: did you mean --input? (see beamtrove run fineweb --help).",
        ),
        (
            ["run", "fineweb", "--input", "x", "--lid-mdel", "m", "--runer", "FlinkRunner"],
            "unknown options --lid-mdel m --runer FlinkRunner: did you mean --lid-model for --lid-mdel, "
            "--runner for --runer? (see beamtrove run fineweb --help).",
        ),
        (
            ["run", "convert", "--input", "x", "--output_format", "jsnl"],
            "convert writes --output_format jsonl or parquet, not 'jsnl'; did you mean 'jsonl'?",
        ),
        (
            ["run", "convert", "--no_such_option", "1"],
            "unknown options --no_such_option 1 (see beamtrove run convert --help).",
        ),
    ],
)
def test_misspelled_pipeline_options_and_values_name_the_closest(argv, message, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == f"beamtrove: error: {message}\n"


def test_a_misspelled_pipeline_name_names_the_closest(capsys):
    assert main(["run", "finweb"]) == 2
    assert capsys.readouterr().err == (
        "beamtrove: error: Unknown pipeline 'finweb'; available: "
        f"{', '.join(sorted(PIPELINES))}. Did you mean 'fineweb'?\n"
    )


def test_misspelled_subcommands_and_their_options_name_the_closest(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["runners", "setp"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "beamtrove runners: error: argument COMMAND: invalid choice: 'setp' (choose from 'setup', 'path', 'flink'); "
        "did you mean 'setup'?"
    )
    with pytest.raises(SystemExit):
        main(["dataflow", "graph", "fineweb", "--outptu", "x"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "beamtrove: error: unrecognized arguments: --outptu x; did you mean --output?"
    )


def test_a_tokenizer_folder_is_refused_with_the_file_to_pass(data_dir, review_jsonl, tmp_path, capsys):
    folder = data_dir / "tokenizers" / "gpt2"
    argv = ["run", "tokenize", "--input", str(review_jsonl), "--output", str(tmp_path), "--tokenizer", str(folder)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: {folder} is a folder: pass --tokenizer with the tokenizer.json it holds "
        f"({folder / 'tokenizer.json'}), the file HuggingFace model repositories ship.\n"
    )


def test_a_missing_url_blocklist_folder_is_said_not_to_exist(fineweb_args, tmp_path, capsys):
    missing = tmp_path / "no-such-blocklist"
    argv = [*fineweb_args[:-1], str(missing)]
    assert main(["run", "fineweb", *argv]) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: The URL blocklist folder {missing} does not exist. Run `beamtrove assets fetch` to "
        "download the UT1 lists into the cache, or pass --url_blocklist with the folder that holds them.\n"
    )


@pytest.mark.parametrize("pipeline", ["dedup", "filter", "stats", "extract"])
def test_an_input_that_does_not_exist_is_said_not_to_exist_before_its_format_is_asked_for(pipeline, tmp_path, capsys):
    # dedup, filter and stats read any row format: they said "Cannot tell the input format", asking for a format.
    missing = tmp_path / "nonexist"
    argv = ["run", pipeline, "--input", str(missing), "--output", str(tmp_path / "out")]
    assert main(argv + (["--steps", "gopher_quality"] if pipeline == "filter" else [])) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: Input {str(missing)!r} does not exist: pass an existing file, directory or glob.\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_flink_run_without_a_job_server_jar_is_refused_in_one_line(fineweb_args, tmp_path, monkeypatch, capsys):
    runners = tmp_path / "runners"
    monkeypatch.setenv("BEAMTROVE_RUNNERS", str(runners))
    assert main(["run", "fineweb", *fineweb_args, "--runner", "FlinkRunner"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"beamtrove: error: The FlinkRunner needs Beam's Flink {default_flink_minor()} job-server jar, "
        f"and {runners} has none: run "
        "`beamtrove runners setup --runner flink-job-server`, or pass --flink_job_server_jar JAR "
        "(or --job_endpoint of a running job server)."
    ]


def _loading_beam(pid: int) -> bool:
    """Whether process ``pid`` has begun loading Beam's modules: its command runs, and no run has begun yet."""
    try:
        return "/apache_beam/" in pathlib.Path(f"/proc/{pid}/maps").read_text()
    except OSError:  # ended
        return False


@pytest.mark.parametrize("launcher", [[sys.executable, "-m", "beamtrove"], ["beamtrove"]], ids=["module", "script"])
def test_sigterm_before_the_run_has_begun_is_one_line_and_exit_130_as_ctrl_c(data_dir, tmp_path, launcher):
    # Until the run set its handler, seconds after the start, SIGTERM ended the command at once: 143, no line.
    output = tmp_path / "out"
    warc = require(data_dir / "warc" / "cc-main-2024-22_whirlwind.warc.gz")
    command = [*launcher, "run", "extract", "--input", str(warc), "--output", str(output)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: _loading_beam(process.pid) or process.poll() is not None, what="the command to load Beam")
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert (process.returncode, err) == (130, "beamtrove: interrupted\n")
    assert not output.exists()


_LATE_RELAY = """
import logging, sys
from beamtrove.cli import main

status = main()
# As a job service's relay thread logs a worker's line that came in after the run failed.
logging.getLogger("PrismRunner").warning("restarting SDK process")
sys.exit(status)
"""


def test_the_error_line_is_the_last_line_though_a_job_service_relays_after_it(tmp_path):
    # Prism's relay of the worker pool's restart came after the error line in CI, now and then.
    missing = tmp_path / "missing" / "*.warc.gz"
    argv = ["run", "extract", "--input", str(missing), "--output", str(tmp_path / "out")]
    ran = subprocess.run([sys.executable, "-c", _LATE_RELAY, *argv], capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stderr) == (
        2,
        f"beamtrove: error: No files match '{missing}': check the path and the pattern.\n",
    )


@pytest.mark.parametrize("command", ["stats", "elastic status"])
def test_a_command_whose_reader_closes_the_pipe_stops_quietly(command, data_dir, tmp_path, request):
    # `beamtrove stats RUN | true`: a BrokenPipeError's traceback, status 1.
    if command == "stats":
        warc = require(data_dir / "warc" / "cc-main-2024-22_whirlwind.warc.gz")
        assert main(["run", "extract", "--input", str(warc), "--output", str(tmp_path / "run")]) == 0
        argv = ["stats", str(tmp_path / "run")]
    else:
        argv = ["elastic", "status", "--job-dir", str(request.getfixturevalue("shard_states_job").path)]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes
    with os.fdopen(write, "wb") as closed:
        result = subprocess.run(
            [sys.executable, "-m", "beamtrove", *argv], stdout=closed, stderr=subprocess.PIPE, check=False
        )
    # Ended as SIGPIPE ends a GNU tool, with nothing said.
    assert (result.returncode, result.stderr) == (128 + signal.SIGPIPE, b"")
