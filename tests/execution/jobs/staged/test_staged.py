"""Staged runs: ``run dedup --staged`` and elastic staged jobs give what one pipeline gives, and resume after a kill."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import apache_beam as beam
import pytest

from beamtrove.cli import main
from beamtrove.execution.jobs.staged import kind as staged_kind
from beamtrove.execution.jobs.staged.tasks import task_id
from beamtrove.execution.jobs.worker import run_worker
from beamtrove.fs import file_sha256
from beamtrove.layout import JOB_DIR
from beamtrove.pipelines import dedup as dedup_pipeline
from tests.conftest import beamtrove, beamtrove_here, run_worker_array, wait_for
from tests.execution.conftest import children_of, running, shared_bytes
from tests.execution.jobs.conftest import start_worker
from tests.execution.jobs.staged.conftest import (
    EVERY_STEP,
    EXACT,
    assert_same_run,
    dedup_argv,
    run_rows,
    staged,
    step_stats,
)
from tests.execution.jobs.staged.test_datasets import pickle_frame


@pytest.fixture(scope="module")
def staged_run(corpus, tmp_path_factory) -> pathlib.Path:
    """Every step staged on two workers."""
    output = tmp_path_factory.mktemp("staged") / "out"
    assert main(dedup_argv(corpus, output, *EVERY_STEP, *staged(2))) == 0
    return output


def test_staged_every_step_gives_the_one_pipeline_run(staged_run, one_pipeline):
    rows = run_rows(one_pipeline)
    # The input's copies are found by their steps, so the comparison below covers every step's work.
    removed = {part: len(found) for part, found in rows.items() if part.startswith("excluded/")}
    assert removed == {"excluded/exact": 20, "excluded/url": 12, "excluded/minhash": removed["excluded/minhash"]}
    # Most 2 % near copies stay above the threshold; each pairs with its original.
    assert removed["excluded/minhash"] >= 10
    pairs = [sorted((row["id"], row["kept_id"])) for row in map(json.loads, rows["clusters/minhash"])]
    assert len(pairs) == removed["excluded/minhash"] and all(near == f"{kept}-near" for kept, near in pairs)
    assert {part for part in rows if part.startswith("clusters/")} == {
        "clusters/exact",
        "clusters/url",
        "clusters/minhash",
    }
    steps = json.loads((one_pipeline / "stats.json").read_text())["steps"]
    assert steps["sentence"]["counters"]["spans_removed"] > 0
    assert "unconverged" not in steps["minhash"]["counters"]
    excluded = [json.loads(row)["metadata"] for part in removed for row in rows[part]]
    assert all(metadata["filter_reason"] and metadata["duplicate_of"] for metadata in excluded)
    assert_same_run(staged_run, one_pipeline)
    stats = json.loads((staged_run / "stats.json").read_text())
    assert stats["staged"] == {"partitions": stats["staged"]["partitions"], "workers": 2, "resumed": False}
    assert stats["staged"]["partitions"] >= 4
    # The options it was given, as the one pipeline's stats record them (one builder of stats.json for both).
    one = json.loads((one_pipeline / "stats.json").read_text())["options"]
    assert stats["options"]["input"] == one["input"] and stats["options"]["output"] == str(staged_run)
    # The job directory goes once the run is published; the folder holds what a one-pipeline run's holds.
    assert sorted(entry.name for entry in staged_run.iterdir()) == sorted(
        entry.name for entry in one_pipeline.iterdir()
    )
    assert not (staged_run / JOB_DIR).exists()


@pytest.mark.slow
def test_one_worker_gives_what_two_do(corpus, one_pipeline_exact, tmp_path):
    output = tmp_path / "out"
    assert main(dedup_argv(corpus, output, *EXACT, *staged(1))) == 0
    assert len(run_rows(output)["excluded/exact"]) == 20
    assert_same_run(output, one_pipeline_exact)
    stats = json.loads((output / "stats.json").read_text())
    assert stats["staged"]["partitions"] >= 4 and stats["staged"]["workers"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("fpr", ["0.01", "0"], ids=["filter", "every-shingle"])
def test_staged_bloom_gives_the_one_pipeline_run(corpus, tmp_path, fpr):
    bloom = ["--dedup", "bloom", "--bloom_expected_shingles", "100000", "--bloom_fpr", fpr]
    one, parts = tmp_path / "one", tmp_path / "staged"
    assert main(dedup_argv(corpus, one, *bloom)) == 0
    # 3 partitions: bloom's 16 slices become 18, 6 per partition.
    assert main(dedup_argv(corpus, parts, *bloom, "--staged", "--workers", "2", "--memory", "14MiB")) == 0
    assert json.loads((parts / "stats.json").read_text())["staged"]["partitions"] == 3
    # The 20 exact copies and 7 of the 2 % near copies (a word replaced breaks 13 shingles).
    removed = sorted(json.loads(row)["id"] for row in run_rows(one)["excluded/bloom"])
    assert len(removed) == 27 and sum(name.endswith("-exact") for name in removed) == 20
    if fpr == "0":
        assert_same_run(parts, one)
        return
    # Over partitions no filter is built: every shingle is shuffled, as in one pipeline without a filter, for
    # the same documents.
    assert run_rows(parts) == run_rows(one)
    unfiltered = tmp_path / "unfiltered"
    assert main(dedup_argv(corpus, unfiltered, *bloom[:-1], "0")) == 0
    assert step_stats(parts) == step_stats(unfiltered)
    filtered = step_stats(one)["bloom"]["counters"]
    assert filtered["filter_bits"] > 0 and filtered["candidates"] < step_stats(parts)["bloom"]["counters"]["candidates"]


def test_a_staged_read_counts_each_input_file_once(staged_run, one_pipeline):
    counters = [
        json.loads((run / "stats.json").read_text())["steps"]["read"]["counters"] for run in (staged_run, one_pipeline)
    ]
    assert counters[0]["files"] == counters[1]["files"] == 2


@pytest.mark.slow
def test_a_killed_staged_run_goes_on_from_the_tasks_done(corpus, one_pipeline_exact, tmp_path):
    output = tmp_path / "out"
    argv = dedup_argv(corpus, output, *EXACT, *staged(2))
    job = output / JOB_DIR
    with open(tmp_path / "killed.log", "wb") as log:
        run = subprocess.Popen(
            [sys.executable, "-m", "beamtrove", *argv], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(lambda: run.poll() is not None or len(list((job / "done").glob("*.json"))) >= 4, what="4 done tasks")
        assert run.poll() is None, "the run ended before it was killed"
        workers = children_of(run.pid)
        assert workers
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    # Its workers die with it: none may go on writing into the job.
    wait_for(lambda: not running(workers), timeout=30, what="the workers to end")
    done_before = {path.stem for path in (job / "done").glob("*.json")}
    assert len(done_before) >= 4
    assert not (output / "documents").exists() and (job / "manifest.json").is_file()
    # A task that failed for good (its worker's records, as it leaves them) is tried again by the rerun.
    failed_task = "write-00000"
    (job / "failed" / f"{failed_task}.json").write_text(json.dumps({"task": failed_task, "host": "h", "error": "x"}))
    rerun = beamtrove(*argv)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "going on with the staged job of an earlier run" in rerun.stderr
    assert f"trying again the tasks that failed or were damaged: {failed_task}" in rerun.stderr
    redone = {line.split(":", 1)[0] for line in rerun.stdout.splitlines() if ": attempt " in line}
    assert redone and not redone & done_before
    assert json.loads((output / "stats.json").read_text())["staged"]["resumed"] is True
    assert_same_run(output, one_pipeline_exact)
    assert not job.exists()


@pytest.fixture(scope="module")
def elastic_job(corpus, tmp_path_factory) -> pathlib.Path:
    """A staged elastic job of exact dedup over 3 partitions, done by two workers on two hosts at once."""
    job = tmp_path_factory.mktemp("elastic") / "job"
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(corpus), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "3", "--", *EXACT]) == 0
    workers = [start_worker(job, host) for host in ("node-a", "node-b")]
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0]
    return job


def test_elastic_workers_on_two_hosts_merge_to_the_one_pipeline_run(elastic_job, one_pipeline_exact, tmp_path, capsys):
    job = str(elastic_job)
    capsys.readouterr()
    assert main(["elastic", "status", "--job-dir", job]) == 0
    lines = capsys.readouterr().out.splitlines()
    tasks = re.match(r"(\d+) tasks in (\d+) stages: (\d+) done, 0 running", lines[0])
    assert tasks and tasks[1] == tasks[3] and len(lines) == 1 + int(tasks[2])
    # A line per stage, all done: one task per partition (3), or one for the whole of it (the write task).
    names, counts = zip(*(line.split(None, 1) for line in lines[1:]), strict=True)
    assert names[0].startswith("read") and names[-1].endswith("write") and any("exact" in name for name in names)
    assert (counts[0], counts[-1]) == ("3 tasks: 3 done", "1 tasks: 1 done")
    assert set(counts) <= {"3 tasks: 3 done", "1 tasks: 1 done"}
    assert main(["elastic", "verify", "--job-dir", job, "--expect-hosts", "2"]) == 0
    out = capsys.readouterr().out
    assert "completed by 2 host(s): node-a (" in out and "node-b (" in out
    merged = tmp_path / "merged"
    assert main(["elastic", "merge", "--job-dir", job, "--output", str(merged)]) == 0
    assert_same_run(merged, one_pipeline_exact)
    stats = json.loads((merged / "stats.json").read_text())
    assert stats["staged"]["partitions"] == 3 and sorted(stats["elastic"]["hosts"]) == ["node-a", "node-b"]


@pytest.mark.slow
def test_one_elastic_worker_command_forks_its_processes_which_merge_to_the_one_pipeline_run(
    corpus, one_pipeline_exact, tmp_path
):
    job = tmp_path / "job"
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(corpus), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "3", "--", *EXACT]) == 0
    command = start_worker(job, "node-a", "--processes", "2")
    try:

        def both_workers() -> list[int] | str | None:
            found = children_of(command.pid)
            return found if len(found) == 2 else "ended" if command.poll() is not None else None

        workers = wait_for(both_workers, what="the 2 workers")
        assert workers != "ended", "the command ended before its 2 workers were seen"
        # Forked once the command had opened the job: they share its interpreter's pages, Beam's modules among them.
        for worker in workers:
            assert (pathlib.Path(f"/proc/{worker}/cmdline").read_bytes()) == (
                pathlib.Path(f"/proc/{command.pid}/cmdline").read_bytes()
            )
            assert shared_bytes(worker) > 64 << 20
        assert command.wait(timeout=300) == 0
    finally:
        command.kill()
    done = [json.loads(path.read_text()) for path in (job / "done").glob("*.json")]
    assert {record["pid"] for record in done} <= set(workers)
    assert {record["host"] for record in done} == {"node-a"}
    merged = tmp_path / "merged"
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(merged)]) == 0
    assert_same_run(merged, one_pipeline_exact)


@pytest.mark.parametrize(
    ("processes", "message"),
    [("0", "--processes 0: give 1 or more worker processes"), ("4096", "--processes 4096: this machine gives")],
)
def test_elastic_worker_refuses_a_process_count_it_cannot_run(elastic_job, capsys, processes, message):
    assert main(["elastic", "worker", "--job-dir", str(elastic_job), "--processes", processes]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_compressed_input_of_fewer_files_than_partitions_is_only_dealt_out_by_its_read(corpus, tmp_path, capsys):
    # A compressed file is read whole by one task: the work after the read goes to every partition's task instead.
    compressed = tmp_path / "compressed"
    compressed.mkdir()
    for path in corpus.glob("*.jsonl"):
        (compressed / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
    job = tmp_path / "job"
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(compressed), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "3", "--", *EXACT]) == 0
    assert run_worker(job, host="node-a", echo=lambda line: None) == 0
    capsys.readouterr()
    main(["elastic", "status", "--job-dir", str(job)])
    stages = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()[1:]]
    assert stages[:2] == [["read", "2 tasks: 2 done"], ["shared_ids-IdAndOrigin+exact-Key", "3 tasks: 3 done"]]
    merged, one = tmp_path / "merged", tmp_path / "one"
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(merged)]) == 0
    assert main(dedup_argv(compressed, one, *EXACT)) == 0
    assert_same_run(merged, one)


def test_elastic_retry_redoes_a_partition_file_verify_finds_changed(elastic_job, one_pipeline_exact, tmp_path, capsys):
    # A copy: the job the other elastic test reads stays intact.
    job = tmp_path / "job"
    shutil.copytree(elastic_job, job)
    damaged = next(path for path in sorted(job.glob("attempts/*/*/data/**/*.rec")) if path.stat().st_size > 16)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))
    task = damaged.relative_to(job / "attempts").parts[0]
    capsys.readouterr()
    assert main(["elastic", "verify", "--job-dir", str(job)]) == 2
    assert f"damaged: {task}: {damaged} does not have the SHA-256 its record gives" in capsys.readouterr().out
    assert main(["elastic", "retry", "--job-dir", str(job), "--all-damaged"]) == 0
    assert capsys.readouterr().out.strip() == f"re-queued 1 task(s): {task}"
    assert start_worker(job, "node-c").wait(timeout=300) == 0
    assert main(["elastic", "verify", "--job-dir", str(job)]) == 0
    merged = tmp_path / "merged"
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(merged)]) == 0
    assert_same_run(merged, one_pipeline_exact)


def test_the_files_laid_out_for_the_run_are_verified_before_a_merge(elastic_job, one_pipeline_exact, tmp_path, capsys):
    job = tmp_path / "job"
    shutil.copytree(elastic_job, job)
    # The write task's documents cut to their first rows, as by a disk that filled up.
    (documents,) = job.glob("attempts/write-*/*/output/documents/*.jsonl.gz")
    documents.write_bytes(documents.read_bytes()[:200])
    capsys.readouterr()
    assert main(["elastic", "verify", "--job-dir", str(job)]) == 2
    assert f"damaged: write-00000: {documents} is 200 B, its record says " in capsys.readouterr().out
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert "Refusing to merge damaged task outputs" in err and f"\n  write-00000: {documents} is 200 B" in err
    assert not (tmp_path / "refused").exists()
    assert main(["elastic", "retry", "--job-dir", str(job), "--all-damaged"]) == 0
    assert start_worker(job, "node-d").wait(timeout=300) == 0
    merged = tmp_path / "merged"
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(merged)]) == 0
    assert_same_run(merged, one_pipeline_exact)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--runner", "PrismRunner"],
            "beamtrove: error: The tasks of --staged runs run on local DirectRunners, not PrismRunner: drop --runner, "
            "or drop --staged to run the pipeline on that runner in one piece.",
        ),
        (
            ["--limit", "10"],
            "beamtrove: error: --limit counts documents across the whole input, of which each task of --staged runs "
            "sees a part: drop it.",
        ),
        # Only the pipelines of per-document steps resume by their output; a staged run resumes by its tasks.
        (["--resumable"], "beamtrove: error: --resumable is an option of"),
        (["--summary_stats", "doc"], "beamtrove: error: --staged runs do not compute --summary_stats yet: drop it"),
    ],
)
def test_staged_refuses_what_it_cannot_do_before_running(corpus, tmp_path, capsys, options, message):
    output = tmp_path / "out"
    assert main(dedup_argv(corpus, output, *EXACT, "--staged", *options)) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
    assert not output.exists()


def test_staged_refuses_a_global_step_without_a_staged_form(corpus, tmp_path, capsys, monkeypatch):
    # Every dedup step has a staged form: one without stands for a global step added before its stages are.
    class _Unstaged(beam.PTransform):
        step = "exact"

        def expand(self, documents):
            return documents

    monkeypatch.setattr(dedup_pipeline, "ExactDedup", lambda **_: _Unstaged())
    output = tmp_path / "out"
    assert main(dedup_argv(corpus, output, *EXACT, *staged(2))) == 2
    assert capsys.readouterr().err.splitlines() == [
        "beamtrove: error: The dedup pipeline's exact has no staged form yet, so it cannot run as staged tasks "
        "(--staged, or an elastic job): run it in one piece, with `beamtrove run dedup` without --staged."
    ]
    assert not output.exists()


@pytest.mark.slow
@pytest.mark.slurm
def test_a_slurm_array_runs_a_staged_job_to_the_one_pipeline_run(slurm, corpus, one_pipeline_exact, tmp_path):
    job = tmp_path / "job"
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(corpus), "--job-dir", str(job)]
    prepared = beamtrove_here(*prepare, "--num-shards", "3", "--", *EXACT)
    assert prepared.returncode == 0, prepared.stderr
    logs = run_worker_array(job, tmp_path)
    assert len(logs) == 2
    for log in logs:
        assert "finished after running" in log.read_text(), log.read_text()[-2000:]
    merged = tmp_path / "merged"
    assert beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(merged)).returncode == 0
    assert run_rows(merged) == run_rows(one_pipeline_exact)
    assert step_stats(merged) == step_stats(one_pipeline_exact)


def test_a_partition_file_rewritten_as_a_pickle_runs_no_code_on_the_workers(elastic_job, tmp_path):
    # Whoever can write to a job directory on a shared file system can rewrite a done task's partition file, and
    # its done record to match: the workers that read it must not run what it holds.
    job = tmp_path / "job"
    shutil.copytree(elastic_job, job)
    marker = tmp_path / "ran"
    rewritten = next(path for path in sorted(job.glob("attempts/read*/*/data/**/*.rec")) if "keyed" in str(path))
    rewritten.write_bytes(pickle_frame(marker))
    done_path = job / "done" / f"{rewritten.relative_to(job / 'attempts').parts[0]}.json"
    done = json.loads(done_path.read_text())
    for files in done["outputs"].values():
        for entries in files.values():
            for entry in entries:
                if job / done["attempt"] / "data" / entry["path"] == rewritten:
                    entry.update(records=1, bytes=rewritten.stat().st_size, sha256=file_sha256(rewritten))
    done_path.write_text(json.dumps(done))
    # And the listing of the sealed read stage, which the tasks after it read.
    for listing in job.glob("stages/read*/**/*.json"):
        listed = json.loads(listing.read_text())
        for entries in listed.values() if isinstance(listed, dict) and "token" not in listed else ():
            for entry in entries:
                if job / entry["path"] == rewritten:
                    entry.update(records=1, bytes=rewritten.stat().st_size, sha256=file_sha256(rewritten))
        listing.write_text(json.dumps(listed))
    # The stages after the read are still to run.
    for later in (job / "done").glob("*.json"):
        if not later.name.startswith("read"):
            later.unlink()
    for later in (job / "stages").iterdir():
        if not later.name.startswith("read"):
            shutil.rmtree(later)
    start_worker(job, "node-d").wait(timeout=300)
    assert not marker.exists()
    log = (tmp_path / "worker-node-d.log").read_text()
    assert f"{rewritten} holds no record at byte 0 (unknown tag 128): the file was changed or damaged." in log


def test_minhash_components_run_a_partition_of_the_links_per_task_and_no_pipeline_after_convergence(
    corpus, tmp_path, capsys, monkeypatch
):
    minhash = ["--dedup", "minhash", "--cluster_map", "--minhash_threshold", "0.8"]
    one = tmp_path / "one"
    assert main(dedup_argv(corpus, one, *minhash)) == 0
    job = tmp_path / "job"
    prepare = ["elastic", "prepare", "--pipeline", "dedup", "--input", str(corpus), "--job-dir", str(job)]
    assert main([*prepare, "--num-shards", "3", "--", *minhash]) == 0
    built, runs_task = [], staged_kind.run_task

    def run_task(plan, stage, index, files, attempt_dir):
        built.append(task_id(stage, index))
        return runs_task(plan, stage, index, files, attempt_dir)

    monkeypatch.setattr(staged_kind, "run_task", run_task)
    assert run_worker(job, host="node-a", echo=lambda line: None) == 0
    merged = tmp_path / "merged"
    assert main(["elastic", "merge", "--job-dir", str(job), "--output", str(merged)]) == 0
    assert_same_run(merged, one)
    # The 20 near copies pair with their originals: stars from the start, so no round moves a link.
    assert not any(name.startswith("changed.round_") for name in step_stats(one)["minhash"]["counters"])
    capsys.readouterr()
    assert main(["elastic", "status", "--job-dir", str(job)]) == 0
    stages = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines()[1:])
    components = [name for name in stages if re.search(r"-minhash-(Round\d\d|LargerFirst|AssignToSmallest)", name)]
    # Each of the 30 rounds' two stages, and those after them, is a task per partition: none holds every link.
    assert len(components) == 2 * 30 + 2 and {stages[name] for name in components} == {"3 tasks: 3 done"}
    # Round 1 changes nothing and round 2 sets every link aside: the 57 stages after it read nothing and build no
    # pipeline, their tasks done with no files and no counters.
    rounds = [task.split("-minhash-")[1][:-6] for task in built if "-minhash-Round" in task]
    assert sorted(set(rounds)) == ["Round01LargeStar", "Round01SmallStar", "Round02LargeStar"], rounds
    idle = [json.loads(path.read_text()) for path in job.glob("done/*-minhash-Round*.json") if path.stem not in built]
    assert len(idle) == 3 * 57 and all(record["outputs"] == {} and record["stats"] == {} for record in idle)
