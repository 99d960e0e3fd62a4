"""The fineweb2 pipeline end to end: real text in many languages, a GlotLID-style model, FineWeb-2's configs."""

from __future__ import annotations

import gzip
import json

import pytest

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.option_parsing import format_help, parse
from beamtrove.pipelines import fineweb2, pipeline_spec
from beamtrove.pipelines.fineweb2 import LANGUAGE_FILES, gopher_quality_rule
from beamtrove.stats import by_language, format_stats
from beamtrove.transforms.filters.per_language import LanguageConfigs
from tests.conftest import DATA, jsonl_rows, near_copy, require

CONFIGS = DATA / "fineweb2" / "configs"
LID_176 = DATA / "models" / "lid176" / "lid.176.ftz"
# UDHR translations read as web documents: their files' names and the pairs GlotLID-style ID gives them. The test
# model is sure enough of all but French to pass their configs' minimum scores; English has no config.
LANGUAGES = {
    "deu": "deu_Latn",
    "pol": "pol_Latn",
    "por_PT": "por_Latn",
    "nld": "nld_Latn",
    "tha": "tha_Thai",
    "cmn_hans": "cmn_Hani",
    "fra": "fra_Latn",
    "eng": "eng_Latn",
}
STEPS = ("language_filter", "language_score", "minhash", "gopher_repetition", "fineweb_quality", "gopher_quality")


def _as_extracted(text: str) -> str:
    # The UDHR files indent their lines and separate them by lines of spaces; extracted pages have neither.
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _documents(udhr_texts) -> list[dict]:
    rows = [{"id": name, "text": _as_extracted(udhr_texts[name])} for name in LANGUAGES]
    # A near copy of the German text, and the Polish one again under another id: each language's MinHash finds them.
    rows.append({"id": "deu-near", "text": near_copy(_as_extracted(udhr_texts["deu"]), 0.01, seed=3)})
    rows.append({"id": "pol-again", "text": _as_extracted(udhr_texts["pol"])})
    return rows


@pytest.fixture(scope="module")
def documents_file(udhr_texts, tmp_path_factory):
    path = tmp_path_factory.mktemp("fineweb2-input") / "documents.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in _documents(udhr_texts))
    return path


def _argv(documents_file, out, glotlid_model, *more: str) -> list[str]:
    return [
        "run",
        "fineweb2",
        "--input",
        str(documents_file),
        "--output",
        str(out),
        "--lid_model",
        str(glotlid_model),
        "--fineweb2_configs",
        str(require(CONFIGS)),
        "--direct_running_mode=in_memory",
        *more,
    ]


@pytest.fixture(scope="module")
def fineweb2_run(documents_file, glotlid_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("fineweb2")
    assert main(_argv(documents_file, out, glotlid_model)) == 0
    return out, json.loads((out / "stats.json").read_text())


def _kept(out) -> dict[str, dict]:
    return {row["id"]: row["metadata"] for folder in (out / "documents").iterdir() for row in jsonl_rows(folder)}


def _excluded(out, step: str) -> dict[str, dict]:
    return {row["id"]: row["metadata"] for row in jsonl_rows(out / "excluded" / step)}


def test_each_language_is_written_to_its_own_folder(fineweb2_run):
    out, stats = fineweb2_run
    kept = {}
    for folder in sorted((out / "documents").iterdir()):
        for row in jsonl_rows(folder):
            metadata = row["metadata"]
            assert folder.name == f"{metadata['language']}_{metadata['language_script']}", row["id"]
            kept[row["id"]] = folder.name
    assert LANGUAGE_FILES.startswith("${language}_${language_script}/")
    every = {row_id for step in STEPS[1:] for row_id in _excluded(out, step)} | set(kept)
    assert every == {*LANGUAGES, "deu-near", "pol-again"}
    assert stats["steps"]["language_filter"]["counters"] == {"in": 10, "out": 10}
    assert stats["steps"]["gopher_quality"]["counters"]["out"] == len(kept)


def test_glotlid_labels_every_document_with_its_top_pairs(fineweb2_run):
    out, _ = fineweb2_run
    labelled = _kept(out)
    for step in STEPS[1:]:
        labelled.update(_excluded(out, step))
    for name, pair in LANGUAGES.items():
        metadata = labelled[name]
        assert f"{metadata['language']}_{metadata['language_script']}" == pair
        assert 0.5 < metadata["language_score"] <= 1.0
        # FineWeb-2 kept every label above 0.01: the document's own is one.
        assert metadata[f"top_language_{pair}_score"] == metadata["language_score"]


def test_english_has_no_config_french_too_low_a_score_and_the_copies_go_within_their_language(fineweb2_run):
    out, _ = fineweb2_run
    language_score = _excluded(out, "language_score")
    assert {name: metadata["filter_reason"] for name, metadata in language_score.items()} == {
        "eng": "no_language_config",
        "fra": "language_score",  # 0.55 where French asks 0.824
    }
    assert language_score["fra"]["language_score"] < 0.824
    removed = {row_id: metadata["duplicate_of"] for row_id, metadata in _excluded(out, "minhash").items()}
    assert removed == {"deu-near": "deu", "pol-again": "pol"}


def test_every_language_s_text_passes_its_own_filters(fineweb2_run):
    out, _ = fineweb2_run
    # The UDHR is clean text: every language with a config keeps it, its copies gone.
    assert set(_kept(out)) == {"deu", "pol", "por_PT", "nld", "tha", "cmn_hans"}
    for step in STEPS[3:]:
        assert not (out / "excluded" / step).exists() or not _excluded(out, step), step


def test_every_language_is_counted_in_the_stats_and_the_report(fineweb2_run):
    out, stats = fineweb2_run
    languages = by_language(stats["steps"])
    assert set(languages) == set(LANGUAGES.values())
    german = languages["deu_Latn"]
    assert german["language_score"] == {"in": 2, "out": 2}
    assert german["gopher_repetition"]["in"] == 1  # its near copy went at the MinHash step
    assert languages["eng_Latn"]["language_score"] == {"in": 1, "dropped.no_language_config": 1}
    table = format_stats(stats)
    assert "Per language" in table and "deu_Latn" in table
    report = (out / "report.html").read_text("utf-8")
    assert "id=languages" in report and "tha_Thai" in report


def _contents(out) -> dict[str, list[str]]:
    """Each output file's lines, sorted (staged tasks may deal documents to part files in another order)."""
    files = sorted(path for folder in ("documents", "excluded") for path in (out / folder).rglob("*.jsonl.gz"))
    return {str(path.relative_to(out)): sorted(gzip.open(path, "rt").read().splitlines()) for path in files}


@pytest.mark.slow
def test_a_staged_run_writes_what_one_pipeline_writes(fineweb2_run, documents_file, glotlid_model, tmp_path):
    out, stats = fineweb2_run
    staged = tmp_path / "staged"
    assert main(_argv(documents_file, staged, glotlid_model, "--staged", "--workers", "2")) == 0
    assert _contents(staged) == _contents(out)
    assert by_language(json.loads((staged / "stats.json").read_text())["steps"]) == by_language(stats["steps"])


@pytest.mark.slow
def test_languages_keeps_only_those_asked_for(documents_file, glotlid_model, tmp_path):
    out = tmp_path / "two"
    assert main(_argv(documents_file, out, glotlid_model, "--languages", "tha_Thai,deu")) == 0
    assert {folder.name for folder in (out / "documents").iterdir()} <= {"tha_Thai", "deu_Latn"}
    dropped = _excluded(out, "language_score")
    assert {name for name, metadata in dropped.items() if metadata["filter_reason"] == "language"} == {
        "pol",
        "pol-again",
        "por_PT",
        "nld",
        "cmn_hans",
        "fra",
        "eng",
    }


@pytest.mark.parametrize(
    ("word_splitter", "reason"),
    [("language", None), ("beamtrove", "gopher_below_avg_threshold"), ("spacy", "gopher_above_avg_threshold")],
)
def test_thai_passes_gopher_quality_only_split_the_thai_way(udhr_texts, word_splitter, reason):
    # Thai's config asks for words of 2 to 10 characters on average: a character at a time is too short, spaCy's
    # English rules (whole runs between spaces) too long.
    settings = LanguageConfigs(str(require(CONFIGS))).settings("tha_Thai")
    document = Document(
        _as_extracted(udhr_texts["tha"]), "tha", metadata={"language": "tha", "language_script": "Thai"}
    )
    verdict = gopher_quality_rule(settings, word_splitter=word_splitter).filter(document)
    assert getattr(verdict, "reason", None) == reason


def test_the_option_fineweb2_refuses_is_not_in_its_help():
    assert "--language_threshold" not in format_help(pipeline_spec("fineweb2"))
    assert "--language_threshold" in format_help(pipeline_spec("fineweb"))


def test_languages_whose_words_cannot_be_split_here_are_named_before_the_run(
    documents_file, glotlid_model, tmp_path, caplog
):
    # Stanza downloads its models, so it is not installed here: FineWeb-2's languages that DataTrove splits with
    # it are named, with what they need. Named with --languages, one is refused.
    options = parse(pipeline_spec("fineweb2"), _argv(documents_file, tmp_path / "out", glotlid_model)[2:])
    fineweb2._warn_of_languages_without_words.cache_clear()  # said once per process: an earlier run said it
    pipeline_spec("fineweb2").flow(options)
    pipeline_spec("fineweb2").flow(options)
    warnings = [record.getMessage() for record in caplog.records if "cannot have their words split" in record.message]
    assert any("pcm_Latn" in warning and "pip install stanza" in warning for warning in warnings), warnings
    assert len([warning for warning in warnings if "stanza" in warning]) == 1  # once, for both flows
    refused = _argv(documents_file, tmp_path / "out", glotlid_model, "--languages", "pcm_Latn")
    with pytest.raises(ValueError, match=r"Splitting pcm_Latn words .* pip install stanza"):
        pipeline_spec("fineweb2").flow(parse(pipeline_spec("fineweb2"), refused[2:]))


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--lid_model", str(LID_176)], "labels languages without their script"),
        (["--fineweb2_configs", str(DATA / "fineweb2" / "absent")], "No per-language config folder"),
        (["--missing_config", "deu"], "The fallback language deu has no config"),
        (["--languages", "xyz_Latn"], "xyz_Latn has no config"),
        (["--language-threshold", "0.5"], "--language_threshold does not apply to fineweb2: each language's minimum"),
    ],
)
def test_bad_configuration_fails_before_the_run_saying_what_to_fix(
    documents_file, glotlid_model, tmp_path, capsys, more, message
):
    require(LID_176)
    assert main(_argv(documents_file, tmp_path / "out", glotlid_model, *more)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
