"""``benchmarks.generated_corpus``: real sentences with planted copies, the same bytes for a seed, and the scoring."""

from __future__ import annotations

import gzip
import json

import pytest

from beamtrove.cli import main
from beamtrove.text import normalize_text
from beamtrove.transforms.dedup.exact import normalize_url
from benchmarks.common import NLTK_CORPORA, jsonl_rows, read_jsonl, write_jsonl
from benchmarks.generated_corpus import (
    CORPUS_FILE,
    KINDS,
    MANIFEST_FILE,
    CopyRates,
    GeneratedCorpus,
    document_id,
    removal_score,
    sentence_pool,
    write_corpus,
)
from tests.conftest import require

#: Rates well above the defaults, so a few hundred documents hold dozens of copies of each kind.
RATES = CopyRates(exact=0.1, url=0.06, near=0.1, near_edit=0.02)


@pytest.fixture(scope="module")
def pool() -> list[str]:
    for corpus in ("movie_reviews", "state_union", "inaugural", "udhr2"):
        require(NLTK_CORPORA / f"{corpus}.zip")
    return sentence_pool()


@pytest.fixture(scope="module")
def written(pool, tmp_path_factory):
    """400 documents in 3 files, the rates above, seed 5: the folder and its corpus.json."""
    folder = tmp_path_factory.mktemp("generated")
    return folder, write_corpus(folder, 400, files=3, seed=5, rates=RATES)


def test_the_pool_holds_unique_real_sentences_of_5_to_100_words(pool):
    assert 80_000 < len(pool) == len(set(pool))
    assert all(5 <= len(sentence.split()) <= 100 and sentence == " ".join(sentence.split()) for sentence in pool)
    # One of each corpus: a review (lower-cased, pre-tokenized), an address, the UDHR.
    assert 'this year , it\'s no contest , as " quest for camelot " is pretty much dead on arrival .' in pool
    assert "We are here today to consider the state of the Union." in pool
    assert any(sentence.startswith("Everyone has the right to freedom of thought") for sentence in pool)


def test_the_same_seed_writes_the_same_bytes_and_another_seed_others(pool, written, tmp_path):
    folder, _ = written
    again = write_corpus(tmp_path / "again", 400, files=3, seed=5, rates=RATES)
    names = sorted(path.name for path in folder.iterdir())
    assert names == [CORPUS_FILE, MANIFEST_FILE, "part-00000.jsonl.gz", "part-00001.jsonl.gz", "part-00002.jsonl.gz"]
    assert all((folder / name).read_bytes() == (tmp_path / "again" / name).read_bytes() for name in names)
    assert again["content_bytes"] == sum(len(gzip.decompress(path.read_bytes())) for path in folder.glob("*.jsonl.gz"))
    first = [row["text"] for row in jsonl_rows(folder, "part-00000.jsonl.gz")][:5]
    assert [GeneratedCorpus(400, seed=6, rates=RATES, pool=pool).row(n)["text"] for n in range(5)] != first
    assert [GeneratedCorpus(400, seed=5, rates=RATES, pool=pool).row(n)["text"] for n in range(5)] == first


def test_copies_are_planted_at_their_rates_after_their_originals(written):
    folder, summary = written
    rows = list(jsonl_rows(folder, "*.jsonl.gz"))
    manifest = list(read_jsonl([folder / MANIFEST_FILE]))
    # Rows run in id order across the files (contiguous positions), ids unique, rows as the JSONL reader takes them.
    assert [row["id"] for row in rows] == [document_id(n) for n in range(400)]
    assert all(set(row) == {"id", "text", "metadata"} and set(row["metadata"]) == {"url"} for row in rows)
    counts = {kind: sum(entry["kind"] == kind for entry in manifest) for kind in KINDS}
    assert summary["counts"] == {"original": 400 - len(manifest), **counts}
    # Binomial draws of 400: the expected 40, 24 and 40 give or take three standard deviations.
    assert 22 <= counts["exact"] <= 58 and 10 <= counts["url"] <= 38 and 22 <= counts["near"] <= 58
    copies = {entry["id"] for entry in manifest}
    assert all(entry["of"] not in copies and entry["of"] < entry["id"] for entry in manifest)


def test_each_copy_relates_to_its_original_as_its_kind_says(written):
    folder, _ = written
    by_id = {row["id"]: row for row in jsonl_rows(folder, "*.jsonl.gz")}
    manifest = list(read_jsonl([folder / MANIFEST_FILE]))
    originals = [row for row in by_id.values() if row["id"] not in {entry["id"] for entry in manifest}]
    # No two originals share a text or a normalized URL.
    assert len({row["text"] for row in originals}) == len(originals)
    assert len({normalize_url(row["metadata"]["url"]) for row in originals}) == len(originals)
    edits = []
    for entry in manifest:
        copy, original = by_id[entry["id"]], by_id[entry["of"]]
        same_url = normalize_url(copy["metadata"]["url"]) == normalize_url(original["metadata"]["url"])
        if entry["kind"] == "exact":
            assert copy["text"] == original["text"] and not same_url
        elif entry["kind"] == "url":
            assert copy["text"] != original["text"] and same_url
            assert copy["metadata"]["url"] != original["metadata"]["url"]
        else:
            words, original_words = copy["text"].split(), original["text"].split()
            assert len(words) == len(original_words) and not same_url
            assert normalize_text(copy["text"]) != normalize_text(original["text"])
            edits.append(sum(a != b for a, b in zip(words, original_words, strict=True)) / len(words))
    # About 2 % of the words replaced: fewer as a word may be drawn in place of itself, more as a draw that changed
    # nothing is drawn again (which favours more changes in short texts); never more than a few percent.
    assert 0.015 < sum(edits) / len(edits) < 0.025 and max(edits) < 0.08


def test_a_dedup_run_is_scored_against_the_planted_copies(written, tmp_path):
    folder, summary = written
    output = tmp_path / "run"
    argv = ["run", "dedup", "--input", str(folder / "*.jsonl.gz"), "--output", str(output), "--progress_interval", "0"]
    assert main([*argv, "--dedup", "exact,url,minhash"]) == 0
    score = removal_score(output, folder)
    planted = {kind: summary["counts"][kind] for kind in KINDS}
    assert score.planted == planted
    # Every exact and URL copy is found by its step; no original is removed.
    assert score.found["exact"] == planted["exact"] == score.removed_by_step["exact"]
    assert score.found["url"] == planted["url"] == score.removed_by_step["url"]
    assert score.precision == 1.0 and score.copies_by_step == score.removed_by_step
    # MinHash finds most 2 % near copies (their 5-gram Jaccard is about 0.82, where 14 bands of 8 catch 9 in 10).
    assert planted["near"] * 0.8 <= score.found["near"] == score.removed_by_step["minhash"] <= planted["near"]
    assert score.recall == sum(score.found.values()) / sum(planted.values())


def test_removals_of_originals_lower_precision_and_copies_left_lower_recall(written, tmp_path):
    folder, _ = written
    manifest = list(read_jsonl([folder / MANIFEST_FILE]))
    exact = [entry["id"] for entry in manifest if entry["kind"] == "exact"]
    originals = sorted({entry["of"] for entry in manifest})[:3]
    write_jsonl(tmp_path / "excluded" / "exact" / "part.jsonl.gz", [{"id": id_, "text": ""} for id_ in exact])
    write_jsonl(tmp_path / "excluded" / "minhash" / "part.jsonl.gz", [{"id": id_, "text": ""} for id_ in originals])
    score = removal_score(tmp_path, folder / MANIFEST_FILE)
    assert (score.removed, score.found) == (len(exact) + 3, {"exact": len(exact), "url": 0, "near": 0})
    assert score.precision == len(exact) / (len(exact) + 3)
    assert score.recall == len(exact) / len(manifest)
    assert (score.kind_recall("exact"), score.kind_recall("url"), score.kind_recall("near")) == (1.0, 0.0, 0.0)
    assert (score.step_precision("exact"), score.step_precision("minhash"), score.step_precision("url")) == (1, 0, 1)
    rates = json.loads((folder / CORPUS_FILE).read_text())["rates"]
    assert rates == {"exact": 0.1, "url": 0.06, "near": 0.1, "near_edit": 0.02}


def test_a_corpus_written_over_another_holds_only_its_own_parts(written, tmp_path):
    folder, _ = written
    write_corpus(tmp_path, 400, files=5, seed=5, rates=RATES)
    write_corpus(tmp_path, 400, files=3, seed=5, rates=RATES)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in folder.iterdir())
