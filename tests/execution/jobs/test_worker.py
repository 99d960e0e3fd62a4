"""Worker processes on one job directory: races, SIGKILL takeover, retries, and what merge and verify catch.

The tests drive ``beamtrove elastic`` workers in separate processes (one calls ``run_worker`` in its own) and
compare the merged output with one ``beamtrove run`` of the same pipeline over the whole input.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import threading

import pytest

from beamtrove.execution.jobs import JobDir
from beamtrove.execution.jobs.jobdir import ATTEMPT_FILE, MANIFEST, MANIFEST_CHECKSUM, sha256_of
from beamtrove.execution.jobs.worker import run_worker
from tests.conftest import beamtrove_here, jsonl_lines, wait_for
from tests.execution.jobs.conftest import LID_MODEL, fineweb_assets, process_state, single_run_lines, start_worker


def _prepare(job: pathlib.Path, pipeline: str, inputs: str, shards: int, *options: str, args=()) -> None:
    result = beamtrove_here(
        "elastic", "prepare", "--pipeline", pipeline, "--input", inputs, "--job-dir", str(job),
        "--num-shards", str(shards), *options, "--", *args,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def _merge(job: pathlib.Path, output: pathlib.Path) -> list[bytes]:
    """The documents of the run folder merge writes, in the order of its parts."""
    result = beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(output))
    assert result.returncode == 0, result.stderr[-3000:]
    return jsonl_lines(sorted((output / "documents").glob("part-*.jsonl.gz")))


def _attempts(job: pathlib.Path) -> dict[str, list[dict]]:
    return {
        shard.name: [json.loads((a / ATTEMPT_FILE).read_text()) for a in sorted(shard.iterdir())]
        for shard in sorted((job / "attempts").iterdir())
    }


def _ids_in_shard_order(job: pathlib.Path, merged: list[bytes]) -> None:
    """The merged documents are the shards in manifest order, each sorted by document id."""
    position = 0
    for shard in JobDir(job).manifest()["shards"]:
        count = json.loads((job / "done" / f"{shard['id']}.json").read_text())["records"]
        ids = [json.loads(line)["id"] for line in merged[position : position + count]]
        assert ids == sorted(ids)
        position += count
    assert position == len(merged)


@pytest.mark.slow
def test_racing_workers_do_every_shard_once_and_merge_to_the_single_run(review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    _prepare(job, "convert", str(review_jsonl), 6)
    # Looking again every half second, not every 10 s: the last shard's other workers end as soon as it is done.
    workers = [start_worker(job, f"node{k}", "--poll-interval", "0.5") for k in range(3)]
    assert [worker.wait(timeout=600) for worker in workers] == [0, 0, 0]
    attempts = _attempts(job)
    assert sorted(attempts) == [f"shard-{k:05d}" for k in range(6)]
    assert all(len(runs) == 1 and runs[0]["status"] == "succeeded" for runs in attempts.values())
    # A worker of the command line forks each attempt from itself rather than starting Python and Beam again.
    assert all(runs[0]["forked"] for runs in attempts.values())
    # Each attempt runs in memory, in that one process: a node's workers share its cores.
    assert all(runs[0]["command"][-5:-4] == ["--direct_running_mode=in_memory"] for runs in attempts.values())
    assert len(list((job / "done").glob("*.json"))) == 6
    assert not list((job / "locks").iterdir())
    merged = _merge(job, tmp_path / "merged")
    assert sorted(merged) == single_convert and len(merged) == 600
    _ids_in_shard_order(job, merged)
    stats = json.loads((tmp_path / "merged" / "stats.json").read_text())
    assert stats["elastic"]["documents"] == 600 and stats["elastic"]["tasks"] == 6
    # Every record read is accounted for across the shards, the malformed row included.
    assert stats["steps"]["read"]["counters"]["in"] == 601
    assert stats["steps"]["read"]["counters"]["errors.malformed_json"] == 1
    status = beamtrove_here("elastic", "status", "--job-dir", str(job), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["counts"]["done"] == 6
    again = beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "merged"))
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_a_worker_in_a_program_with_threads_starts_attempts_in_new_interpreters(review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    _prepare(job, "convert", str(review_jsonl), 1)
    # A fork would copy whatever lock another thread holds: with threads, each attempt is a new interpreter.
    statuses = []
    caller = threading.Thread(target=lambda: statuses.append(run_worker(job, host="threaded", echo=lambda line: None)))
    caller.start()
    caller.join(timeout=600)
    assert statuses == [0]
    attempts = _attempts(job)
    assert [(runs[0]["status"], runs[0]["forked"]) for runs in attempts.values()] == [("succeeded", False)]
    assert sorted(_merge(job, tmp_path / "merged")) == single_convert


@pytest.fixture(scope="module")
def single_fineweb(warc_set, tmp_path_factory) -> tuple[list[bytes], dict]:
    output = tmp_path_factory.mktemp("single-fineweb")
    lines = single_run_lines("fineweb", str(warc_set / "*.warc.gz"), output, *fineweb_assets())
    return lines, json.loads((output / "stats.json").read_text())["steps"]


@pytest.mark.slow
def test_fineweb_shards_merge_to_the_single_run(warc_set, single_fineweb, tmp_path):
    single, single_stats = single_fineweb
    job = tmp_path / "job"
    _prepare(job, "fineweb", str(warc_set / "*.warc.gz"), 3, args=fineweb_assets())
    workers = [start_worker(job, f"node{k}", "--poll-interval", "0.5") for k in range(2)]
    assert [worker.wait(timeout=900) for worker in workers] == [0, 0]
    merged = _merge(job, tmp_path / "merged")
    assert len(merged) > 20 and sorted(merged) == single
    # Whole WARC files per shard: every step's counters add up to the single run's, input files included;
    # only the writers made more (smaller) files.
    merged_stats = json.loads((tmp_path / "merged" / "stats.json").read_text())["steps"]
    assert _without_written_files(merged_stats) == _without_written_files(single_stats)
    assert merged_stats["write_documents"]["counters"]["files"] == 3


def _without_written_files(steps: dict) -> dict:
    return {
        step: {
            k: v
            for k, v in entry["counters"].items()
            if not (step.lower().startswith("write") and k in ("files", "bytes"))
        }
        for step, entry in steps.items()
    }


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_taken_over_after_the_lock_timeout(review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    _prepare(job, "convert", str(review_jsonl), 3, "--lock-timeout", "3")
    victim = start_worker(job, "doomed")
    attempt = wait_for(
        lambda: next((job / "attempts").glob("*/*/attempt.json"), None), what="the first attempt to start"
    )
    child = wait_for(lambda: json.loads(attempt.read_text()).get("child_pid"), what="the pipeline process")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # The kernel stops the orphaned pipeline too (PR_SET_PDEATHSIG).
    wait_for(lambda: process_state(child) in (None, "Z"), timeout=30, what="the pipeline to die with its worker")
    shard = attempt.parent.parent.name
    assert not (job / "done" / f"{shard}.json").exists()
    rescuer = start_worker(job, "rescuer")
    assert rescuer.wait(timeout=600) == 0
    runs = _attempts(job)[shard]
    assert [run["status"] for run in runs] == ["running", "succeeded"]
    assert [run["host"] for run in runs] == ["doomed", "rescuer"]
    assert list((job / "history" / shard).glob("*/*.lock")), "the stale lock is archived"
    assert "taking over" in (tmp_path / "worker-rescuer.log").read_text()
    assert sorted(_merge(job, tmp_path / "merged")) == single_convert


@pytest.mark.slow
def test_sigterm_frees_the_shard_at_once_without_spending_an_attempt(review_jsonl, single_convert, tmp_path):
    job = tmp_path / "job"
    _prepare(job, "convert", str(review_jsonl), 2, "--max-retries", "0")
    worker = start_worker(job, "preempted")
    attempt = wait_for(lambda: next((job / "attempts").glob("*/*/attempt.json"), None), what="an attempt")
    wait_for(lambda: json.loads(attempt.read_text()).get("child_pid"), what="the pipeline process")
    worker.send_signal(signal.SIGTERM)
    # As a shell reports a process SIGTERM ended: 128 + 15.
    assert worker.wait(timeout=60) == 143
    assert (
        "stopped by SIGTERM; the shard it was running is free for other workers"
        in (tmp_path / "worker-preempted.log").read_text()
    )
    assert json.loads(attempt.read_text())["status"] == "interrupted"
    assert not list((job / "locks").glob("*.lock"))
    # With no retries allowed, the interrupted attempt must not count as the shard's one attempt.
    assert start_worker(job, "next").wait(timeout=600) == 0
    assert sorted(_merge(job, tmp_path / "merged")) == single_convert


@pytest.mark.slow
def test_failures_exhaust_retries_then_retry_requeues_and_a_worker_completes(warc_set, single_fineweb, tmp_path):
    model = tmp_path / "lid.176.ftz"
    shutil.copy(LID_MODEL, model)
    args = ["--lid_model", str(model), *fineweb_assets()[2:]]
    job = tmp_path / "job"
    _prepare(job, "fineweb", str(warc_set / "*.warc.gz"), 1, "--max-retries", "1", args=args)
    model.unlink()  # the model vanishes from this "node" after prepare: every attempt fails to start
    worker = start_worker(job, "node0")
    assert worker.wait(timeout=600) == 2
    runs = _attempts(job)
    assert {shard: [run["status"] for run in r] for shard, r in runs.items()} == {"shard-00000": ["failed", "failed"]}
    assert "lid.176.ftz" in runs["shard-00000"][-1]["error"]
    failed = json.loads((job / "failed" / "shard-00000.json").read_text())
    assert failed["attempts"] == 2 and "lid.176.ftz" in failed["error"]
    status = beamtrove_here("elastic", "status", "--job-dir", str(job))
    assert status.returncode == 1 and "1 failed" in status.stdout
    refused = beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "m"))
    assert refused.returncode == 2 and "failed: shard-00000)" in refused.stderr
    assert beamtrove_here("elastic", "retry", "--job-dir", str(job), "--shard-id", "shard-00009").returncode == 2

    shutil.copy(LID_MODEL, model)
    retry = beamtrove_here("elastic", "retry", "--job-dir", str(job), "--all-failed")
    assert retry.returncode == 0 and "re-queued 1" in retry.stdout
    assert not list((job / "failed").iterdir()) and not list((job / "attempts").iterdir())
    # The failure record and the attempts directory, archived together.
    assert sorted(p.name for p in (job / "history").glob("shard-*/*/*")) == ["shard-00000", "shard-00000.json"]
    assert start_worker(job, "node0").wait(timeout=900) == 0
    assert sorted(_merge(job, tmp_path / "merged")) == single_fineweb[0]


@pytest.fixture(scope="module")
def finished_job(review_jsonl, tmp_path_factory) -> pathlib.Path:
    """A job of two shards, done by two simulated hosts."""
    job = tmp_path_factory.mktemp("finished") / "job"
    _prepare(job, "convert", str(review_jsonl), 2)
    assert start_worker(job, "alpha", "--max-shards", "1").wait(timeout=600) == 0
    verify = beamtrove_here("elastic", "verify", "--job-dir", str(job))
    assert verify.returncode == 1 and "1 pending or running" in verify.stdout
    assert start_worker(job, "beta").wait(timeout=600) == 0
    return job


def test_verify_counts_the_hosts_that_completed_shards(finished_job):
    ok = beamtrove_here("elastic", "verify", "--job-dir", str(finished_job), "--expect-hosts", "2")
    assert ok.returncode == 0, ok.stdout
    assert "600 documents in done tasks, completed by 2 host(s): alpha (1), beta (1)" in ok.stdout
    too_many = beamtrove_here("elastic", "verify", "--job-dir", str(finished_job), "--expect-hosts", "3")
    assert too_many.returncode == 1 and "at least 3 hosts" in too_many.stdout


def test_merge_catches_a_corrupted_or_miscounted_shard_output(finished_job, tmp_path):
    finished_job = pathlib.Path(shutil.copytree(finished_job, tmp_path / "job"))
    done_path = finished_job / "done" / "shard-00001.json"
    done = json.loads(done_path.read_text())
    output = finished_job / done["output"]
    pristine = output.read_bytes()
    damaged = bytearray(pristine)
    damaged[len(damaged) // 2] ^= 0xFF
    output.write_bytes(bytes(damaged))
    merge = beamtrove_here("elastic", "merge", "--job-dir", str(finished_job), "--output", str(tmp_path / "m"))
    assert merge.returncode == 2 and f"shard-00001: {output} does not have the SHA-256 its record gives" in merge.stderr
    assert not (tmp_path / "m").exists()
    assert beamtrove_here("elastic", "verify", "--job-dir", str(finished_job)).returncode == 2
    output.write_bytes(pristine)
    done_path.write_text(json.dumps({**done, "records": done["records"] + 1}))
    merge = beamtrove_here("elastic", "merge", "--job-dir", str(finished_job), "--output", str(tmp_path / "m"))
    assert merge.returncode == 2 and f"holds {done['records']} documents" in merge.stderr


def _copy_of(job: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(job, tmp_path / "job"))


def _output_of(job: pathlib.Path, shard_id: str) -> pathlib.Path:
    return job / json.loads((job / "done" / f"{shard_id}.json").read_text())["output"]


def _status(job: pathlib.Path) -> dict:
    result = beamtrove_here("elastic", "status", "--job-dir", str(job), "--json")
    assert result.returncode in (0, 1), result.stderr[-3000:]
    return {shard["id"]: shard for shard in json.loads(result.stdout)["tasks"]}


@pytest.mark.slow
def test_a_done_shard_whose_output_was_deleted_is_damaged_then_retried_and_redone(
    finished_job, single_convert, tmp_path
):
    job = _copy_of(finished_job, tmp_path)
    before = _merge(job, tmp_path / "before")
    output = _output_of(job, "shard-00001")
    output.unlink()
    status = beamtrove_here("elastic", "status", "--job-dir", str(job))
    assert status.returncode == 1
    assert status.stdout.startswith(
        "2 tasks: 1 done, 0 running, 0 stale, 0 pending, 0 failed, 1 damaged · 1/2 tasks done"
    )
    assert "shard-00001  damaged  attempts 1  beta:" in status.stdout
    assert f": {output} is missing" in status.stdout
    verify = beamtrove_here("elastic", "verify", "--job-dir", str(job))
    assert verify.returncode == 2 and f"damaged: shard-00001: {output} is missing" in verify.stdout
    retry = beamtrove_here("elastic", "retry", "--job-dir", str(job), "--shard-id", "shard-00001")
    assert retry.returncode == 0 and retry.stdout.strip() == "re-queued 1 task(s): shard-00001"
    # The done record and the attempt that made the lost output, archived together.
    assert sorted(p.name for p in (job / "history").glob("shard-00001/*/*")) == ["shard-00001", "shard-00001.json"]
    assert _status(job)["shard-00001"]["state"] == "pending"
    assert start_worker(job, "gamma").wait(timeout=600) == 0
    assert _status(job)["shard-00001"]["owner"].startswith("gamma:")
    assert beamtrove_here("elastic", "verify", "--job-dir", str(job)).returncode == 0
    after = _merge(job, tmp_path / "after")
    assert after == before and sorted(after) == single_convert


def test_a_truncated_or_overwritten_done_output_is_damaged(finished_job, tmp_path):
    job = _copy_of(finished_job, tmp_path)
    output = _output_of(job, "shard-00000")
    pristine = output.read_bytes()
    output.write_bytes(pristine[: len(pristine) // 2])
    shard = _status(job)["shard-00000"]
    size = len(pristine)
    assert (shard["state"], shard["damage"]) == ("damaged", f"{output} is {size // 2} B, its record says {size} B")
    output.write_bytes(pristine[::-1])
    shard = _status(job)["shard-00000"]
    hashed = f"{output} does not have the SHA-256 its record gives"
    assert (shard["state"], shard["damage"]) == ("damaged", hashed)
    verify = beamtrove_here("elastic", "verify", "--job-dir", str(job))
    assert verify.returncode == 2 and f"damaged: shard-00000: {hashed}" in verify.stdout
    output.write_bytes(pristine)
    assert _status(job)["shard-00000"]["state"] == "done"


def test_retry_all_damaged_requeues_every_damaged_shard_and_nothing_else(finished_job, tmp_path):
    job = _copy_of(finished_job, tmp_path)
    _output_of(job, "shard-00000").unlink()
    _output_of(job, "shard-00001").write_bytes(b"")
    retry = beamtrove_here("elastic", "retry", "--job-dir", str(job), "--all-damaged")
    assert retry.returncode == 0 and retry.stdout.strip() == "re-queued 2 task(s): shard-00000, shard-00001"
    assert {shard: entry["state"] for shard, entry in _status(job).items()} == {
        "shard-00000": "pending",
        "shard-00001": "pending",
    }
    assert not list((job / "done").iterdir()) and not list((job / "attempts").iterdir())
    again = beamtrove_here("elastic", "retry", "--job-dir", str(job), "--all-damaged")
    assert again.returncode == 2 and "Nothing to retry: no task is damaged." in again.stderr


def test_retry_refuses_a_done_shard_whose_output_is_intact(finished_job):
    retry = beamtrove_here("elastic", "retry", "--job-dir", str(finished_job), "--shard-id", "shard-00000")
    assert retry.returncode == 2
    assert "shard-00000 is done and its files are intact" in retry.stderr
    assert (finished_job / "done" / "shard-00000.json").exists()


def test_verify_reports_a_manifest_whose_shard_records_were_edited_with_a_recomputed_checksum(finished_job, tmp_path):
    job = _copy_of(finished_job, tmp_path)
    manifest = json.loads((job / MANIFEST).read_text())
    records = manifest["shards"][0]["records"]
    manifest["shards"][0]["records"] = records - 1
    data = json.dumps(manifest, indent=1).encode()
    (job / MANIFEST).write_bytes(data)
    (job / MANIFEST_CHECKSUM).write_text(f"{sha256_of(data)}  {MANIFEST}\n")
    assert beamtrove_here("elastic", "status", "--job-dir", str(job)).returncode == 0, "the edited manifest is accepted"
    verify = beamtrove_here("elastic", "verify", "--job-dir", str(job))
    assert verify.returncode == 2
    assert f"mismatch: shard-00000: the manifest says it holds {records - 1} records, its run read {records}" in (
        verify.stdout.splitlines()
    )
    merge = beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "m"))
    assert merge.returncode == 2 and "the manifest and the done records disagree" in merge.stderr


@pytest.mark.slow
def test_workers_refuse_a_tampered_manifest_or_changed_input(review_jsonl, tmp_path):
    inputs = tmp_path / "inputs"
    shutil.copytree(review_jsonl, inputs)
    job = tmp_path / "job"
    _prepare(job, "convert", str(inputs), 2)
    manifest = job / "manifest.json"
    original = manifest.read_bytes()
    manifest.write_bytes(original.replace(b'"max_retries": 2', b'"max_retries": 7'))
    assert start_worker(job, "w").wait(timeout=120) == 2
    assert "manifest was modified" in (tmp_path / "worker-w.log").read_text()
    manifest.write_bytes(original)

    changed = inputs / "reviews-0.jsonl"
    stat = changed.stat()
    data = changed.read_bytes()
    # Same size and time, other bytes: only the shard checksum can tell.
    changed.write_bytes(data.replace(b"the", b"THE", 1))
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert start_worker(job, "x").wait(timeout=300) == 2
    assert (
        "The bytes of the input of shard-00000 changed since the job was prepared"
        in (tmp_path / "worker-x.log").read_text()
    )
    changed.write_bytes(data + b"\n")
    assert start_worker(job, "y").wait(timeout=120) == 2
    assert "reviews-0.jsonl changed since prepare" in (tmp_path / "worker-y.log").read_text()
    assert not list((job / "done").iterdir())


def test_an_attempt_over_its_time_limit_is_stopped_and_counted_as_failed(warc_set, tmp_path):
    job = tmp_path / "job"
    # An attempt loads the UT1 blocklist and lid.176, then extracts 150 pages: seconds, never 0.5 s.
    options = ("--attempt-timeout", "0.5", "--max-retries", "1")
    _prepare(job, "fineweb", str(warc_set / "*.warc.gz"), 1, *options, args=fineweb_assets())
    assert start_worker(job, "slow").wait(timeout=120) == 2
    runs = _attempts(job)["shard-00000"]
    assert [run["status"] for run in runs] == ["failed", "failed"]
    assert all("stopped after the attempt timeout of 0.5 s" in run["error"] for run in runs)
    assert all(process_state(run["child_pid"]) in (None, "Z") for run in runs)
    assert json.loads((job / "failed" / "shard-00000.json").read_text())["attempts"] == 2


@pytest.mark.slow
def test_a_done_record_replaced_by_garbage_is_damaged_named_with_its_retry_and_redone(
    finished_job, single_convert, tmp_path
):
    job = _copy_of(finished_job, tmp_path)
    before = _merge(job, tmp_path / "before")
    record = job / "done" / "shard-00001.json"
    # Garbage of a real kind: the bytes of a shard output, gzip.
    record.write_bytes(_output_of(job, "shard-00000").read_bytes())
    hint = (
        f"{record} is damaged (not JSON): `beamtrove elastic retry --job-dir {job} --task shard-00001` "
        "archives it and runs the task again"
    )
    status = beamtrove_here("elastic", "status", "--job-dir", str(job))
    assert (status.returncode, status.stderr) == (1, "")
    assert status.stdout.splitlines() == [
        "2 tasks: 1 done, 0 running, 0 stale, 0 pending, 0 failed, 1 damaged · 1/2 tasks done",
        f"  shard-00001  damaged  attempts 1  {hint}",
    ]
    shard = _status(job)["shard-00001"]
    assert (shard["state"], shard["damage"], shard["record"]) == ("damaged", "not JSON", "done/shard-00001.json")
    # A worker leaves it to the user and says so, rather than waiting or reporting the job finished.
    worker = start_worker(job, "gamma")
    assert worker.wait(timeout=600) == 2
    assert (tmp_path / "worker-gamma.log").read_text().splitlines()[-1] == hint
    verify = beamtrove_here("elastic", "verify", "--job-dir", str(job))
    assert verify.returncode == 2 and f"damaged: {hint}" in verify.stdout.splitlines()
    merge = beamtrove_here("elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "merged"))
    assert merge.returncode == 2 and hint in merge.stderr and "Traceback" not in merge.stderr
    assert not (tmp_path / "merged").exists()

    retry = beamtrove_here("elastic", "retry", "--job-dir", str(job), "--shard-id", "shard-00001")
    assert retry.returncode == 0 and retry.stdout.strip() == "re-queued 1 task(s): shard-00001"
    assert start_worker(job, "gamma").wait(timeout=600) == 0
    assert beamtrove_here("elastic", "verify", "--job-dir", str(job)).returncode == 0
    after = _merge(job, tmp_path / "after")
    assert after == before and sorted(after) == single_convert


def test_a_model_replaced_after_prepare_is_refused_before_any_shard(warc_set, tmp_path):
    model = tmp_path / "lid.176.ftz"
    shutil.copy(LID_MODEL, model)
    job = tmp_path / "job"
    _prepare(job, "fineweb", str(warc_set / "*.warc.gz"), 2, args=["--lid_model", str(model), *fineweb_assets()[2:]])
    manifest = json.loads((job / "manifest.json").read_text())
    assert {"--lid_model", "--url_blocklist"} <= {entry["option"] for entry in manifest["reads"]}
    # Another model under the same name: shards run before and after would disagree.
    model.write_bytes(model.read_bytes() + b"\0")
    worker = start_worker(job, "node")
    assert worker.wait(timeout=120) == 2
    log = (tmp_path / "worker-node.log").read_text()
    assert f"--lid_model {model} holds other contents than when the job was prepared" in log
    assert "Traceback" not in log and not list((job / "attempts").iterdir())
