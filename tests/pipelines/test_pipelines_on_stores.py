"""Pipelines whose outputs are on object stores, each a real server in its own process (tests/servers.py): dedup
against an index on a store, tokens into a store, an elastic job merged into a store, each compared with the same run
on local files."""

from __future__ import annotations

import pytest

from tests.conftest import require
from tests.execution.test_output_stores import command, files_in, ok, seen

_DEDUP = ["--input_format", "jsonl", "--dedup", "exact,minhash", "--progress_interval", "0"]


def _dedup_against_index(on, root: str, inputs: str) -> tuple[dict, dict]:
    """``dedup_index`` of the first reviews under ``root``, then ``dedup --against`` it of them all: what a reader
    sees of the index and of the dedup's output (on the store ``on``, or local)."""
    index = f"{root}/index"
    ok(command("run", "dedup_index", "--input", f"{inputs}/reviews-0.jsonl", "--index_name", "earlier", *_DEDUP,
               "--output", index))  # fmt: skip
    ok(command("run", "dedup", "--input", inputs, "--against", index, *_DEDUP, "--output", f"{root}/dedup"))
    return seen(files_in(on, index), inputs), seen(files_in(on, f"{root}/dedup"), inputs)


@pytest.fixture(scope="module")
def local_dedup(review_jsonl, tmp_path_factory) -> tuple[dict, dict]:
    """The index and the dedup on a local disk, which each store's must equal."""
    return _dedup_against_index(None, str(tmp_path_factory.mktemp("dedup-local")), str(review_jsonl))


@pytest.mark.slow
def test_dedup_against_an_index_on_a_store_removes_what_the_local_index_does(local_dedup, review_jsonl, store):
    bucket = store.bucket()
    store.upload(review_jsonl, f"{bucket}/reviews")
    index, dedup = _dedup_against_index(store, bucket, f"{bucket}/reviews")
    assert (index, dedup) == local_dedup
    assert len([name for name in index if not name.endswith(".json")]) > 1
    assert dedup["stats.json"]["exact"]["dropped.exact_duplicate_in_earlier"] == 200


@pytest.fixture(scope="module")
def tokenize_args(data_dir) -> list[str]:
    tokenizer = require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json")
    return ["--tokenizer", str(tokenizer), "--input_format", "jsonl", "--num_shards", "2", "--shuffle_seed", "3",
            "--progress_interval", "0"]  # fmt: skip


@pytest.fixture(scope="module")
def local_tokens(review_jsonl, tokenize_args, tmp_path_factory) -> dict[str, bytes]:
    """The token files of the reviews on a local disk, which each store's must equal."""
    output = tmp_path_factory.mktemp("tokens-local") / "tokens"
    ok(command("run", "tokenize", "--input", str(review_jsonl), "--output", str(output), *tokenize_args))
    return files_in(None, output)


@pytest.mark.slow
def test_tokenize_into_a_store_writes_the_local_token_files(review_jsonl, tokenize_args, local_tokens, store):
    bucket = store.bucket()
    store.upload(review_jsonl, f"{bucket}/reviews")
    ok(command("run", "tokenize", "--input", f"{bucket}/reviews", "--output", f"{bucket}/tokens", *tokenize_args))
    on_store = files_in(store, f"{bucket}/tokens")
    tokens = sorted(name for name in local_tokens if name.endswith(".ds"))
    assert len(tokens) == 2
    assert {name: on_store[name] for name in tokens} == {name: local_tokens[name] for name in tokens}
    assert seen(on_store, f"{bucket}/reviews") == seen(local_tokens, str(review_jsonl))


# --- an elastic job's merge into a store; its job directory on a POSIX file system ---


@pytest.fixture(scope="module", params=["convert", "dedup"])
def elastic_job(request, review_jsonl, tmp_path_factory):
    """An elastic job of the pipeline, done, and its merge on a local disk, which a merge into each store must equal."""
    folder = tmp_path_factory.mktemp(f"elastic-{request.param}")
    job = folder / "job"
    ok(command("elastic", "prepare", "--pipeline", request.param, "--input", str(review_jsonl), "--job-dir", str(job),
               "--num-shards", "2", "--", "--input_format", "jsonl"))  # fmt: skip
    ok(command("elastic", "worker", "--job-dir", str(job)))
    ok(command("elastic", "merge", "--job-dir", str(job), "--output", str(folder / "merged")))
    return request.param, job, seen(files_in(None, folder / "merged"))


@pytest.mark.slow
def test_an_elastic_job_merged_into_a_store_is_the_local_merge(elastic_job, store):
    pipeline, job, here = elastic_job
    output = f"{store.bucket()}/merged"
    merged = ok(command("elastic", "merge", "--job-dir", str(job), "--output", output))
    on_store = seen(files_in(store, output))
    assert on_store == here
    kept = sum(len(data.splitlines()) for name, data in on_store.items() if name.startswith("documents/"))
    assert merged.stdout.strip().endswith(f"into {output}; stats in {output}/stats.json"), merged.stdout
    # Every review but the malformed row; dedup drops its few near copies.
    assert kept == 600 if pipeline == "convert" else 590 < kept < 600
