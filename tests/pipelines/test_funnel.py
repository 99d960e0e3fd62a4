"""Every pipeline's funnel names its steps once: each entry is a step whose counters say what it got and passed on."""

from __future__ import annotations

import itertools
import json
import pathlib

import pytest

from beamtrove.cli import main
from beamtrove.pipelines import PIPELINES
from tests.conftest import require

WARC = "cc-main-2024-22_whirlwind.warc.gz"
DEDUP_STEPS = ("exact", "url", "bloom", "minhash", "sentence", "substring")


@pytest.fixture(scope="module")
def inputs(movie_reviews, inaugural, data_dir, glotlid_model, tmp_path_factory) -> dict[str, str]:
    """Small real inputs: 60 reviews with exact copies and a near copy, one WARC, a label list, GPT-2's tokenizer, a
    GlotLID-style model and FineWeb-2's configs."""
    folder = tmp_path_factory.mktemp("funnel-inputs")
    texts = list(movie_reviews.values())[:60]
    rows = [{"text": text, "id": f"r{n}", "metadata": {"url": f"https://reviews.example/{n}"}} for n, text in
            enumerate(texts)]  # fmt: skip
    rows += [dict(rows[n], id=f"copy{n}") for n in range(5)]
    rows.append(
        {"text": texts[10].replace(" the ", " a ", 1), "id": "near10", "metadata": {"url": "https://x.example/"}}
    )
    (folder / "reviews.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    sentences = [line for line in inaugural["1961-Kennedy"].splitlines() if len(line.split()) > 15][:5]
    (folder / "labels.txt").write_text("\n".join(sentences) + "\n")
    return {
        "rows": str(folder / "reviews.jsonl"),
        "labels": str(folder / "labels.txt"),
        "warc": str(require(data_dir / "warc" / WARC)),
        "tokenizer": str(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json")),
        "glotlid": str(glotlid_model),
        "configs": str(require(data_dir / "fineweb2" / "configs")),
    }


def _arguments(pipeline: str, inputs: dict[str, str], tokenized: pathlib.Path) -> list[str]:
    return _argument_table(inputs, tokenized)[pipeline]


def _argument_table(inputs: dict[str, str], tokenized: pathlib.Path) -> dict[str, list[str]]:
    return {
        "convert": ["--input", inputs["rows"]],
        "decont_index": ["--input", inputs["labels"]],
        "dedup": [
            "--input",
            inputs["rows"],
            "--dedup",
            ",".join(DEDUP_STEPS),
            "--substring_tokenizer",
            inputs["tokenizer"],
            "--substring_min_tokens",
            "20",
            "--min_doc_words",
            "0",
        ],
        "dedup_index": ["--input", inputs["rows"]],
        "extract": ["--input", inputs["warc"]],
        "filter": ["--input", inputs["rows"], "--steps", "gopher_quality,c4_quality,fineweb_quality"],
        "fineweb": ["--input", inputs["warc"], "--dump", "CC-MAIN-2024-22"],
        "fineweb2": [
            "--input",
            inputs["warc"],
            "--lid_model",
            inputs["glotlid"],
            "--fineweb2_configs",
            inputs["configs"],
        ],
        "merge_tokens": ["--input", str(tokenized)],
        "stats": ["--input", inputs["rows"]],
        "tokenize": ["--input", inputs["rows"], "--tokenizer", inputs["tokenizer"]],
    }


@pytest.fixture(scope="module")
def tokenized(inputs, tmp_path_factory) -> pathlib.Path:
    output = tmp_path_factory.mktemp("funnel-tokenized") / "run"
    assert main(["run", "tokenize", *_arguments("tokenize", inputs, output), "--output", str(output)]) == 0
    return output


def _stats(pipeline: str, inputs, tokenized, tmp_path) -> tuple[dict, pathlib.Path]:
    output = tmp_path / pipeline
    argv = ["run", pipeline, *_arguments(pipeline, inputs, tokenized), "--output", str(output)]
    assert main([*argv, "--progress_interval", "0"]) == 0
    if pipeline == "fineweb":
        output = output / "CC-MAIN-2024-22"  # a run of one dump writes into the dump's folder
    return json.loads((output / "stats.json").read_text()), output


def test_every_registered_pipeline_is_run_here():
    placeholder = dict.fromkeys(("rows", "labels", "warc", "tokenizer", "glotlid", "configs"), "")
    assert set(_argument_table(placeholder, pathlib.Path())) == set(PIPELINES)


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_each_funnel_step_counts_what_it_got_and_passed_on(pipeline, inputs, tokenized, tmp_path):
    stats, output = _stats(pipeline, inputs, tokenized, tmp_path)
    funnel, steps = stats["funnel"], stats["steps"]
    assert funnel[0] == "read" and len(funnel) == len(set(funnel)) >= 2
    for step in funnel:
        counters = steps[step]["counters"]
        assert {"in", "out"} <= set(counters), f"{pipeline}: funnel step {step} has counters {sorted(counters)}"
    # What a step passed on is what the next one got: no step's records are counted under another name.
    for passed, got in itertools.pairwise(funnel):
        if steps[passed]["counters"]["out"] != steps[got]["counters"]["in"]:
            pytest.fail(f"{pipeline}: {passed} passed on {steps[passed]['counters']['out']}, {got} got "
                        f"{steps[got]['counters']['in']}")  # fmt: skip
    assert steps["read"]["counters"]["out"] > 0
    # Every step named on the command line or set aside to excluded/ is a funnel step, under one name.
    excluded = output / "excluded"
    assert {path.name for path in excluded.iterdir()} <= set(funnel) if excluded.exists() else True
    if pipeline == "dedup":
        assert funnel[1:-1] == list(DEDUP_STEPS)
        assert all(steps[step]["counters"]["in"] > 0 for step in DEDUP_STEPS)
        removed = {step: sum(v for k, v in steps[step]["counters"].items() if k.startswith("dropped.")) for step in
                   DEDUP_STEPS}  # fmt: skip
        # The five copies go to exact; the near copy to bloom, the first step that compares n-grams.
        assert removed == {"exact": 5, "url": 0, "bloom": 1, "minhash": 0, "sentence": 0, "substring": 0}, removed
    if pipeline == "fineweb":
        assert "add_dump" in funnel
    if pipeline == "fineweb2":
        # Web pages go through the URL filter and extraction before language ID; extracted documents would not.
        assert funnel[1:4] == ["url_filter", "extract", "language_filter"]
