"""prepare: the shards it cuts, the manifest, and what it refuses."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import re
import threading

import pytest

from beamtrove.execution.jobs import ElasticError, JobDir, prepare_job
from beamtrove.execution.jobs.scan import shard_sha256
from tests.conftest import require
from tests.execution.jobs.conftest import LID_MODEL, fineweb_assets


@pytest.fixture
def reviews_job(review_jsonl, tmp_path):
    job = tmp_path / "job"
    manifest, created = prepare_job(job, "convert", [str(review_jsonl)], 7)
    assert created
    return job, manifest


def test_jsonl_shards_cover_every_byte_once_in_path_order(reviews_job, review_jsonl):
    _, manifest = reviews_job
    names = [entry["name"] for entry in manifest["inputs"]]
    assert names == ["reviews-0.jsonl", "reviews-1.jsonl", "reviews-2.jsonl"]
    # 600 reviews and the malformed row are records; blank lines are not.
    assert [entry["records"] for entry in manifest["inputs"]] == [200, 201, 200]
    assert sum(shard["records"] for shard in manifest["shards"]) == 601
    covered = {index: [] for index in range(3)}
    for shard in manifest["shards"]:
        assert shard["records"] > 0
        assert shard["bytes"] == sum(s["end"] - s["start"] for s in shard["segments"])
        for segment in shard["segments"]:
            covered[segment["input"]].append((segment["start"], segment["end"]))
    for index, ranges in covered.items():
        data = (review_jsonl / names[index]).read_bytes()
        assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        assert manifest["inputs"][index]["sha256"] == hashlib.sha256(data).hexdigest()
        lines = data.split(b"\n")
        for start, _ in ranges:
            # Ranges start on line starts, and first_index names the line there.
            assert start == 0 or data[start - 1 : start] == b"\n"
    for shard in manifest["shards"]:
        for segment in shard["segments"]:
            data = (review_jsonl / names[segment["input"]]).read_bytes()
            lines = data.split(b"\n")
            assert sum(len(line) + 1 for line in lines[: segment["first_index"]]) == segment["start"]
        assert shard_sha256(manifest, shard) == shard["sha256"]
    sizes = [shard["bytes"] for shard in manifest["shards"]]
    assert max(sizes) - min(sizes) < 2 * max(len(line) for line in lines)


def test_the_same_prepare_again_is_a_no_op(reviews_job, review_jsonl):
    job, manifest = reviews_job
    before = (job / "manifest.json").stat().st_mtime_ns
    again, created = prepare_job(job, "convert", [str(review_jsonl)], 7)
    assert not created and again == manifest
    assert (job / "manifest.json").stat().st_mtime_ns == before


def test_checking_the_configuration_leaves_no_thread_behind(review_jsonl, tmp_path):
    # Prepare builds the pipeline to check its options: the build locked a scratch output, and the heartbeat
    # renewing that lock went on beating in the process (a library's, a test runner's) after prepare returned.
    before = threading.active_count()
    prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 3)
    assert threading.active_count() == before


def test_a_different_prepare_on_the_same_job_dir_is_refused(reviews_job, review_jsonl):
    job, _ = reviews_job
    with pytest.raises(ElasticError, match=r"different job .*shards"):
        prepare_job(job, "convert", [str(review_jsonl)], 6)
    with pytest.raises(ElasticError, match=r"different job .*max_retries"):
        prepare_job(job, "convert", [str(review_jsonl)], 7, max_retries=5)
    touched = review_jsonl / "reviews-0.jsonl"
    stat = touched.stat()
    os.utime(touched, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    try:
        with pytest.raises(ElasticError, match=r"different job .*inputs"):
            prepare_job(job, "convert", [str(review_jsonl)], 7)
    finally:
        os.utime(touched, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_the_manifest_records_configuration_runner_and_limits(review_jsonl, tmp_path):
    manifest, _ = prepare_job(
        tmp_path / "job",
        "convert",
        [str(review_jsonl)],
        2,
        ["--id_key", "review", "--direct_num_workers", "1"],
        lock_timeout=30,
        max_retries=1,
    )
    assert manifest["pipeline"]["args"] == ["--id_key", "review"]
    assert manifest["runner_args"] == ["--direct_num_workers", "1"]
    expected = json.dumps({"pipeline": "convert", "args": ["--id_key", "review"]}, separators=(",", ":"))
    assert manifest["pipeline"]["sha256"] == hashlib.sha256(expected.encode()).hexdigest()
    assert (manifest["lock_timeout"], manifest["max_retries"], manifest["attempt_timeout"]) == (30.0, 1, None)
    assert JobDir(tmp_path / "job").manifest() == manifest
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "job"]
    assert leftovers == [], "the staging directory must be renamed into place"


@pytest.mark.parametrize(
    ("pipeline", "args", "message"),
    [
        ("decont_index", [], "decont_index pipeline needs its whole input at once (an index holds"),
        ("convert", ["--skip", "3"], "--skip counts documents across the whole input"),
        ("convert", ["--output", "/tmp/x"], "--output is set by the workers"),
        ("convert", ["--output_format", "parquet"], "merged as JSONL part files"),
        ("convert", ["--no_such_option", "1"], "unknown options --no_such_option 1 (see beamtrove run convert --help)"),
        (
            "convert",
            ["--lid_model", "x"],
            "--lid_model is an option of the filter and fineweb and fineweb2 pipeline, not of",
        ),
        ("extract", ["--resumable"], "Elastic jobs resume by shard on their own"),
        ("convert", ["--runner", "DataflowRunner"], "The tasks of elastic jobs run on local DirectRunners"),
        ("convert", ["--direct_running_mode", "multi_threading"], "use in_memory"),
        ("fineweb", ["--lid_model", "/nowhere/lid.176.ftz"], "fineweb pipeline cannot run with these options"),
    ],
)
def test_refuses_what_shards_cannot_do(review_jsonl, tmp_path, pipeline, args, message):
    with pytest.raises(ElasticError, match=re.escape(message)):
        prepare_job(tmp_path / "job", pipeline, [str(review_jsonl)], 2, args)
    assert not (tmp_path / "job").exists()


def test_refuses_more_shards_than_units_and_remote_inputs(review_jsonl, tmp_path):
    with pytest.raises(ElasticError, match=r"601 shard units.*--num-shards 601 or less"):
        prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 602)
    with pytest.raises(ElasticError, match="storage every worker mounts"):
        prepare_job(tmp_path / "job", "convert", ["gs://bucket/crawl/*.jsonl"], 2)


def test_warc_files_are_whole_units_with_their_record_counts(faults_set, tmp_path):
    warcs, rows = faults_set
    require(LID_MODEL)
    manifest, _ = prepare_job(tmp_path / "job", "fineweb", [str(warcs / "*.warc.gz")], 3, fineweb_assets())
    assert manifest["input_format"] == "warc"
    assert [len(shard["segments"]) for shard in manifest["shards"]] == [1, 1, 1]
    assert all(not entry["splittable"] for entry in manifest["inputs"])
    for shard, entry in zip(manifest["shards"], manifest["inputs"], strict=True):
        assert shard["segments"][0]["start"] == 0 and shard["segments"][0]["end"] == entry["size"]
        # Every record make_warc wrote, faults and the record cut short at the end included.
        assert entry["records"] == shard["records"] == sum(row["file"] == entry["name"] for row in rows)
        assert "scan_error" not in entry
        assert entry["sha256"] == hashlib.sha256((warcs / entry["name"]).read_bytes()).hexdigest()
        # Prepare took the whole file's checksum; a worker reads the bytes again and must agree.
        assert shard_sha256(manifest, shard) == shard["sha256"]
    with pytest.raises(ElasticError, match="3 shard units"):
        prepare_job(tmp_path / "job4", "fineweb", [str(warcs / "*.warc.gz")], 4, fineweb_assets())


def test_an_unreadable_warc_is_a_unit_whose_scan_says_why(faults_set, tmp_path):
    warcs, _ = faults_set
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "a.warc.gz").write_bytes((warcs / "part-00000.warc.gz").read_bytes())
    (inputs / "b.warc.gz").write_bytes(b"\x1f\x8b" + bytes(range(256)) * 8)
    manifest, _ = prepare_job(tmp_path / "job", "extract", [str(inputs)], 2)
    assert manifest["inputs"][1]["records"] == 0 and "scan_error" in manifest["inputs"][1]
    assert [shard["segments"][0]["input"] for shard in manifest["shards"]] == [0, 1]


def test_compressed_jsonl_files_are_whole_units(review_jsonl, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("reviews-0.jsonl", "reviews-1.jsonl"):
        (inputs / f"{name}.gz").write_bytes(gzip.compress((review_jsonl / name).read_bytes()))
    manifest, _ = prepare_job(tmp_path / "job", "convert", [str(inputs)], 2)
    assert [entry["records"] for entry in manifest["inputs"]] == [200, 201]
    for entry, shard in zip(manifest["inputs"], manifest["shards"], strict=True):
        assert not entry["splittable"] and "scan_error" not in entry
        assert entry["sha256"] == hashlib.sha256((inputs / entry["name"]).read_bytes()).hexdigest()
        assert shard["records"] == entry["records"] and shard_sha256(manifest, shard) == shard["sha256"]


def test_a_staged_job_refuses_an_attempt_timeout_its_workers_cannot_keep(review_jsonl, tmp_path):
    with pytest.raises(ElasticError, match="--attempt-timeout cannot stop one, drop it"):
        prepare_job(tmp_path / "job", "dedup", [str(review_jsonl)], 2, ["--dedup", "exact"], attempt_timeout=30)
    assert not (tmp_path / "job").exists()


@pytest.mark.parametrize(("pipeline", "args"), [("convert", []), ("dedup", ["--dedup", "exact"])])
def test_an_empty_jsonl_input_is_prepared_as_a_run_reads_it(tmp_path, pipeline, args):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    manifest, created = prepare_job(tmp_path / "job", pipeline, [str(empty)], 1, args)
    assert created and manifest["inputs"][0]["records"] == 0
    # One read of the file, of no record: a run over it finishes with 0 documents, as `beamtrove run` does.
    assert [(shard["records"], shard["bytes"]) for shard in manifest["shards"]] == [(0, 0)]
