"""The merge_tokens pipeline: shards of one tokenizer in, re-sharded (and shuffled) shards out."""

from __future__ import annotations

import collections
import pathlib

import pytest

from beamtrove.cli import main
from beamtrove.pipelines import pipeline_spec
from tests.pipelines.conftest import shard_documents


@pytest.fixture(scope="module")
def shards(corpus, gpt2_path, tmp_path_factory) -> pathlib.Path:
    """The corpus tokenized with GPT-2 into 3 shards of beamtrove's."""
    folder, _ = corpus
    output = tmp_path_factory.mktemp("tokens")
    argv = ["--input", str(folder), "--input_format", "jsonl", "--output", str(output), "--tokenizer", gpt2_path]
    assert main(["run", "tokenize", *argv, "--num_shards", "3"]) == 0
    return output


def test_shards_without_metadata_merge_with_the_token_size_given(shards, tmp_path):
    # DataTrove's older shards carry no .ds.metadata: the token size comes from --token_size.
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in shards.glob("*.ds*"):
        if not path.name.endswith(".metadata"):
            (bare / path.name).write_bytes(path.read_bytes())
    merged = tmp_path / "merged"
    assert main(["run", "merge_tokens", "--input", str(bare), "--output", str(merged), "--token_size", "2"]) == 0
    assert collections.Counter(shard_documents(merged)) == collections.Counter(shard_documents(shards))
    assert (merged / "tokens_00000_00000.ds.metadata").read_text().splitlines()[0] == "Unknown Tokenizer|2"


def test_shards_of_different_tokenizers_are_refused_before_anything_runs(shards, tmp_path, capsys):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for path in shards.glob("*.ds*"):
        (mixed / path.name).write_bytes(path.read_bytes())
    metadata = sorted(mixed.glob("*.metadata"))[-1]
    metadata.write_text("another/tokenizer.json|2\n" + "".join(metadata.read_text().splitlines(True)[1:]))
    assert main(["run", "merge_tokens", "--input", str(mixed), "--output", str(tmp_path / "out")]) == 2
    assert "come from different tokenizers or token sizes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_merging_is_a_global_step_shards_cannot_take():
    spec = pipeline_spec("merge_tokens")
    assert not spec.shard_safe and not spec.resumable
    assert spec.global_steps == "merging rewrites token shards across the whole input"
