"""Dedup indexes: dataset B deduplicated against A's index loses what a dedup over A and B would take from it."""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import pathlib
import re
import shutil

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.option_parsing import option_actions
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import pipeline_spec
from beamtrove.transforms.dedup import (
    BuildDedupIndex,
    DedupIndexes,
    ExactDedup,
    MinHashConfig,
    MinHashDedup,
    SentenceDedup,
    read_index_manifest,
)
from tests.conftest import near_copy

THRESHOLD = MinHashConfig(threshold=0.8)


@pytest.fixture(scope="module")
def dumps(movie_reviews) -> tuple[list[Document], list[Document]]:
    """Two "dumps" of real reviews: B repeats some of A exactly or nearly, and repeats itself.

    A's ids sort before B's, so a dedup over both keeps A's copy of anything they share, as a run against
    A's index must.
    """
    texts = list(movie_reviews.values())
    a = [Document(text, f"a-{number:03d}") for number, text in enumerate(texts[:150])]
    a += [Document(near_copy(a[n].text, 0.01, seed=n), f"a-{n:03d}-near") for n in range(40, 45)]
    b = [Document(text, f"b-{number:03d}") for number, text in enumerate(texts[150:250])]
    b += [dataclasses.replace(a[n], id=f"b-copy-of-a-{n:03d}") for n in range(10)]
    b += [Document(near_copy(a[n].text, 0.01, seed=n), f"b-near-a-{n:03d}") for n in range(10, 20)]
    # Near copies of A's near copies: they reach A's originals only through them.
    b += [Document(near_copy(a[150 + n].text, 0.01, seed=n + 7), f"b-near-a-near-{n}") for n in range(5)]
    b += [Document(near_copy(b[n].text, 0.01, seed=n), f"b-near-b-{n:03d}") for n in range(5)]
    b += [Document(near_copy(a[60].text, 0.3, seed=1), "b-rewritten-a-060")]
    return a, b


def _build_index(documents: list[Document], folder: pathlib.Path, name: str, **settings) -> None:
    with TestPipeline() as pipeline:
        _ = (
            pipeline
            | beam.Create(documents)
            | BuildDedupIndex(str(folder), ["exact", "minhash", "sentence"], name=name, num_shards=3, **settings)
        )


@pytest.fixture(scope="module")
def index_a(dumps, tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("index") / "dump-a"
    _build_index(dumps[0], folder, "dump-a")
    return folder


def _removed(outputs, label: str) -> beam.PCollection:
    return outputs.excluded | label >> beam.Map(
        lambda d: (d.id, d.metadata["filter_reason"], d.metadata["duplicate_of"])
    )


class _ExactThenMinHash(beam.PTransform):
    """Exact dedup, then MinHash with a threshold on what it kept: ``(step, id, reason, kept id)`` per removal."""

    def __init__(self, against: DedupIndexes | None):
        super().__init__()
        self._against = against

    def expand(self, documents):
        exact = documents | "Exact" >> ExactDedup(against=self._against)
        near = exact.kept | "MinHash" >> MinHashDedup(THRESHOLD, against=self._against)
        return (
            _removed(exact, "ExactRemoved") | "TagExact" >> beam.Map(lambda row: ("exact", *row)),
            _removed(near, "NearRemoved") | "TagNear" >> beam.Map(lambda row: ("minhash", *row)),
        ) | beam.Flatten()


def test_the_manifest_says_what_the_index_holds(dumps, index_a):
    manifest = read_index_manifest(str(index_a))
    assert manifest.name == "dump-a" and manifest.documents == len(dumps[0])
    assert manifest.kinds["exact"]["records"] == len({d.text for d in dumps[0]})
    assert manifest.kinds["minhash"]["records"] == len(dumps[0])
    assert (manifest.kinds["minhash"]["n_grams"], manifest.kinds["sentence"]["span_sentences"]) == (5, 3)
    assert len(manifest.files("exact")) == 3
    with gzip.open(manifest.files("exact")[0], "rt") as stream:
        lines = stream.read().splitlines()
    assert lines == sorted(lines) and set(json.loads(lines[0])) == {"key", "id"}


@pytest.mark.slow
def test_b_against_a_index_loses_what_a_dedup_over_both_takes_from_b(dumps, index_a):
    a, b = dumps
    b_ids = {d.id for d in b}

    def check(rows):
        union = {
            (step, id_): (reason, kept) for run, step, id_, reason, kept in rows if run == "union" and id_ in b_ids
        }
        against = {(step, id_): (reason, kept) for run, step, id_, reason, kept in rows if run == "against"}
        # The same documents leave B at the same step; the reason names the index when A holds the duplicate.
        assert sorted(against) == sorted(union)
        assert {id_ for step, id_ in union if step == "exact"} == {f"b-copy-of-a-{n:03d}" for n in range(10)}
        near = {id_ for step, id_ in union if step == "minhash"}
        assert near == {f"b-near-a-{n:03d}" for n in range(10, 20)} | {f"b-near-a-near-{n}" for n in range(5)} | {
            f"b-near-b-{n:03d}" for n in range(5)
        }
        # An exact copy is removed for the same kept document of A.
        assert all(against[key][1] == union[key][1] for key in union if key[0] == "exact")
        assert {against[key][0] for key in against if key[0] == "exact"} == {"exact_duplicate_in_dump-a"}
        assert against[("minhash", "b-near-a-010")][0] == "minhash_duplicate_in_dump-a"
        assert against[("minhash", "b-near-b-000")] == ("minhash_duplicate", "b-000")

    with TestPipeline() as pipeline:
        union = pipeline | "Both" >> beam.Create(a + b) | "OverBoth" >> _ExactThenMinHash(None)
        against = pipeline | "B" >> beam.Create(b) | "AgainstA" >> _ExactThenMinHash(DedupIndexes([str(index_a)]))
        rows = (
            union | "TagUnion" >> beam.Map(lambda row: ("union", *row)),
            against | "TagAgainst" >> beam.Map(lambda row: ("against", *row)),
        ) | beam.Flatten()
        assert_that(rows, check)


def test_spans_an_index_holds_are_cut_from_every_input_document(dumps, index_a, movie_reviews):
    a, _ = dumps
    unseen = list(movie_reviews.values())[300]
    b = [
        Document(unseen + "\n" + a[7].text, "b-1-unseen-then-a-007"),
        Document(a[5].text, "b-2-copy-of-a-005"),
        Document(unseen, "b-3-unseen-again"),
    ]
    with TestPipeline() as pipeline:
        result = (
            pipeline
            | beam.Create(b)
            | SentenceDedup(min_doc_words=0, min_doc_sentences=0, against=DedupIndexes([str(index_a)]))
        )
        kept = result.kept | beam.Map(lambda d: (d.id, d.text))
        # A's review leaves the first document and all of the second; the unseen review stays where it first occurs.
        assert_that(kept, equal_to([("b-1-unseen-then-a-007", unseen.strip())]))
        emptied = result.excluded | beam.Map(lambda d: d.id)
        assert_that(emptied, equal_to(["b-2-copy-of-a-005", "b-3-unseen-again"]), label="Emptied")


@pytest.mark.slow
def test_several_indexes_merge_and_the_first_named_wins(dumps, index_a, tmp_path):
    a, b = dumps
    index_b = tmp_path / "dump-b"
    _build_index(b[:20] + b[102:103], index_b, "dump-b")
    merged = DedupIndexes([str(index_b), str(index_a)])
    probe = [dataclasses.replace(a[0], id="c-copy-of-a-000"), dataclasses.replace(b[3], id="c-copy-of-b-003")]
    probe.append(dataclasses.replace(b[102], id="c-copy-of-both"))
    with TestPipeline() as pipeline:
        removed = pipeline | beam.Create(probe) | _ExactThenMinHash(merged)
        expected = [
            ("exact", "c-copy-of-a-000", "exact_duplicate_in_dump-a", "a-000"),
            ("exact", "c-copy-of-b-003", "exact_duplicate_in_dump-b", "b-003"),
            # A's a-002, copied into B: both indexes hold it, and dump-b is named first.
            ("exact", "c-copy-of-both", "exact_duplicate_in_dump-b", "b-copy-of-a-002"),
        ]
        assert_that(removed, equal_to(expected))


def test_an_index_that_would_not_match_fails_before_the_run(index_a, tmp_path):
    with pytest.raises(ValueError, match="--minhash_ngrams 5"):
        MinHashDedup(MinHashConfig(n_grams=7), against=DedupIndexes([str(index_a)]))
    with pytest.raises(ValueError, match="--span_sentences 3"):
        SentenceDedup(span_sentences=2, against=DedupIndexes([str(index_a)]))
    with pytest.raises(FileNotFoundError, match="beamtrove run dedup_index"):
        DedupIndexes([str(tmp_path / "nothing-here")])
    with pytest.raises(ValueError, match="same"):
        DedupIndexes([str(index_a), str(index_a)])
    with pytest.raises(ValueError, match="holds no url keys"):
        DedupIndexes([str(index_a)]).read("url")
    with pytest.raises(ValueError, match="normalized"):
        ExactDedup(normalized=True, against=DedupIndexes([str(index_a)]))


def test_every_option_an_index_message_suggests_is_one_dedup_takes(index_a):
    index = DedupIndexes([str(index_a)]).manifests[0]
    messages = []
    for check in (
        lambda: index.check_minhash(MinHashConfig(n_grams=7, num_buckets=20, hashes_per_bucket=4, seed=3)),
        lambda: index.check_sentence(2),
        lambda: index.entry("url"),
    ):
        with pytest.raises(ConfigurationError) as refused:
            check()
        messages.append(str(refused.value))
    suggested = {flag for message in messages for flag in re.findall(r"--\w+", message)}
    declared = {
        flag for action in option_actions(pipeline_spec("dedup").option_classes) for flag in action.option_strings
    }
    assert suggested == {
        "--minhash_ngrams",
        "--minhash_buckets",
        "--minhash_hashes_per_bucket",
        "--minhash_seed",
        "--span_sentences",
        "--dedup",
    }
    assert suggested <= declared
    assert "--minhash_ngrams 5 --minhash_buckets 14 --minhash_hashes_per_bucket 8 --minhash_seed 1" in messages[0]


def test_the_manifest_records_what_each_shard_holds(index_a):
    manifest = read_index_manifest(str(index_a))
    files = [file for kind in manifest.kinds for file in manifest.kinds[kind]["files"]]
    assert sorted(manifest.shards) == sorted(files) and len(files) == 9
    for file, shard in manifest.shards.items():
        with gzip.open(index_a / file) as stream:
            records = len(stream.read().splitlines())
        assert shard == {"bytes": (index_a / file).stat().st_size, "records": records}


def _shard(folder: pathlib.Path, kind: str, number: int = 0) -> pathlib.Path:
    return folder / kind / f"part-{number:05d}-of-00003.jsonl.gz"


def _drop_lines(shard: pathlib.Path) -> None:
    """Deletes every third line of a shard and compresses it again, as a user editing it would."""
    lines = gzip.decompress(shard.read_bytes()).splitlines(keepends=True)
    shard.write_bytes(gzip.compress(b"".join(lines[1::3] + lines[2::3])))


def _edit_manifest(folder: pathlib.Path, edit) -> None:
    manifest = json.loads((folder / "index.json").read_text())
    edit(manifest)
    (folder / "index.json").write_text(json.dumps(manifest))


def _cut(path: pathlib.Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


DAMAGES = {
    "lines deleted from a shard": (lambda f: _drop_lines(_shard(f, "exact")), "exact/part-00000-of-00003.jsonl.gz"),
    "a shard cut short": (lambda f: _cut(_shard(f, "minhash", 1), 900), "minhash/part-00001-of-00003.jsonl.gz"),
    "a shard emptied": (lambda f: _cut(_shard(f, "sentence", 2), 0), "sentence/part-00002-of-00003.jsonl.gz"),
    "a shard deleted": (lambda f: _shard(f, "minhash", 2).unlink(), "minhash/part-00002-of-00003.jsonl.gz"),
    "a kind folder deleted": (lambda f: shutil.rmtree(f / "sentence"), "sentence/part-00000-of-00003.jsonl.gz"),
    "index.json cut short": (lambda f: _cut(f / "index.json", 300), "index.json"),
    "a kind's records edited": (
        lambda f: _edit_manifest(f, lambda m: m["kinds"]["exact"].update(records=176)),
        "index.json",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_index_is_refused_before_the_run_naming_the_file(index_a, tmp_path, damage):
    copy = tmp_path / "dump-a"
    shutil.copytree(index_a, copy)
    damage_index, named = DAMAGES[damage]
    damage_index(copy)
    with pytest.raises(ConfigurationError) as refused:
        DedupIndexes([str(copy)])
    message = str(refused.value)
    assert str(copy / named) in message and "beamtrove run dedup_index" in message and "\n" not in message


def test_an_index_lacking_a_kind_is_refused_by_the_step_that_needs_it(index_a, tmp_path):
    copy = tmp_path / "dump-a"
    shutil.copytree(index_a, copy)
    _edit_manifest(copy, lambda manifest: [manifest["kinds"].pop(kind) for kind in ("minhash", "sentence")])
    against = DedupIndexes([str(copy)])
    with pytest.raises(ConfigurationError, match=f"Index {copy} holds no minhash keys .*--dedup minhash"):
        MinHashDedup(THRESHOLD, against=against)
    with pytest.raises(ConfigurationError, match=f"Index {copy} holds no sentence keys .*--dedup sentence"):
        SentenceDedup(against=against)


def _run_exact_against(index: pathlib.Path, documents: list[Document]) -> None:
    with TestPipeline() as pipeline:
        removed = pipeline | beam.Create(documents) | _ExactThenMinHash(DedupIndexes([str(index)]))
        assert_that(removed | beam.Map(lambda row: row[1]), equal_to([document.id for document in documents]))


@pytest.mark.slow
def test_damage_that_keeps_the_size_fails_the_run_naming_the_shard(dumps, index_a, tmp_path):
    probe = [dataclasses.replace(dumps[0][n], id=f"c-copy-of-a-{n:03d}") for n in range(3)]
    garbage = tmp_path / "garbage"
    shutil.copytree(index_a, garbage)
    data = bytearray(_shard(garbage, "exact").read_bytes())
    data[100:140] = b"x" * 40
    _shard(garbage, "exact").write_bytes(bytes(data))
    with pytest.raises(ConfigurationError, match=re.escape(f"Dedup index shard {_shard(garbage, 'exact')} is damaged")):
        _run_exact_against(garbage, probe)
    # Records deleted and the shard's size patched in index.json: its record count still tells.
    fewer = tmp_path / "fewer"
    shutil.copytree(index_a, fewer)
    _drop_lines(_shard(fewer, "exact", 1))
    size = _shard(fewer, "exact", 1).stat().st_size
    _edit_manifest(fewer, lambda m: m["shards"]["exact/part-00001-of-00003.jsonl.gz"].update(bytes=size))
    with pytest.raises(ConfigurationError, match=re.escape(f"Dedup index shard {_shard(fewer, 'exact', 1)} holds")):
        _run_exact_against(fewer, probe)


@pytest.mark.slow
def test_an_index_from_before_shard_sizes_were_recorded_still_works(dumps, index_a, tmp_path, caplog):
    old = tmp_path / "dump-a"
    shutil.copytree(index_a, old)
    _edit_manifest(old, lambda manifest: manifest.pop("shards"))
    with caplog.at_level(logging.WARNING, logger="beamtrove.transforms.dedup.index_manifest"):
        _run_exact_against(old, [dataclasses.replace(dumps[0][n], id=f"c-copy-of-a-{n:03d}") for n in range(3)])
    assert f"Dedup index {old} records no shard sizes" in caplog.text
    # Presence is still checked.
    _shard(old, "exact").unlink()
    with pytest.raises(ConfigurationError, match=re.escape(f"Dedup index shard {_shard(old, 'exact')} is missing")):
        DedupIndexes([str(old)])
