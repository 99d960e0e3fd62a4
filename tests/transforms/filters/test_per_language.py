"""FineWeb-2's per-language configs: reading them, the language_score step, rules built per language."""

from __future__ import annotations

import functools
import shutil

import pytest

from beamtrove.document import Document
from beamtrove.transforms.filters import GopherQualityFilter
from beamtrove.transforms.filters.base import Drop
from beamtrove.transforms.filters.per_language import LanguageConfigs, LanguageScoreFilter, PerLanguageFilter
from tests.conftest import require


@pytest.fixture(scope="module")
def configs_dir(data_dir):
    return require(data_dir / "fineweb2" / "configs")


@pytest.fixture(scope="module")
def configs(configs_dir) -> LanguageConfigs:
    return LanguageConfigs(str(configs_dir))


def _document(language: str | None, script: str | None, score: float | None, text: str = "text") -> Document:
    metadata = {key: value for key, value in (("language", language), ("language_script", script)) if value}
    if score is not None:
        metadata["language_score"] = score
    return Document(id="d", text=text, metadata=metadata)


def test_the_folder_is_listed_once_and_each_config_read_with_its_values(configs):
    assert len(configs.languages) == 1929
    assert {"tha_Thai", "deu_Latn", "cmn_Hani", "arb_Arab"} <= configs.languages
    assert "eng_Latn" not in configs.languages  # FineWeb-2 is FineWeb's non-English part
    thai = configs.settings("tha_Thai")
    assert (thai["language_score"], thai["dup_line_frac"], thai["line_punct_thr"]) == (0.9, 0.349, 0.0)
    assert thai["top_n_grams"][0] == [2, 0.221]
    assert "\u0e43\u0e19" in thai["stopwords"]


def test_a_language_without_a_config_borrows_the_fallback_or_has_none(configs_dir, configs):
    assert configs.config_language("tha_Thai") == "tha_Thai"
    assert configs.config_language("eng_Latn") is None
    assert configs.config_language(None) is None
    borrowing = LanguageConfigs(str(configs_dir), fallback="fra_Latn")
    assert borrowing.config_language("eng_Latn") == "fra_Latn"
    with pytest.raises(ValueError, match=r"The fallback language deu has no config .*it has deu_Latn"):
        LanguageConfigs(str(configs_dir), fallback="deu")


def test_a_missing_folder_says_where_to_get_the_configs(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"github\.com/huggingface/fineweb-2"):
        LanguageConfigs(str(tmp_path / "configs"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no <language>_<Script>\.yml config"):
        LanguageConfigs(str(tmp_path / "empty"))


def test_a_damaged_config_fails_when_checked_naming_its_file(configs_dir, tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in ("tha_Thai.yml", "deu_Latn.yml"):
        shutil.copy(configs_dir / name, folder / name)
    text = (folder / "deu_Latn.yml").read_text("utf-8")
    (folder / "deu_Latn.yml").write_text(text.replace("stopwords:", "stop_words:"), "utf-8")
    configs = LanguageConfigs(str(folder))
    configs.check(["tha_Thai"])
    with pytest.raises(ValueError, match=r"deu_Latn.yml is not a FineWeb-2 config: it lacks stopwords"):
        configs.check(["deu_Latn"])
    with pytest.raises(ValueError, match="fra_Latn has no config in"):
        configs.check(["fra_Latn"])


def test_the_language_score_step_keeps_each_language_above_its_own_minimum(configs):
    rule = LanguageScoreFilter(configs)
    # Thai's minimum is 0.9, German's 0.821 (FineWeb-2's configs).
    assert configs.settings("deu_Latn")["language_score"] == 0.821
    assert rule.filter(_document("tha", "Thai", 0.95)).metadata["language"] == "tha"
    assert rule.filter(_document("tha", "Thai", 0.9)).metadata["language"] == "tha"  # at least, as FineWeb-2
    assert rule.filter(_document("tha", "Thai", 0.89)) == Drop("language_score")
    assert rule.filter(_document("deu", "Latn", 0.85)).metadata["language"] == "deu"
    assert rule.filter(_document("deu", "Latn", 0.8)) == Drop("language_score")
    assert rule.filter(_document("eng", "Latn", 0.99)) == Drop("no_language_config")
    assert rule.filter(_document(None, None, None)) == Drop("language")
    assert rule.filter(_document("tha", "Thai", None)) == Drop("language_score")


def test_the_language_score_step_keeps_only_the_languages_asked_for(configs):
    rule = LanguageScoreFilter(configs, ["tha_Thai", "arb"])
    assert not isinstance(rule.filter(_document("tha", "Thai", 0.99)), Drop)
    assert not isinstance(rule.filter(_document("arb", "Arab", 0.99)), Drop)
    assert not isinstance(rule.filter(_document("arb", "Latn", 0.99)), Drop)  # a bare code: every script
    assert rule.filter(_document("deu", "Latn", 0.999)) == Drop("language")
    with pytest.raises(ValueError, match="xyz_Latn has no config"):
        LanguageScoreFilter(configs, ["xyz_Latn"])


def _quality(settings) -> GopherQualityFilter:
    return GopherQualityFilter(stop_words=settings["stopwords"], min_doc_words=None, min_avg_word_length=None)


def test_rules_are_built_once_per_language_from_its_config(configs, udhr_texts):
    rule = PerLanguageFilter("gopher_quality", configs, functools.partial(_quality))
    german, french = udhr_texts["deu"], udhr_texts["fra"]
    assert rule.filter(_document("deu", "Latn", 1.0, german)).text == german
    # French text has none of German's stop words: with German's settings it is dropped, with French's kept.
    assert rule.filter(_document("deu", "Latn", 1.0, french)) == Drop("gopher_enough_stop_words")
    assert rule.filter(_document("fra", "Latn", 1.0, french)).text == french
    assert set(rule._rules) == {"deu_Latn", "fra_Latn"}
    assert rule.filter(_document("eng", "Latn", 1.0, german)) == Drop("no_language_config")
