"""Merging a job's shard outputs into a file: replacing what the output path held, under the publish rules."""

from __future__ import annotations

import json
import pathlib

import pytest

from beamtrove.cli import main
from beamtrove.execution.elastic.merge import merge_job
from tests.conftest import beamtrove, jsonl_lines
from tests.execution.elastic.conftest import start_worker


@pytest.fixture(scope="module")
def done_job(review_jsonl, tmp_path_factory) -> pathlib.Path:
    """A job of two shards of real reviews, done by one worker."""
    job = tmp_path_factory.mktemp("merge") / "job"
    prepare = beamtrove(
        "elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", str(job),
        "--num-shards", "2",
    )  # fmt: skip
    assert prepare.returncode == 0, prepare.stderr[-3000:]
    assert start_worker(job, "alpha").wait(timeout=600) == 0
    return job


def _old_folder(output: pathlib.Path) -> None:
    (output / "documents").mkdir(parents=True)
    (output / "documents" / "part-00000.jsonl").write_text('{"text": "old"}\n')
    (output / "stats.json").write_text("{}")


def test_overwrite_replaces_a_folder_at_the_output_path_with_the_merged_file(done_job, tmp_path, capsys):
    output = tmp_path / "merged"
    _old_folder(output)
    assert main(["elastic", "merge", "--job-dir", str(done_job), "--output", str(output)]) == 2
    assert (
        capsys.readouterr().err.strip() == f"beamtrove: error: {output} already exists: pass --overwrite to replace it."
    )
    assert main(["elastic", "merge", "--job-dir", str(done_job), "--output", str(output), "--overwrite"]) == 0
    assert output.is_file() and len(jsonl_lines([output])) == 600
    assert json.loads((tmp_path / "merged.stats.json").read_text())["documents"] == 600
    # Nothing else beside them: no stray stats file, staging folder or lock.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["merged", "merged.stats.json"]


def test_a_merge_stopped_while_publishing_is_finished_by_the_next_one(done_job, tmp_path, monkeypatch, caplog):
    output = tmp_path / "merged.jsonl.gz"
    _old_folder(output)

    def stop(step):
        if step == "moved_in merged.jsonl.gz":
            raise KeyboardInterrupt

    monkeypatch.setattr("beamtrove.execution.output._reached", stop)
    with pytest.raises(KeyboardInterrupt):
        merge_job(done_job, output, overwrite=True)
    # The old folder is aside, the merged file in place; the stats of the merge still staged.
    assert output.is_file() and not (tmp_path / "merged.jsonl.gz.stats.json").exists()
    monkeypatch.setattr("beamtrove.execution.output._reached", lambda step: None)
    with pytest.raises(Exception, match="already exists"):
        merge_job(done_job, output)
    assert f"{tmp_path}: finished publishing the outputs of a run stopped while publishing them" in caplog.text
    assert len(jsonl_lines([output])) == 600
    assert json.loads((tmp_path / "merged.jsonl.gz.stats.json").read_text())["documents"] == 600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["merged.jsonl.gz", "merged.jsonl.gz.stats.json"]
