"""What the staged tests share: a corpus of real reviews with copies, one-pipeline runs over it, and comparisons."""

from __future__ import annotations

import json
import pathlib
import random

import pytest

from beamtrove.cli import main
from tests.conftest import jsonl_rows, near_copy

#: The dedup steps most runs use. The input's near duplicates are pairs: a few connected-components rounds
#: converge (the test checks none is left unconverged), and each unrolled round costs a task seconds.
EVERY_STEP = [
    "--dedup", "exact,url,minhash,sentence", "--cluster_map", "--minhash_threshold", "0.8", "--max_cc_rounds", "4"
]  # fmt: skip
EXACT = ["--dedup", "exact", "--cluster_map"]
#: Bytes one task holds: with about 1.3 MB of reviews, 4 partitions or more.
MEMORY = str(2 << 20)


@pytest.fixture(scope="session")
def corpus(movie_reviews, tmp_path_factory) -> pathlib.Path:
    """352 real reviews in two plain JSONL files: 300 originals, 20 exact copies, 12 URL copies, 20 2 % near copies.

    The rows are shuffled, so copies and what they copy fall in either file and before or after each other.
    """
    texts = list(movie_reviews.values())
    rows = [
        {"id": f"review-{n:03d}", "text": texts[n], "metadata": {"url": f"https://reviews.example/{n:03d}"}}
        for n in range(300)
    ]
    rows += [
        {"id": f"review-{n:03d}-exact", "text": texts[n], "metadata": {"url": f"https://mirror.example/{n:03d}"}}
        for n in range(0, 200, 10)
    ]
    # The same page as an original, spelled otherwise, with a review of its own.
    rows += [
        {
            "id": f"review-{n:03d}-url",
            "text": texts[300 + k],
            "metadata": {"url": f"https://www.REVIEWS.example/{n:03d}/"},
        }
        for k, n in enumerate(range(5, 125, 10))
    ]
    rows += [
        {
            "id": f"review-{n:03d}-near",
            "text": near_copy(texts[n], 0.02, seed=n),
            "metadata": {"url": f"https://near.example/{n:03d}"},
        }
        for n in range(3, 203, 10)
    ]
    random.Random(7).shuffle(rows)
    folder = tmp_path_factory.mktemp("staged-input")
    for part in range(2):
        with (folder / f"part-{part}.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows[part::2])
    return folder


def dedup_argv(corpus: pathlib.Path, output: pathlib.Path, *options: str) -> list[str]:
    return ["run", "dedup", "--input", str(corpus), "--output", str(output), "--progress_interval", "0", *options]


def staged(workers: int) -> list[str]:
    return ["--staged", "--workers", str(workers), "--memory", MEMORY]


@pytest.fixture(scope="session")
def one_pipeline(corpus, tmp_path_factory) -> pathlib.Path:
    """Every step in one pipeline."""
    output = tmp_path_factory.mktemp("one") / "out"
    assert main(dedup_argv(corpus, output, *EVERY_STEP)) == 0
    return output


@pytest.fixture(scope="session")
def one_pipeline_exact(corpus, tmp_path_factory) -> pathlib.Path:
    """Exact dedup alone in one pipeline."""
    output = tmp_path_factory.mktemp("one-exact") / "out"
    assert main(dedup_argv(corpus, output, *EXACT)) == 0
    return output


def run_rows(folder: pathlib.Path) -> dict[str, list[str]]:
    """Every row of a run folder (whole, as sorted JSON) by part: documents, each step's exclusions and clusters."""
    parts = {"documents": folder / "documents"}
    for kind in ("excluded", "clusters"):
        parts |= {f"{kind}/{step.name}": step for step in sorted((folder / kind).glob("*")) if step.is_dir()}
    return {name: sorted(json.dumps(row, sort_keys=True) for row in jsonl_rows(path)) for name, path in parts.items()}


def step_stats(folder: pathlib.Path) -> dict[str, dict]:
    """Each step's counters and distributions in ``stats.json``, without what is laid out otherwise.

    Writers make other files (so other bytes) in another layout.
    """
    steps = json.loads((folder / "stats.json").read_text())["steps"]
    return {
        step: {
            "counters": {
                name: value
                for name, value in entry["counters"].items()
                if not (name in ("bytes", "files") and step.lower().startswith("write"))
            },
            "distributions": entry["distributions"],
        }
        for step, entry in steps.items()
    }


def assert_same_run(folder: pathlib.Path, expected: pathlib.Path) -> None:
    assert run_rows(folder) == run_rows(expected)
    assert step_stats(folder) == step_stats(expected)
