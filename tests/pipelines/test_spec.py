"""Pipeline declarations and the registry: what a declaration resolves to for one run's options."""

from __future__ import annotations

import dataclasses
import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.option_parsing import option_actions
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import PIPELINES, all_pipeline_specs, pipeline_spec
from beamtrove.pipelines.spec import GlobalStep
from beamtrove.transforms.dedup import ExactDedup
from tests.conftest import require


def test_the_registry_holds_every_pipeline_by_name():
    assert [spec.name for spec in all_pipeline_specs()] == sorted(PIPELINES)
    specs = all_pipeline_specs()
    assert {spec.name for spec in specs if spec.shard_safe} == {"convert", "extract", "filter", "fineweb"}
    assert {spec.name for spec in specs if spec.resumable} == {"extract", "filter", "fineweb"}
    with pytest.raises(ConfigurationError, match=r"Unknown pipeline 'finweb'; available: convert, decont_index, dedup"):
        pipeline_spec("finweb")


def test_a_flow_leaves_out_the_steps_the_options_do_not_ask_for(movie_reviews, tmp_path):
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text("".join(json.dumps({"text": text}) + "\n" for text in movie_reviews.values()))
    dedup = pipeline_spec("dedup")
    flow = dedup.flow(PipelineOptions(["--input", str(reviews), "--output", str(tmp_path / "out"), "--dedup",
                                       "sentence,exact"]))  # fmt: skip
    assert [(step.name, step.per_document) for step in flow.steps] == [("exact", False), ("sentence", False)]
    # One name per step: its label, stats name and excluded/ folder, the name --dedup knows it by.
    assert flow.funnel == ("read", "exact", "sentence", "write_documents")
    assert flow.output == str(tmp_path / "out") and flow.read_label == "read"
    assert flow.sink.documents_dir == str(tmp_path / "out" / "documents")
    with pytest.raises(
        ValueError, match="--dedup takes a comma-separated list of exact, url, bloom, minhash, sentence"
    ):
        dedup.flow(PipelineOptions(["--input", str(reviews), "--output", "o", "--dedup", "fuzzy"]))


def test_the_dump_moves_a_fineweb_run_into_its_folder(data_dir, tmp_path):
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    fineweb = pipeline_spec("fineweb")
    flow = fineweb.flow(PipelineOptions(["--input", warc, "--output", str(tmp_path), "--dump", "CC-MAIN-2020-34"]))
    assert flow.output == str(tmp_path / "CC-MAIN-2020-34")
    assert flow.steps[0].name == "add_dump"
    # Without --input, the dump's paths file is read from --cc_base (here a local folder without it).
    with pytest.raises(FileNotFoundError, match=r"Common Crawl has no dump CC-MAIN-2020-34 under .*warc\.paths\.gz"):
        fineweb.flow(PipelineOptions(["--output", str(tmp_path), "--dump", "CC-MAIN-2020-34", "--cc_base",
                                      str(tmp_path)]))  # fmt: skip
    with pytest.raises(ValueError, match="This pipeline needs --input or --dump"):
        fineweb.flow(PipelineOptions(["--output", str(tmp_path)]))


def test_a_shard_safe_declaration_cannot_hold_a_global_step(tmp_path):
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text('{"text": "one review"}\n')
    convert = pipeline_spec("convert")
    exact = GlobalStep(ExactDedup())
    wrong = dataclasses.replace(convert, steps=(lambda options: exact,))
    with pytest.raises(TypeError, match="The convert pipeline is declared shard-safe but has a global step"):
        wrong.flow(PipelineOptions(["--input", str(reviews), "--output", str(tmp_path / "out")]))


def test_one_option_names_what_splits_words_for_every_step_that_counts_them(tmp_path):
    # dedup_index: MinHash keys of each language's words (--word_splitter language).
    counting_words = {
        "convert",
        "decont_index",
        "dedup",
        "dedup_index",
        "extract",
        "filter",
        "fineweb",
        "fineweb2",
        "stats",
    }
    for spec in all_pipeline_specs():
        flags = {flag for action in option_actions(spec.option_classes) for flag in action.option_strings}
        splitters = {flag for flag in flags if "splitter" in flag}
        assert splitters == ({"--word_splitter", "--word-splitter"} if spec.name in counting_words else set()), spec
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text('{"text": "a review"}\n')
    options = [
        "--input",
        str(reviews),
        "--output",
        str(tmp_path / "out"),
        "--dedup",
        "bloom",
        "--word_splitter",
        "spacy",
    ]
    (bloom,) = pipeline_spec("dedup").flow(PipelineOptions(options)).steps
    assert bloom.transform._config.word_splitter == "spacy"
