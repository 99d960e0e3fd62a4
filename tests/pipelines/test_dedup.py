"""The dedup pipeline through the CLI: every step, its exclusions, cluster map and stats."""

from __future__ import annotations

import json
import pathlib

import pytest

from beamtrove.cli import main
from tests.conftest import jsonl_rows, near_copy

BOILERPLATE = "Subscribe to our newsletter. Reviews are the opinion of their authors. All rights reserved. "


@pytest.fixture(scope="module")
def corpus(reviews, tmp_path_factory) -> pathlib.Path:
    """80 reviews with URLs, 3 exact copies, 3 near copies, a URL duplicate, boilerplate on two of them."""
    rows = [{"id": d.id, "text": d.text, "metadata": {"url": f"https://reviews.example/{d.id}"}} for d in reviews[:80]]
    rows += [
        {**rows[n], "id": f"{rows[n]['id']}-exact", "metadata": {"url": f"https://mirror.example/{n}"}}
        for n in range(3)
    ]
    rows += [
        {
            "id": f"{rows[n]['id']}-near",
            "text": near_copy(rows[n]["text"], 0.01, seed=n),
            "metadata": {"url": f"https://near.example/{n}"},
        }
        for n in range(10, 13)
    ]
    rows.append(
        {
            "id": "review-050-again",
            "text": reviews[150].text,
            "metadata": {"url": "https://www.REVIEWS.example/review-050/"},
        }
    )
    rows[20]["text"] = BOILERPLATE + rows[20]["text"]
    rows[30]["text"] = BOILERPLATE + rows[30]["text"]
    folder = tmp_path_factory.mktemp("dedup-input")
    with (folder / "part-0.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    return folder


def test_every_step_removes_its_duplicates_and_says_why(corpus, reviews, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(corpus / "*.jsonl"), "--output", str(output), "--cluster_map"]
    assert main([*argv, "--dedup", "sentence,minhash,url,exact", "--progress_interval", "0"]) == 0
    excluded = {
        step: sorted(row["id"] for row in jsonl_rows(output / "excluded" / step))
        for step in ("exact", "url", "minhash")
    }
    assert excluded == {
        "exact": ["review-000-exact", "review-001-exact", "review-002-exact"],
        "url": ["review-050-again"],
        "minhash": ["review-010-near", "review-011-near", "review-012-near"],
    }
    clusters = sorted(
        (row["id"], row["kept_id"], row["cluster_size"]) for row in jsonl_rows(output / "clusters" / "minhash")
    )
    assert clusters == [(f"review-0{n}-near", f"review-0{n}", 2) for n in (10, 11, 12)]
    kept = {row["id"]: row["text"] for row in jsonl_rows(output / "documents")}
    assert len(kept) == 80
    # The boilerplate stays in the first review that has it.
    assert kept["review-020"].startswith(BOILERPLATE) and not kept["review-030"].startswith("Subscribe")
    steps = json.loads((output / "stats.json").read_text())["steps"]
    assert steps["exact"]["counters"]["dropped.exact_duplicate"] == 3
    minhash = steps["minhash"]["counters"]
    assert {name: value for name, value in minhash.items() if not name.startswith("chars_")} == {
        "in": 83,
        "out": 80,
        "dropped.minhash_duplicate": 3,
        # The clustering's counters are the step's too: 83 signatures, 15 bands shared, 3 clusters of 2.
        "documents": 83,
        "shared_bands": 15,
        "links": 15,
        "components": 3,
    }
    # Characters in and out of each step: the last one's out is what the output holds.
    assert steps["sentence"]["counters"]["chars_out"] == sum(len(text) for text in kept.values())
    assert steps["sentence"]["counters"]["chars_in"] == minhash["chars_out"]
    assert minhash["chars_in"] - minhash["chars_out"] == sum(
        len(near_copy(reviews[n].text, 0.01, seed=n)) for n in range(10, 13)
    )
    # The boilerplate, and a real repeat: review-010 spells "l . i . e ." twice (one-letter sentences).
    assert steps["sentence"]["counters"]["spans_removed"] == 2


def test_minhash_alone_reads_the_input_twice_and_agrees(corpus, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(corpus / "*.jsonl"), "--output", str(output), "--minhash_threshold", "0.8"]
    assert main([*argv, "--progress_interval", "0"]) == 0
    removed = sorted(row["id"] for row in jsonl_rows(output / "excluded" / "minhash"))
    assert removed == [
        "review-000-exact",
        "review-001-exact",
        "review-002-exact",
        "review-010-near",
        "review-011-near",
        "review-012-near",
    ]
    assert len(jsonl_rows(output / "documents")) == 81


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--dedup", "minhash,fuzzy"], "--dedup takes"),
        (["--keep_by", "-"], "keep_by must name"),
        (["--minhash_threshold", "2"], "--minhash_threshold must be a number above 0 and at most 1 (got '2')."),
        (["--against", "/nonexistent/index"], "No dedup index at /nonexistent/index"),
        (["--dedup", "substring"], "--dedup substring needs --substring_tokenizer"),
        (
            ["--dedup", "bloom", "--bloom_fpr", "1.5"],
            "--bloom_fpr must be a number of at least 0 and below 1 (got '1.5').",
        ),
    ],
)
def test_bad_options_fail_before_running(corpus, tmp_path, capsys, option, message):
    argv = ["run", "dedup", "--input", str(corpus / "*.jsonl"), "--output", str(tmp_path / "out"), *option]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_new_dump_against_the_index_of_an_earlier_one(corpus, reviews, tmp_path, capsys):
    index = tmp_path / "reviews-2024"
    argv = [
        "run",
        "dedup_index",
        "--input",
        str(corpus / "*.jsonl"),
        "--output",
        str(index),
        "--progress_interval",
        "0",
    ]
    assert main([*argv, "--dedup", "exact,minhash,sentence"]) == 0
    manifest = json.loads((index / "index.json").read_text())
    assert (manifest["name"], manifest["documents"], sorted(manifest["kinds"])) == (
        "reviews-2024",
        87,
        ["exact", "minhash", "sentence"],
    )
    rows = [
        {"id": "new-005-exact", "text": reviews[5].text},
        {"id": "new-015-near", "text": near_copy(reviews[15].text, 0.01, seed=15)},
        {"id": "new-100", "text": BOILERPLATE + reviews[100].text},
        {"id": "new-101", "text": reviews[101].text},
        {"id": "new-101-again", "text": reviews[101].text},
    ]
    new_dump = tmp_path / "new-dump"
    new_dump.mkdir()
    (new_dump / "part-0.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(new_dump / "*.jsonl"), "--output", str(output), "--progress_interval", "0"]
    assert main([*argv, "--dedup", "exact,minhash,sentence", "--against", str(index)]) == 0
    reasons = {
        step: sorted((row["id"], row["metadata"]["filter_reason"]) for row in jsonl_rows(output / "excluded" / step))
        for step in ("exact", "minhash")
    }
    assert reasons == {
        "exact": [("new-005-exact", "exact_duplicate_in_reviews-2024"), ("new-101-again", "exact_duplicate")],
        "minhash": [("new-015-near", "minhash_duplicate_in_reviews-2024")],
    }
    kept = {row["id"]: row["text"] for row in jsonl_rows(output / "documents")}
    # The boilerplate the earlier dump held is cut; the new review stays whole.
    assert kept == {"new-100": reviews[100].text.strip(), "new-101": reviews[101].text}
    counters = json.loads((output / "stats.json").read_text())["steps"]["sentence"]["counters"]
    assert counters["spans_in_index.reviews-2024"] == 1
    capsys.readouterr()
    refused = ["run", "dedup_index", "--input", str(new_dump / "*.jsonl"), "--output", str(tmp_path / "again")]
    assert main([*refused, "--against", str(index)]) == 2
    assert "dedup_index only writes an index" in capsys.readouterr().err


def test_substring_cuts_runs_of_tokens_seen_before(corpus, reviews, gpt2_path, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(corpus / "*.jsonl"), "--output", str(output), "--progress_interval", "0"]
    assert main([*argv, "--dedup", "substring", "--substring_tokenizer", gpt2_path]) == 0
    dropped = sorted(row["id"] for row in jsonl_rows(output / "excluded" / "substring"))
    # Exact copies lose every token. Near copies joined their lines with spaces (near_copy), so only runs of
    # 50 tokens inside one line of the review repeat: they lose those and keep the rest.
    assert dropped == [f"review-00{n}-exact" for n in range(3)]
    kept = {row["id"]: row["text"] for row in jsonl_rows(output / "documents")}
    assert kept["review-000"] == reviews[0].text and len(kept) == 84
    for n in (10, 11, 12):
        near = near_copy(reviews[n].text, 0.01, seed=n)
        assert len(kept[f"review-0{n}-near"]) < len(near)
    counters = json.loads((output / "stats.json").read_text())["steps"]["substring"]["counters"]
    assert counters["dropped.substring_dedup_too_short"] == 3


def test_bloom_removes_documents_whose_ngrams_mostly_occurred_before(corpus, tmp_path):
    output = tmp_path / "out"
    argv = ["run", "dedup", "--input", str(corpus / "*.jsonl"), "--output", str(output), "--progress_interval", "0"]
    assert main([*argv, "--dedup", "bloom,minhash", "--bloom_expected_shingles", "100000"]) == 0
    removed = {row["id"]: row["metadata"] for row in jsonl_rows(output / "excluded" / "bloom")}
    assert {id_: metadata["duplicate_of"] for id_, metadata in removed.items()} == {
        **{f"review-00{n}-exact": f"review-00{n}" for n in range(3)},
        **{f"review-0{n}-near": f"review-0{n}" for n in (10, 11, 12)},
    }
    # Exact copies repeat every 13-gram; a 1 % edit leaves more than 80 % of them.
    assert {removed[f"review-00{n}-exact"]["bloom_duplicate_fraction"] for n in range(3)} == {1.0}
    assert all(0.8 < removed[f"review-0{n}-near"]["bloom_duplicate_fraction"] < 1 for n in (10, 11, 12))
    steps = json.loads((output / "stats.json").read_text())["steps"]
    counters = steps["bloom"]["counters"]
    assert (counters["in"], counters["out"], counters["dropped.bloom_duplicate"]) == (87, 81, 6)
    # The filter lets through every occurrence of a shingle two documents share, and its false positives.
    assert counters["candidates"] >= counters["shared_shingles"] * 2 + counters["unshared_candidates"]
    assert counters["unshared_candidates"] < 0.01 * (counters["shingles"] - counters["candidates"])
    # Nothing is left for MinHash to remove.
    assert "dropped.minhash_duplicate" not in steps["minhash"]["counters"]


# Two datasets that each number their rows from "0": every id names one document of each. Every dedup step must
# remove what it removes when the ids are unique, since documents are told apart by where they were read.
_EVERY_STEP = "exact,url,bloom,minhash,sentence,substring"
_INDEXED_STEPS = ("exact", "url", "minhash", "sentence")


def _numbered_rows(texts: list[str], urls: dict[int, str]) -> list[dict]:
    return [
        {"id": str(number), "text": text, **({"metadata": {"url": urls[number]}} if number in urls else {})}
        for number, text in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def shared_id_datasets(reviews) -> dict[str, list[dict]]:
    """Three datasets of real reviews, rows numbered from "0" in each, with duplicates within and across them."""
    texts = [review.text for review in reviews]
    first = [*texts[0:30], texts[1], near_copy(texts[2], 0.01, seed=2), BOILERPLATE + texts[5], texts[100]]
    second = [
        *texts[30:50],
        near_copy(texts[10], 0.01, seed=10),
        texts[35],
        BOILERPLATE + texts[36],
        texts[3],
        near_copy(texts[12], 0.02, seed=12),
    ]
    third = [texts[7], near_copy(texts[40], 0.01, seed=40), BOILERPLATE + texts[101], texts[102], texts[102]]
    return {
        "first": _numbered_rows(first, {3: "https://a.example/3", 33: "https://a.example/3/"}),
        "second": _numbered_rows(second, {0: "https://b.example/0", 23: "https://www.b.example/0"}),
        "third": _numbered_rows(third, {3: "https://b.example/0"}),
    }


def _write_dataset(folder: pathlib.Path, rows: list[dict], tag: str | None) -> None:
    """``rows`` as ``folder/rows.jsonl``; with ``tag``, every id made unique as ``<id>-<tag>``.

    ``<id>-<tag>`` sorts as (id, tag) does for these ids ('-' sorts before every digit), so the keep order of the
    unique ids is the order of the shared ids broken by the file each was read from.
    """
    folder.mkdir(parents=True)
    with (folder / "rows.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({**row, "id": row["id"] if tag is None else f"{row['id']}-{tag}"}) + "\n")


def _removed(output: pathlib.Path, steps) -> dict[str, list[tuple[str, str]]]:
    """Per step, the sorted (text, duplicate_of without its tag) of what it removed."""
    return {
        step: sorted(
            (row["text"], str(row["metadata"].get("duplicate_of", "")).split("-")[0])
            for row in jsonl_rows(output / "excluded" / step)
        )
        for step in steps
    }


@pytest.fixture(scope="module")
def shared_id_runs(shared_id_datasets, gpt2_path, tmp_path_factory) -> dict[str, pathlib.Path]:
    """dedup (every step), dedup_index and dedup --against, once with the shared ids and once with unique ones."""
    root = tmp_path_factory.mktemp("shared-ids")
    outputs = {}
    for variant in ("shared", "unique"):
        for name, rows in shared_id_datasets.items():
            _write_dataset(root / variant / name, rows, None if variant == "shared" else name)
        both = ["--input", str(root / variant / "first"), "--input", str(root / variant / "second")]
        common = ["--input_format", "jsonl", "--progress_interval", "0"]
        outputs[variant] = root / variant / "dedup"
        argv = ["run", "dedup", *both, "--output", str(outputs[variant]), *common, "--dedup", _EVERY_STEP]
        assert main([*argv, "--substring_tokenizer", gpt2_path]) == 0
        index = root / variant / "index"
        indexed = ",".join(_INDEXED_STEPS)
        assert main(["run", "dedup_index", *both, "--output", str(index), *common, "--dedup", indexed]) == 0
        outputs[f"{variant}-against"] = root / variant / "against"
        third = ["--input", str(root / variant / "third"), "--output", str(outputs[f"{variant}-against"])]
        assert main(["run", "dedup", *third, *common, "--dedup", indexed, "--against", str(index)]) == 0
    return outputs


@pytest.mark.slow
def test_ids_shared_across_inputs_change_nothing_any_dedup_step_removes(shared_id_runs):
    shared, unique = shared_id_runs["shared"], shared_id_runs["unique"]
    steps = _EVERY_STEP.split(",")
    removed = _removed(shared, steps)
    assert removed == _removed(unique, steps)
    # The copies within and across the two datasets. Ids compare as strings: "23" comes before "3" and keeps its
    # text; the boilerplate-led copies come before the reviews they hold, which bloom removes; the 2 % near copy
    # keeps too many distinct 13-grams for bloom and goes to MinHash. Sentence and substring only cut text.
    assert {step: len(rows) for step, rows in removed.items()} == {
        "exact": 3,
        "url": 1,
        "bloom": 4,
        "minhash": 1,
        "sentence": 0,
        "substring": 0,
    }
    assert sorted(row["text"] for row in jsonl_rows(shared / "documents")) == sorted(
        row["text"] for row in jsonl_rows(unique / "documents")
    )
    stats = json.loads((shared / "stats.json").read_text())["steps"]
    assert stats["shared_ids"]["counters"] == {"ids": 25, "documents": 50}
    assert "shared_ids" not in json.loads((unique / "stats.json").read_text())["steps"]


@pytest.mark.slow
def test_ids_shared_in_an_index_and_its_new_input_change_nothing_it_removes(shared_id_runs):
    removed = _removed(shared_id_runs["shared-against"], _INDEXED_STEPS)
    assert removed == _removed(shared_id_runs["unique-against"], _INDEXED_STEPS)
    # A copy of an indexed text and one of its own, a URL and a near copy the index holds; spans are cut, not removed.
    assert {step: len(rows) for step, rows in removed.items()} == {"exact": 2, "url": 1, "minhash": 1, "sentence": 0}
    kept = {row["id"]: row["text"] for row in jsonl_rows(shared_id_runs["shared-against"] / "documents")}
    assert set(kept) == {"2"} and not kept["2"].startswith("Subscribe")
