"""Merging a job's shard outputs into a run folder: its layout, what inspect and report read, the publish rules."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from beamtrove.cli import main
from beamtrove.execution.jobs import JobDir
from beamtrove.execution.jobs.merge import merge_job
from beamtrove.layout import READ, WRITE
from tests.conftest import beamtrove_here, jsonl_lines
from tests.execution.jobs.conftest import start_worker


@pytest.fixture(scope="module")
def done_job(review_jsonl, tmp_path_factory) -> pathlib.Path:
    """A job of two shards of real reviews, one with a malformed row, with summary statistics, done by one worker.

    Its input is a folder of its own, beside it: ``input/``.
    """
    folder = tmp_path_factory.mktemp("merge")
    job = folder / "job"
    shutil.copytree(review_jsonl, folder / "input")
    prepare = beamtrove_here(
        "elastic", "prepare", "--pipeline", "convert", "--input", str(folder / "input"), "--job-dir", str(job),
        "--num-shards", "2", "--", "--summary_stats", "doc",
    )  # fmt: skip
    assert prepare.returncode == 0, prepare.stderr[-3000:]
    assert start_worker(job, "alpha").wait(timeout=600) == 0
    return job


@pytest.fixture(scope="module")
def merged(done_job, tmp_path_factory) -> pathlib.Path:
    """The job merged into a new run folder."""
    output = tmp_path_factory.mktemp("merged") / "run"
    result = beamtrove_here("elastic", "merge", "--job-dir", str(done_job), "--output", str(output))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == f"merged 600 documents into {output}; stats in {output}/stats.json"
    return output


def _shard_outputs(job: pathlib.Path) -> list[pathlib.Path]:
    """Each shard's documents as its worker published them, in manifest order."""
    shards = JobDir(job).manifest()["shards"]
    return [job / json.loads((job / "done" / f"{shard['id']}.json").read_text())["output"] for shard in shards]


def _old_folder(output: pathlib.Path) -> None:
    (output / "documents").mkdir(parents=True)
    (output / "documents" / "part-00000.jsonl").write_text('{"text": "old"}\n')
    (output / "stats.json").write_text("{}")


_RUN_FOLDER = ("dead_letters", "documents", "report.html", "stats.json", "summary_stats")


def _length_summary(folder: pathlib.Path) -> dict:
    return json.loads((folder / "summary_stats" / "summary" / "length" / "metric.json").read_text())["summary"]


def test_the_merged_folder_is_a_run_folder_of_the_shards_in_manifest_order(done_job, merged):
    assert sorted(path.name for path in merged.iterdir()) == [*_RUN_FOLDER]
    # Each shard's documents, byte for byte, one part per shard: the parts in name order are the shards in order.
    parts = sorted((merged / "documents").iterdir())
    assert [part.name for part in parts] == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]
    assert [part.read_bytes() for part in parts] == [path.read_bytes() for path in _shard_outputs(done_job)]
    (letters,) = (merged / "dead_letters").iterdir()
    assert letters.name == "part-00000.jsonl"
    assert [json.loads(line)["reason"] for line in letters.read_text().splitlines()] == ["malformed_json"]
    stats = json.loads((merged / "stats.json").read_text())
    assert (stats["pipeline"], stats["state"], stats["options"]["output"]) == ("convert", "DONE", str(merged))
    assert stats["elastic"]["tasks"] == 2 and stats["elastic"]["documents"] == 600
    assert stats["elastic"]["hosts"] == {"alpha": 2}
    assert stats["steps"][READ]["counters"]["in"] == 601 and stats["steps"][READ]["counters"]["out"] == 600
    # The shards' summary statistics, added up.
    shards = [_length_summary(path) for path in sorted(done_job.glob("attempts/*/*/output"))]
    assert _length_summary(merged)["n"] == sum(shard["n"] for shard in shards) == 600
    assert _length_summary(merged)["total"] == sum(shard["total"] for shard in shards)


def test_inspect_and_report_read_the_merged_folder(done_job, merged, capsys):
    assert main(["inspect", str(merged), "--limit", "0", "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert shown == [json.loads(line) for line in jsonl_lines(_shard_outputs(done_job))]
    assert main(["inspect", str(merged), "--dead-letters"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].startswith(f"{merged}/dead_letters: 1 file, ")
    assert listing[1] == f"  {READ}: malformed_json 1"
    assert listing[3] == f"[1] malformed_json (step {READ})"
    report = beamtrove_here("report", str(merged), "--out", str(merged.parent / "again.html"))
    assert report.returncode == 0, report.stderr
    page = (merged.parent / "again.html").read_text()
    assert page == (merged / "report.html").read_text()
    kept = json.loads((merged / "stats.json").read_text())["steps"][WRITE]["counters"]["out"]
    assert kept == 600 and "600 documents read, 600 kept (100.0%)" in page
    assert "<summary>malformed_json <span class=count>(1 in all)</span></summary>" in page
    assert "<figcaption>n 600, mean " in page


def test_an_output_named_as_the_merged_file_of_old_is_refused_in_one_line(done_job, tmp_path, capsys):
    output = tmp_path / "merged.jsonl.gz"
    assert main(["elastic", "merge", "--job-dir", str(done_job), "--output", str(output)]) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: --output {output} names a file, but `beamtrove elastic merge` writes a run folder as "
        "`beamtrove run` does (documents/, excluded/, dead_letters/, stats.json, report.html): pass a folder, e.g. "
        f"--output {tmp_path / 'merged'}\n"
    )
    assert not list(tmp_path.iterdir())


def test_overwrite_replaces_what_the_output_folder_held(done_job, tmp_path, capsys):
    output = tmp_path / "merged"
    _old_folder(output)
    assert main(["elastic", "merge", "--job-dir", str(done_job), "--output", str(output)]) == 2
    # Only options merge has: no --resumable.
    assert capsys.readouterr().err == (
        f"beamtrove: error: --output {output} already holds documents, stats.json: choose another --output, or pass "
        "--overwrite to replace it once this run succeeds.\n"
    )
    assert main(["elastic", "merge", "--job-dir", str(done_job), "--output", str(output), "--overwrite"]) == 0
    assert len(jsonl_lines(sorted((output / "documents").iterdir()))) == 600
    assert json.loads((output / "stats.json").read_text())["elastic"]["documents"] == 600
    # Nothing else: no old part, no staging folder, no lock.
    assert sorted(path.name for path in output.iterdir()) == [*_RUN_FOLDER]
    parts = sorted(path.name for path in (output / "documents").iterdir())
    assert parts == ["part-00000.jsonl.gz", "part-00001.jsonl.gz"]


def test_a_merge_stopped_while_publishing_is_finished_by_the_next_one(done_job, tmp_path, monkeypatch, caplog):
    output = tmp_path / "merged"
    _old_folder(output)

    def stop(step):
        if step == "moved_in documents":
            raise KeyboardInterrupt

    monkeypatch.setattr("beamtrove.execution.output_publish.reached", stop)
    with pytest.raises(KeyboardInterrupt):
        merge_job(done_job, output, overwrite=True)
    # The old outputs are aside, the merged dead letters and documents in place; the stats still staged.
    assert sorted(path.name for path in output.iterdir()) == [".beamtrove-staging", "dead_letters", "documents"]
    monkeypatch.setattr("beamtrove.execution.output_publish.reached", lambda step: None)
    with pytest.raises(Exception, match="already holds"):
        merge_job(done_job, output)
    assert f"{output}: finished publishing the outputs of a run stopped while publishing them" in caplog.text
    assert len(jsonl_lines(sorted((output / "documents").iterdir()))) == 600
    assert json.loads((output / "stats.json").read_text())["elastic"]["documents"] == 600
    assert sorted(path.name for path in output.iterdir()) == [*_RUN_FOLDER]


def _merge(job: pathlib.Path, output: pathlib.Path, *extra: str) -> int:
    return main(["elastic", "merge", "--job-dir", str(job), "--output", str(output), *extra])


def _listing(folder: pathlib.Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_merge_refuses_an_output_that_overlaps_the_job_input(done_job, capsys):
    inputs = done_job.parent / "input"
    before = _listing(inputs)
    # Inside the input folder: the next run over that input would read the merged documents as well.
    assert _merge(done_job, inputs / "merged") == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: --output {inputs / 'merged'} is inside the input folder {inputs}: the next run over that "
        "input would read this run's results. Write to a folder outside the input.\n"
    )
    # Around the input: --overwrite would delete it.
    assert _merge(done_job, inputs, "--overwrite") == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: The input {inputs / 'reviews-0.jsonl'} is inside --output {inputs}: a run must not read "
        "what it writes. Write to another --output.\n"
    )
    assert _listing(inputs) == before


def test_merge_never_writes_onto_its_job_directory(done_job, tmp_path, capsys):
    # A copy, so that the job the other tests merge stays whole whatever this one does.
    job = tmp_path / "jobs" / "job"
    shutil.copytree(done_job, job)
    before = _listing(job)
    for output, extra in ((tmp_path / "jobs", "--overwrite"), (job, "--overwrite"), (job / "merged", None)):
        assert _merge(job, output, *filter(None, [extra])) == 2
        err = capsys.readouterr().err
        assert err == (
            f"beamtrove: error: --job-dir {job} is inside --output {output}: a run must not write where it reads, and "
            "--overwrite would delete it. Move it out of the output folder, or write to another --output.\n"
            if output != job / "merged"
            else f"beamtrove: error: --output {output} is inside --job-dir {job}: a run must not write where it "
            "reads. Write to a folder outside it.\n"
        ), output
        assert _listing(job) == before
    assert _merge(job, tmp_path / "merged") == 0
    assert len(jsonl_lines(sorted((tmp_path / "merged" / "documents").iterdir()))) == 600


def test_merging_a_staged_job_makes_the_same_checks(review_jsonl, tmp_path, capsys):
    inputs, job = tmp_path / "data" / "input", tmp_path / "jobs" / "job"
    shutil.copytree(review_jsonl, inputs)
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(inputs), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "2", "--", "--dedup", "exact"]) == 0
    before = _listing(tmp_path)
    capsys.readouterr()
    # Checked before anything of the job is: it has not run yet.
    assert _merge(job, job.parent, "--overwrite") == 2
    assert capsys.readouterr().err.startswith(f"beamtrove: error: --job-dir {job} is inside --output {job.parent}: ")
    assert _merge(job, inputs.parent, "--overwrite") == 2
    assert capsys.readouterr().err.startswith(
        f"beamtrove: error: The input {inputs / 'reviews-0.jsonl'} is inside --output {inputs.parent}: "
    )
    # An output inside the folder the job's input was read from: the next run over that folder would read it.
    assert _merge(job, inputs / "merged") == 2
    assert f"--output {inputs / 'merged'} is inside the input folder {inputs}" in capsys.readouterr().err
    assert _listing(tmp_path) == before
