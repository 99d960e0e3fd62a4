"""The filter pipeline: the steps --steps names, in that order, over real movie reviews."""

from __future__ import annotations

import json

import pytest

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.layout import WRITE_DOCUMENTS
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.pipelines.filter import FILTER_STEPS
from beamtrove.transforms.filters import C4QualityFilter, Drop, GopherQualityFilter, GopherRepetitionFilter
from tests.conftest import jsonl_rows


@pytest.fixture(scope="module")
def review_documents(movie_reviews, tmp_path_factory):
    """300 real movie reviews as one JSONL file with ids, and the documents they are."""
    folder = tmp_path_factory.mktemp("review-documents")
    documents = [Document(text, name) for name, text in list(movie_reviews.items())[:300]]
    lines = [json.dumps({"id": document.id, "text": document.text}) for document in documents]
    (folder / "reviews.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, documents


def _expected(documents, rules):
    """What running ``rules`` one after the other keeps, and the step and reason of each document dropped."""
    kept, dropped = [], {}
    for document in documents:
        current = document
        for rule in rules:
            verdict = rule.filter(current)
            if isinstance(verdict, Drop):
                dropped[document.id] = (rule.name, verdict.reason)
                break
            current = verdict
        else:
            kept.append(current)
    return kept, dropped


def test_steps_run_in_the_order_given_and_drop_what_each_filter_drops(review_documents, tmp_path):
    folder, documents = review_documents
    steps = "c4_quality,gopher_repetition,gopher_quality"
    assert main(["run", "filter", "--input", str(folder), "--output", str(tmp_path), "--steps", steps]) == 0
    kept, dropped = _expected(documents, [C4QualityFilter(), GopherRepetitionFilter(), GopherQualityFilter()])
    # C4 quality rewrites what it keeps (lines and citations removed): the written texts are the rewritten ones.
    assert {row["id"]: row["text"] for row in jsonl_rows(tmp_path / "documents")} == {d.id: d.text for d in kept}
    assert 0 < len(kept) < len(documents) and len(dropped) == len(documents) - len(kept)
    for step in steps.split(","):
        excluded = jsonl_rows(tmp_path / "excluded" / step)
        expected = {doc_id: reason for doc_id, (name, reason) in dropped.items() if name == step}
        assert {row["id"]: row["metadata"]["filter_reason"] for row in excluded} == expected
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["funnel"] == ["read", *steps.split(","), WRITE_DOCUMENTS]
    assert stats["steps"]["gopher_quality"]["counters"]["out"] == len(kept)


def test_word_splitter_spacy_gives_datatrove_decisions_on_text_without_spaces(udhr_texts, tmp_path):
    pytest.importorskip("spacy", reason="--word_splitter spacy needs spaCy: pip install 'beamtrove[spacy]'")
    # DataTrove 0.10.1's GopherQualityFilter() (spaCy words) on these declarations: Japanese and Thai words are
    # runs of characters, too long on average, and Dzongkha has too few of them; beamtrove's own splitter
    # counts a word per character in these scripts, too short on average. Both agree on German.
    languages = ("deu", "dzo", "jpn", "tha")
    rows = [json.dumps({"id": language, "text": udhr_texts[language]}) for language in languages]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "udhr.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = ["run", "filter", "--input", str(tmp_path / "in"), "--steps", "gopher_quality"]
    assert main([*argv, "--output", str(tmp_path / "spacy"), "--word_splitter", "spacy"]) == 0
    assert main([*argv, "--output", str(tmp_path / "default")]) == 0

    def reasons(output):
        excluded = jsonl_rows(output / "excluded" / "gopher_quality")
        return {row["id"]: row["metadata"]["filter_reason"] for row in excluded}

    assert reasons(tmp_path / "spacy") == {
        "deu": "gopher_enough_stop_words",
        "dzo": "gopher_short_doc",
        "jpn": "gopher_above_avg_threshold",
        "tha": "gopher_above_avg_threshold",
    }
    assert reasons(tmp_path / "default") == {
        "deu": "gopher_enough_stop_words",
        "dzo": "gopher_below_avg_threshold",
        "jpn": "gopher_below_avg_threshold",
        "tha": "gopher_below_avg_threshold",
    }


def test_the_language_filter_takes_a_glotlid_model_its_pairs_and_top_pairs(udhr_texts, glotlid_model, tmp_path):
    names = ("deu", "fra", "tha", "uzn_cyrl", "uzn_latn")
    rows = [json.dumps({"id": name, "text": udhr_texts[name]}) for name in names]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "udhr.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = ["run", "filter", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    options = ["--lid_model", str(glotlid_model), "--languages", "deu_Latn,uzn", "--keep_top_pairs_threshold", "0.01"]
    assert main([*argv, "--steps", "language_filter", *options]) == 0
    kept = {row["id"]: row["metadata"] for row in jsonl_rows(tmp_path / "out" / "documents")}
    excluded = {row["id"]: row["metadata"] for row in jsonl_rows(tmp_path / "out" / "excluded" / "language_filter")}
    assert sorted(kept) == ["deu", "uzn_cyrl", "uzn_latn"] and sorted(excluded) == ["fra", "tha"]
    found = {name: (data["language"], data["language_script"]) for name, data in {**kept, **excluded}.items()}
    assert found == {
        "deu": ("deu", "Latn"), "fra": ("fra", "Latn"), "tha": ("tha", "Thai"), "uzn_cyrl": ("uzn", "Cyrl"),
        "uzn_latn": ("uzn", "Latn"),
    }  # fmt: skip
    # The scores of the wanted labels above 0.01 alone: uzn stands for both its scripts.
    for name, metadata in {**kept, **excluded}.items():
        top = {key for key in metadata if key.startswith("top_language_")}
        assert top <= {"top_language_deu_Latn_score", "top_language_uzn_Cyrl_score", "top_language_uzn_Latn_score"}
        assert (f"top_language_{metadata['language']}_{metadata['language_script']}_score" in top) == (name in kept)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (None, "filter needs --steps, a comma-separated list of: url_filter, language_filter"),
        ("gopher_qualty", "Unknown step 'gopher_qualty' in --steps; available: url_filter,"),
        ("c4_quality, c4_quality", "--steps names 'c4_quality' twice; each step runs once."),
        ("c4_badwords", "The c4_badwords step needs --badwords_dir"),
    ],
)
def test_bad_steps_fail_before_the_run_with_what_to_fix(review_documents, tmp_path, capsys, steps, message):
    folder, _ = review_documents
    argv = ["run", "filter", "--input", str(folder), "--output", str(tmp_path / "out")]
    assert main([*argv, *(["--steps", steps] if steps else [])]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_every_step_is_named_as_its_stats_and_takes_its_options_on_the_command_line(data_dir, tmp_path):
    spec = pipeline_spec("filter")
    assert spec.shard_safe and spec.resumable and spec.summary_stats
    options = {option_class.__name__ for option_class in spec.option_classes}
    assert all(choice.options is None or choice.options.__name__ in options for choice in FILTER_STEPS.values())
    # The decont index and the classifier model are built by their own tests (test_decont_index, test_classifier).
    names = [name for name in FILTER_STEPS if name not in ("decont", "classifier")]
    # A real bad-words list, under the language name the filter looks for.
    (tmp_path / "en").write_bytes((data_dir / "blocklists" / "ut1" / "banned_words.txt").read_bytes())
    parsed = parse(
        spec,
        [
            *("--input", "x", "--output", "y", "--steps", ",".join(names)),
            *("--lid_model", str(data_dir / "models" / "lid176" / "lid.176.ftz")),
            *("--url_blocklist", str(data_dir / "blocklists" / "ut1"), "--badwords_dir", str(tmp_path)),
        ],
    )
    assert [step.name for make in spec.steps if (step := make(parsed))] == names
