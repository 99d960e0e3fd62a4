"""Pipelines whose outputs are on object stores, each a real server in its own process (tests/servers.py): dedup
against an index on a store, tokens into a store, an elastic job merged into a store, each compared with the same run
on local files."""

from __future__ import annotations

import pytest

from tests.conftest import require
from tests.execution.test_output_stores import command, files_in, ok, seen

# --- dedup against an index on a store, tokens into a store ---


@pytest.mark.slow
def test_dedup_against_an_index_on_a_store_removes_what_the_local_index_does(review_jsonl, store, tmp_path):
    bucket = store.bucket()
    store.upload(review_jsonl, f"{bucket}/reviews")
    runs = {}
    for where, root, inputs in (("store", bucket, f"{bucket}/reviews"), ("local", str(tmp_path), str(review_jsonl))):
        index = f"{root}/index"
        common = ["--input_format", "jsonl", "--dedup", "exact,minhash", "--progress_interval", "0"]
        ok(command("run", "dedup_index", "--input", f"{inputs}/reviews-0.jsonl", "--index_name", "earlier", *common,
                 "--output", index))  # fmt: skip
        ok(command("run", "dedup", "--input", inputs, "--against", index, *common, "--output", f"{root}/dedup"))
        on = None if where == "local" else store
        runs[where] = (
            seen(files_in(on, index), inputs),
            seen(files_in(on, f"{root}/dedup"), inputs),
        )
    assert runs["store"] == runs["local"]
    index, dedup = runs["store"]
    assert len([name for name in index if not name.endswith(".json")]) > 1
    assert dedup["stats.json"]["exact"]["dropped.exact_duplicate_in_earlier"] == 200


@pytest.mark.slow
def test_tokenize_into_a_store_writes_the_local_token_files(review_jsonl, data_dir, store, tmp_path):
    tokenizer = require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json")
    bucket = store.bucket()
    store.upload(review_jsonl, f"{bucket}/reviews")
    args = ["--tokenizer", str(tokenizer), "--input_format", "jsonl", "--num_shards", "2", "--shuffle_seed", "3",
            "--progress_interval", "0"]  # fmt: skip
    ok(command("run", "tokenize", "--input", f"{bucket}/reviews", "--output", f"{bucket}/tokens", *args))
    ok(command("run", "tokenize", "--input", str(review_jsonl), "--output", str(tmp_path / "tokens"), *args))
    on_store, here = files_in(store, f"{bucket}/tokens"), files_in(None, tmp_path / "tokens")
    tokens = sorted(name for name in here if name.endswith(".ds"))
    assert len(tokens) == 2
    assert {name: on_store[name] for name in tokens} == {name: here[name] for name in tokens}
    assert seen(on_store, f"{bucket}/reviews") == seen(here, str(review_jsonl))


# --- an elastic job's merge into a store; its job directory on a POSIX file system ---


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["convert", "dedup"])
def test_an_elastic_job_merged_into_a_store_is_the_local_merge(review_jsonl, store, tmp_path, pipeline):
    job = tmp_path / "job"
    ok(command("elastic", "prepare", "--pipeline", pipeline, "--input", str(review_jsonl), "--job-dir", str(job),
             "--num-shards", "2", "--", "--input_format", "jsonl"))  # fmt: skip
    ok(command("elastic", "worker", "--job-dir", str(job)))
    output = f"{store.bucket()}/merged"
    merged = ok(command("elastic", "merge", "--job-dir", str(job), "--output", output))
    ok(command("elastic", "merge", "--job-dir", str(job), "--output", str(tmp_path / "merged")))
    on_store, here = (
        seen(files_in(store, output)),
        seen(files_in(None, tmp_path / "merged")),
    )
    assert on_store == here
    kept = sum(len(data.splitlines()) for name, data in on_store.items() if name.startswith("documents/"))
    assert merged.stdout.strip().endswith(f"into {output}; stats in {output}/stats.json"), merged.stdout
    # Every review but the malformed row; dedup drops its few near copies.
    assert kept == 600 if pipeline == "convert" else 590 < kept < 600
