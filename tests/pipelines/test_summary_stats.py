"""beamtrove run stats, merge-stats and dedup --count_tokens from the command line, on real reviews."""

from __future__ import annotations

import gzip
import json

import pytest

from beamtrove.report import read_summary_stats
from tests.conftest import beamtrove, beamtrove_here, require


def _stats(output) -> dict:
    return {
        step: figures["counters"] for step, figures in json.loads((output / "stats.json").read_text())["steps"].items()
    }


def test_stats_pipeline_writes_datatrove_layout_the_report_reads(review_jsonl, tmp_path):
    output = tmp_path / "out"
    done = beamtrove(
        "run", "stats", "--input", str(review_jsonl), "--output", str(output), "--summary_stats", "doc,line"
    )
    assert done.returncode == 0, done.stderr
    # 600 reviews; the malformed row between them becomes a dead letter.
    assert _stats(output)["summary_stats"]["in"] == 600
    summary = json.loads((output / "summary_stats" / "summary" / "n_lines" / "metric.json").read_text())["summary"]
    assert summary["n"] == 600 and summary["unit"] == "task"
    figures = read_summary_stats(str(output))
    assert {"length", "n_lines", "line_duplicates"} <= figures.keys()
    assert sum(count for _, count in figures["length"].histogram) == 600

    merged = tmp_path / "merged"
    done = beamtrove_here("merge-stats", str(merged), str(output / "summary_stats"), str(output / "summary_stats"))
    assert done.returncode == 0, done.stderr
    twice = json.loads((merged / "summary" / "n_lines" / "metric.json").read_text())["summary"]
    assert (twice["n"], twice["total"], twice["mean"]) == (2 * 600, 2 * summary["total"], summary["mean"])


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--summary_stats", "doc,words", "doc, word, line, paragraph, sentence, token, lang"),
        ("--summary_groups", "summary,hosts", "summary, histogram, fqdn, suffix"),
        ("--summary_tokenizer", "/nonexistent/tokenizer.json", "No tokenizer"),
    ],
)
def test_bad_options_fail_before_the_run(review_jsonl, tmp_path, option, value, message):
    blocks = ["--summary_stats", "token"] if option == "--summary_tokenizer" else []
    done = beamtrove(
        "run", "stats", "--input", str(review_jsonl), "--output", str(tmp_path / "o"), *blocks, option, value
    )
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "o" / "stats.json").exists()


def test_merge_stats_refuses_a_folder_without_statistics(tmp_path):
    done = beamtrove_here("merge-stats", str(tmp_path / "merged"), str(tmp_path))
    assert done.returncode == 2 and "metric.json" in done.stderr


@pytest.mark.slow
def test_dedup_counts_tokens_before_and_after(review_jsonl, data_dir, tmp_path):
    tokenizer = str(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"))
    output = tmp_path / "dedup"
    done = beamtrove(
        "run", "dedup", "--input", str(review_jsonl), "--output", str(output), "--dedup", "exact",
        "--count_tokens", tokenizer,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = _stats(output)
    before, after = steps["tokens_before_dedup"], steps["tokens_after_dedup"]
    assert before["in"] == before["out"] == 600
    assert after["in"] == steps["exact"]["out"]
    assert 0 < after["tokens"] <= before["tokens"]
    kept = [json.loads(line) for path in (output / "documents").glob("*.jsonl.gz") for line in _gunzip(path)]
    assert sum(row["metadata"]["token_count"] for row in kept) == after["tokens"]


def _gunzip(path):
    with gzip.open(path, "rt") as lines:
        return lines.read().splitlines()
