"""The Slurm array template on a real Slurm: each array task is one elastic worker."""

from __future__ import annotations

import json

import pytest

from tests.conftest import beamtrove, jsonl_lines, run_worker_array

# Slow: a Slurm array of staged workers stays in the default suite (tests/execution/jobs/staged/test_staged.py).
pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_an_array_of_workers_completes_the_job(slurm, review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    prepared = beamtrove(
        "elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", str(job),
        "--num-shards", "4",
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    logs = run_worker_array(job, tmp_path)
    assert len(logs) == 2
    for log in logs:
        assert "finished after running" in log.read_text(), log.read_text()[-2000:]
    status = beamtrove("elastic", "status", "--job-dir", str(job), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["done"] == 4
    merged = tmp_path / "merged"
    assert beamtrove("elastic", "merge", "--job-dir", str(job), "--output", str(merged)).returncode == 0
    assert sorted(jsonl_lines(sorted((merged / "documents").iterdir()))) == single_convert
