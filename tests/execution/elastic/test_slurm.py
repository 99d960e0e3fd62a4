"""The Slurm array template on a real Slurm: each array task is one elastic worker."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import beamtrove, jsonl_lines, slurm_job_finished, wait_for

pytestmark = pytest.mark.slurm


def test_an_array_of_workers_completes_the_job(slurm, review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    prepared = beamtrove(
        "elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", str(job),
        "--num-shards", "4",
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr
    script = tmp_path / "elastic-array.sbatch"
    script.write_text(beamtrove("elastic", "slurm-template").stdout)
    # The tasks run this interpreter's beamtrove, whatever is on the node's PATH.
    launcher = tmp_path / "beamtrove"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m beamtrove "$@"\n')
    launcher.chmod(0o755)
    submitted = subprocess.run(
        ["sbatch", "--array=0-1", f"--export=ALL,JOB_DIR={job},BEAMTROVE={launcher}", str(script)],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    job_id = re.search(r"Submitted batch job (\d+)", submitted.stdout).group(1)
    wait_for(lambda: slurm_job_finished(job_id), timeout=600, what=f"Slurm job {job_id}")
    logs = sorted(tmp_path.glob(f"beamtrove-elastic-{job_id}_*.out"))
    assert len(logs) == 2
    for log in logs:
        assert "finished after processing" in log.read_text(), log.read_text()[-2000:]
    status = beamtrove("elastic", "status", "--job-dir", str(job), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["done"] == 4
    merged = tmp_path / "merged.jsonl.gz"
    assert beamtrove("elastic", "merge", "--job-dir", str(job), "--output", str(merged)).returncode == 0
    assert sorted(jsonl_lines([merged])) == single_convert
