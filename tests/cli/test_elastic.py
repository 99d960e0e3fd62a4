"""``beamtrove elastic``: what each subcommand prints and its exit status (the worker tests drive real jobs)."""

from __future__ import annotations

import json
import subprocess

import pytest

from beamtrove.cli import main
from beamtrove.execution.jobs import JobDir
from tests.execution.jobs.conftest import give_real_output


@pytest.fixture
def shard_states_job(shard_states_job) -> JobDir:
    """The hand-made job of every shard state, its done shard with a real output (a done record without one is
    damaged)."""
    give_real_output(shard_states_job, "shard-00003")
    return shard_states_job


def test_prepare_reports_the_shards_and_a_second_prepare_changes_nothing(review_jsonl, tmp_path, capsys):
    argv = ["elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir",
            str(tmp_path / "job"), "--num-shards", "4", "--", "--id_key", "review"]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == f"prepared {tmp_path / 'job'}: 4 shards over 3 input file(s), 601 records"
    manifest = json.loads((tmp_path / "job" / "manifest.json").read_text())
    assert manifest["pipeline"]["args"] == ["--id_key", "review"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("already prepared identically; nothing changed:")


def test_prepare_refuses_options_of_another_pipeline_with_its_name(review_jsonl, tmp_path, capsys):
    argv = ["elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir",
            str(tmp_path / "job"), "--num-shards", "2", "--", "--tokenizer", "gpt2.json"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: --tokenizer is an option of the tokenize pipeline, not of convert "
        "(see beamtrove run convert --help)."
    )
    assert not (tmp_path / "job").exists()


def test_status_lists_what_is_not_done_and_exits_1_until_done(shard_states_job, capsys):
    assert main(["elastic", "status", "--job-dir", str(shard_states_job.path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("5 tasks: 1 done, 1 running, 1 stale, 1 pending, 1 failed, 0 damaged · 1/5 tasks done")
    assert "shard-00002  failed   attempts 0  b: boom" in out and "shard-00003" not in out
    assert main(["elastic", "status", "--job-dir", str(shard_states_job.path), "--all", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["complete"] is False
    assert report["counts"] == {"done": 1, "running": 1, "stale": 1, "pending": 1, "failed": 1, "damaged": 0}
    assert [shard["id"] for shard in report["tasks"]] == [f"shard-0000{k}" for k in range(5)]


def test_retry_reports_what_it_requeued_and_refuses_when_nothing_failed(shard_states_job, capsys):
    assert main(["elastic", "retry", "--job-dir", str(shard_states_job.path), "--all-failed"]) == 0
    assert capsys.readouterr().out.strip() == "re-queued 1 task(s): shard-00002"
    assert main(["elastic", "retry", "--job-dir", str(shard_states_job.path), "--all-failed"]) == 2
    assert capsys.readouterr().err.strip() == "beamtrove: error: Nothing to retry: no task is failed."


def test_status_and_retry_of_a_done_shard_whose_output_was_deleted(shard_states_job, capsys):
    job = str(shard_states_job.path)
    assert main(["elastic", "retry", "--job-dir", job, "--shard-id", "shard-00003"]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: shard-00003 is done and its files are intact: "
        "only failed, damaged, stale or pending tasks retry."
    )
    output = shard_states_job.path / json.loads(shard_states_job.done_path("shard-00003").read_text())["output"]
    output.unlink()
    assert main(["elastic", "status", "--job-dir", job]) == 1
    out = capsys.readouterr().out
    assert out.startswith("5 tasks: 0 done, 1 running, 1 stale, 1 pending, 1 failed, 1 damaged · 0/5 tasks done\n")
    assert f"shard-00003  damaged  attempts 1  c:7: {output} is missing" in out
    assert main(["elastic", "status", "--job-dir", job, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["damaged"] == 1
    assert report["tasks"][3]["state"] == "damaged" and report["tasks"][3]["damage"].endswith(" is missing")
    assert main(["elastic", "retry", "--job-dir", job, "--all-damaged"]) == 0
    assert capsys.readouterr().out.strip() == "re-queued 1 task(s): shard-00003"
    assert main(["elastic", "retry", "--job-dir", job, "--all-damaged"]) == 2
    assert capsys.readouterr().err.strip() == "beamtrove: error: Nothing to retry: no task is damaged."


def test_verify_and_merge_refuse_an_unfinished_job(review_jsonl, tmp_path, capsys):
    job = tmp_path / "job"
    argv = ["elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", str(job)]
    assert main([*argv, "--num-shards", "3"]) == 0
    capsys.readouterr()
    assert main(["elastic", "verify", "--job-dir", str(job), "--expect-hosts", "2"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "0 documents in done tasks, completed by 0 host(s): ",
        "not done: 3 pending or running, 0 failed",
        "expected tasks completed by at least 2 hosts",
    ]
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "all")]) == 2
    assert "Not every shard is done (missing: shard-00000, shard-00001, shard-00002" in capsys.readouterr().err
    assert not (tmp_path / "all").exists()


def test_only_prepare_takes_pipeline_options_and_a_worker_needs_a_job(tmp_path, capsys):
    assert main(["elastic", "status", "--job-dir", str(tmp_path), "--", "--lid_model", "x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: `beamtrove elastic status` takes no pipeline options after --."
    )
    assert main(["elastic", "worker", "--job-dir", str(tmp_path)]) == 2
    assert "is not a prepared elastic job" in capsys.readouterr().err


def test_slurm_template_is_a_bash_script_running_one_worker(capsys):
    assert main(["elastic", "slurm-template"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --ntasks=1" in script
    assert 'exec "${BEAMTROVE:-beamtrove}" elastic worker --job-dir "$JOB_DIR"' in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
