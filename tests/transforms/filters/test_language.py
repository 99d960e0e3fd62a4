"""LanguageFilter on the UDHR in 388 languages: with fastText's lid.176, and with a model labelled as GlotLID's."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import zipfile

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.assets import fetch_assets
from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.filters import Drop, Filter, LanguageFilter
from beamtrove.transforms.filters.language import UnknownLanguageError
from tests.conftest import require, run_and_collect
from tests.transforms.filters.conftest import outcomes


@pytest.fixture(scope="module")
def model_path(data_dir) -> str:
    return str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))


def language_rule(model_path, **options) -> LanguageFilter:
    rule = LanguageFilter(model_path, **options)
    rule.setup()
    return rule


def doc(udhr_texts, code: str) -> Document:
    return Document(text=udhr_texts[code], id=code, metadata={"source": "udhr"})


def test_english_is_kept_and_labelled(model_path, udhr_texts):
    kept = language_rule(model_path).filter(doc(udhr_texts, "eng"))
    assert kept.metadata["language"] == "en"
    assert 0.95 < kept.metadata["language_score"] <= 1.0
    assert kept.metadata["source"] == "udhr"
    assert kept.text == udhr_texts["eng"]


@pytest.mark.parametrize(("code", "language"), [("fra", "fr"), ("deu", "de"), ("cmn_hans", "zh"), ("rus", "ru")])
def test_other_languages_are_dropped_with_their_label(model_path, udhr_texts, code, language):
    verdict = language_rule(model_path).filter(doc(udhr_texts, code))
    assert isinstance(verdict, Drop) and verdict.reason == "language"
    assert verdict.document.metadata["language"] == language
    assert verdict.document.metadata["language_score"] > 0.95
    assert verdict.document.metadata["source"] == "udhr"


def test_threshold_and_wanted_languages(model_path, udhr_texts):
    english = doc(udhr_texts, "eng")
    score = language_rule(model_path).filter(english).metadata["language_score"]
    # Just above the score: dropped, still labelled English.
    verdict = language_rule(model_path, language_threshold=score + 0.001).filter(english)
    assert isinstance(verdict, Drop) and verdict.document.metadata["language"] == "en"
    assert language_rule(model_path, languages=("en", "fr")).filter(doc(udhr_texts, "fra")).metadata["language"] == "fr"
    # Below 0.5 every language's probability is considered, not only the top one: Mapudungun's (amr) declaration
    # scores Turkish 0.24 first and English 0.18 second, so English at a 0.15 threshold keeps it, labelled tr.
    mapudungun = doc(udhr_texts, "amr")
    kept = language_rule(model_path, language_threshold=0.15).filter(mapudungun)
    assert not isinstance(kept, Drop)
    assert kept.metadata["language"] == "tr" and 0.2 < kept.metadata["language_score"] < 0.3
    assert isinstance(language_rule(model_path, language_threshold=0.2).filter(mapudungun), Drop)


def test_reach_tells_what_the_scores_tell_at_a_threshold(model_path, udhr_texts):
    # Every declaration, cut into paragraphs: some in no language the model is sure of.
    texts = [paragraph for text in udhr_texts.values() for paragraph in text.split("\n") if paragraph.strip()][::7]
    rule = language_rule(model_path, languages=("en", "tr"))
    scores = [score.wanted for score in rule.language_scores(texts)]
    for threshold in (0.05, 0.1, 0.18, 0.5):
        assert rule.reach(texts, threshold) == [score >= threshold for score in scores]
    assert 0 < sum(rule.reach(texts, 0.1)) < len(texts)


def test_any_language_and_label_only(model_path, udhr_texts):
    any_language = language_rule(model_path, languages=None)
    assert any_language.filter(doc(udhr_texts, "fra")).metadata["language"] == "fr"
    # Nkoya's file is empty: fastText's best guess is English at 0.12, below the threshold.
    empty = any_language.filter(doc(udhr_texts, "nku"))
    assert isinstance(empty, Drop) and empty.document.metadata["language"] == "en"
    assert empty.document.metadata["language_score"] < 0.65
    labelled = language_rule(model_path, label_only=True).filter(doc(udhr_texts, "deu"))
    assert not isinstance(labelled, Drop) and labelled.metadata["language"] == "de"


def test_codes_the_model_does_not_know_fail_at_construction_listing_those_it_does(model_path):
    # DataTrove's filter takes the labels of lid.176 without their __label__ prefix: en, fr, ...
    every_code = [label.removeprefix("__label__") for label in language_rule(model_path)._model.get_labels()]
    assert len(every_code) == 176 and {"en", "fr", "zh", "als"} <= set(every_code)
    assert LanguageFilter(model_path, languages=every_code).languages == frozenset(every_code)
    refusal = re.escape("not a language code of the lid.176 model; it knows: af, als, am,")
    for wrong in (["english"], ["en", "__label__fr"], ["en", ""]):
        with pytest.raises(UnknownLanguageError, match=refusal):
            LanguageFilter(model_path, languages=wrong)


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), 2, -0.5])
def test_a_threshold_no_probability_can_clear_fails_at_construction(model_path, threshold):
    # NaN compares false with every score: each document would be dropped.
    with pytest.raises(ValueError, match=rf"^language_threshold must be a number from 0 to 1 \(got {threshold!r}\)"):
        LanguageFilter(model_path, language_threshold=threshold)


def test_a_language_name_instead_of_a_code_fails_the_fineweb_run_before_any_work(
    model_path, data_dir, tmp_path, capsys
):
    # Issue 16, case 12: --languages english dropped every document and reported success.
    warc = require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz")
    blocklist = require(data_dir / "blocklists" / "ut1")
    out = tmp_path / "out"
    argv = ["run", "fineweb", "--input", str(warc), "--output", str(out), "--lid_model", model_path]
    assert main([*argv, "--url_blocklist", str(blocklist), "--languages", "english"]) == 2
    assert "--languages english: not a language code of the lid.176 model; it knows: af, als, am, " in (
        capsys.readouterr().err
    )
    assert not out.exists()


def test_missing_model_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"lid\.176"):
        LanguageFilter(str(tmp_path / "lid.176.ftz"))


# Where lid.176.ftz's parts end: header 8, arguments 64, dictionary (7,411 entries and 42,765 pruned pairs), the
# quantized input matrix, the output matrix (176 x 16 floats, the last 11,265 bytes).
@pytest.mark.parametrize(
    ("size", "part"),
    [(0, "header"), (7, "header"), (40, "arguments"), (70_000, "dictionary"), (500_000, "input matrix"),
     (938_012, "output matrix")],
)  # fmt: skip
def test_a_model_cut_short_is_refused_naming_the_part_the_file_and_the_option(model_path, tmp_path, size, part):
    # fastText's loader loops for ever on a dictionary cut short, and loads a cut matrix as garbage.
    cut = tmp_path / "lid.176.ftz"
    cut.write_bytes(pathlib.Path(model_path).read_bytes()[:size])
    message = (
        f"The language-ID model {cut} (--lid_model) is not a whole fastText model: the file ends at byte {size}, "
        f"inside its {part} (a copy cut short?); replace it."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LanguageFilter(str(cut))


def test_a_file_that_is_no_fasttext_model_is_refused(data_dir, tmp_path):
    not_a_model = require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json")
    with pytest.raises(ValueError, match=r"is not a whole fastText model: it does not start as one \(magic \d+"):
        LanguageFilter(str(not_a_model))


def test_fineweb_with_a_cached_model_cut_short_fails_in_one_line_naming_it(model_path, data_dir, tmp_path):
    # A cut lid.176.ftz in the assets cache was "present", and fineweb died of a segfault (139) in 2 runs of 3.
    cache = tmp_path / "assets"
    cached = fetch_assets(["lid176"], pathlib.Path(model_path).parent, cache)["lid176"]
    cached.write_bytes(pathlib.Path(model_path).read_bytes()[:500_000])
    warc = require(data_dir / "warc" / "cc-main-2024-22_whirlwind.warc.gz")
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", str(warc), "--output",
               str(tmp_path / "out"), "--url_blocklist", str(require(data_dir / "blocklists" / "ut1"))]  # fmt: skip
    environment = {**os.environ, "BEAMTROVE_ASSETS": str(cache)}
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600, check=False)
    assert (result.returncode, result.stderr) == (
        2,
        f"beamtrove: error: The language-ID model {cached} (--lid_model) is not a whole fastText model: the file "
        "ends at byte 500000, inside its input matrix (a copy cut short?); replace it (`beamtrove assets fetch` "
        "fetches it again).\n",
    )
    assert not (tmp_path / "out").exists()


def read_declaration(code: str, zip_path: str) -> Document:
    """The UDHR in language ``code``, read from NLTK's zip inside the pipeline.

    Beam pickles and compresses the values of ``beam.Create`` several times over, which for the 5.7 MB of all
    388 declarations takes seconds; the codes alone are small.
    """
    with zipfile.ZipFile(zip_path) as archive:
        return Document(text=archive.read(f"udhr2/{code}.txt").decode("utf-8"), id=code, metadata={"source": "udhr"})


def test_all_388_declarations_through_a_pipeline(model_path, udhr_texts, data_dir):
    codes = sorted(udhr_texts)
    assert len(codes) == 388
    zip_path = str(data_dir / "text-corpora" / "nltk_data" / "udhr2.zip")
    checked = {"eng", "fra", "deu", "spa", "cmn_hans", "jpn", "arb", "hin", "por_BR", "rus"}

    def build(pipeline):
        docs = pipeline | beam.Create(codes) | beam.Map(read_declaration, zip_path)
        result = docs | Filter(LanguageFilter(model_path))
        # Only three declarations read as English above 0.65: English itself, Nigerian Pidgin (pcm, 0.76) and
        # Scots (sco, 0.81), both English-based.
        assert_that(
            outcomes(result) | beam.Filter(lambda outcome: outcome[0] == "kept"),
            equal_to([("kept", "eng"), ("kept", "pcm"), ("kept", "sco")]),
            label="Kept",
        )
        labels = (result.kept, result.excluded) | beam.Flatten() | beam.Filter(lambda d: d.id in checked)
        assert_that(
            labels | beam.Map(lambda d: (d.id, d.metadata["language"], d.metadata.get("filter_reason"))),
            equal_to(
                [
                    ("eng", "en", None),
                    ("fra", "fr", "language"),
                    ("deu", "de", "language"),
                    ("spa", "es", "language"),
                    ("cmn_hans", "zh", "language"),
                    ("jpn", "ja", "language"),
                    ("arb", "ar", "language"),
                    ("hin", "hi", "language"),
                    ("por_BR", "pt", "language"),
                    ("rus", "ru", "language"),
                ]
            ),
            label="Labels",
        )

    counters = run_and_collect(build)["language_filter"]["counters"]
    assert counters == {"in": 388, "out": 3, "dropped.language": 385}


# --------------------------------------------------------------------------- a GlotLID-style model

#: Held-out lines this long or longer: a line such as "Artikel 2" reads as Dutch as well as German.
_SENTENCE = 40


def documents(lines: list[str]) -> list[Document]:
    return [Document(text=line, id=str(index)) for index, line in enumerate(lines)]


def labels_of(verdicts) -> list[tuple[str, str]]:
    return [(verdict.metadata["language"], verdict.metadata["language_script"]) for verdict in verdicts]


@pytest.mark.parametrize(
    ("label", "language", "script", "wrong_at_most"),
    [("tha_Thai", "tha", "Thai", 0), ("deu_Latn", "deu", "Latn", 1), ("rus_Cyrl", "rus", "Cyrl", 0),
     ("cmn_Hani", "cmn", "Hani", 0)],
)  # fmt: skip
def test_a_glotlid_model_labels_held_out_lines_with_their_language_and_script(
    glotlid_model, glotlid_lines, label, language, script, wrong_at_most
):
    lines = [line for line in glotlid_lines[label].held_out if len(line) >= _SENTENCE]
    assert len(lines) >= 9
    verdicts = language_rule(str(glotlid_model), languages=None, label_only=True).filter_batch(documents(lines))
    found = labels_of(verdicts)
    assert len(found) - found.count((language, script)) <= wrong_at_most
    for verdict in verdicts:
        # DataTrove's keys, in its order; no top pairs unless asked for.
        assert list(verdict.metadata) == ["language_script", "language", "language_score"]
        assert 0 < verdict.metadata["language_score"] <= 1


def test_whole_held_out_texts_are_labelled_with_their_language_and_script(glotlid_model, glotlid_lines):
    rule = language_rule(str(glotlid_model), languages=None, label_only=True)
    names = ("tha_Thai", "deu_Latn", "rus_Cyrl", "jpn_Jpan", "cmn_Hani", "fra_Latn")
    verdicts = rule.filter_batch(documents(["\n".join(glotlid_lines[label].held_out) for label in names]))
    assert labels_of(verdicts) == [tuple(label.split("_")) for label in names]
    # The small model is surest of Thai and German, least of Chinese (each line is a word to it).
    scores = [verdict.metadata["language_score"] for verdict in verdicts]
    assert min(scores[:2]) > 0.8 and min(scores) > 0.3 and max(scores) <= 1


def _scores_above(rule: LanguageFilter, text: str, threshold: float) -> dict[str, float]:
    """Every label the model scores above ``threshold`` for ``text``, asked for all its labels as DataTrove does."""
    labels, scores = rule._model.predict(text.replace("\n", " "), k=-1)
    return {label.removeprefix("__label__"): float(s) for label, s in zip(labels, scores, strict=True) if s > threshold}


def test_top_pairs_are_every_label_above_the_threshold_as_datatrove_writes_them(glotlid_model, glotlid_lines):
    rule = language_rule(str(glotlid_model), languages=None, label_only=True, keep_top_pairs_threshold=0.01)
    lines = [line for label in ("tha_Thai", "deu_Latn", "rus_Cyrl", "cmn_Hani", "fra_Latn") for line in
             glotlid_lines[label].held_out]  # fmt: skip
    pairs_seen = 0
    for line, verdict in zip(lines, rule.filter_batch(documents(lines)), strict=True):
        metadata = verdict.metadata
        expected = {f"top_language_{label}_score": score for label, score in _scores_above(rule, line, 0.01).items()}
        # After the language, its script and score: the labels in the model's order, best first.
        assert list(metadata)[3:] == list(expected) and metadata == {**metadata, **expected}
        best = f"top_language_{metadata['language']}_{metadata['language_script']}_score"
        assert metadata[best] == metadata["language_score"] == max(expected.values())
        pairs_seen += len(expected)
    assert pairs_seen > 2 * len(lines)


def test_a_score_just_above_a_threshold_counts_as_in_datatrove(glotlid_model, glotlid_lines):
    # fastText reports p + 1e-5 but compares p with the threshold it is given: asked for labels at 0.01, it leaves
    # out a label it reports at 0.010005, which DataTrove, reading every label, writes.
    line = glotlid_lines["deu_Latn"].held_out[-1]
    rule = language_rule(str(glotlid_model), languages=["deu_Latn"], label_only=True)
    labels, scores = rule._model.predict(line, k=-1)
    second, score = labels[1].removeprefix("__label__"), float(scores[1])
    paired = language_rule(str(glotlid_model), languages=None, label_only=True, keep_top_pairs_threshold=score - 5e-6)
    assert paired.filter(Document(text=line, id="deu")).metadata[f"top_language_{second}_score"] == score
    # The language screen's question, at a score the model reports: reached.
    screen = language_rule(str(glotlid_model), languages=[second])
    assert screen.language_scores([line])[0].wanted == score
    assert screen.reach([line], score) == [True] and screen.reach([line], score + 1e-6) == [False]


def test_top_pairs_with_languages_are_those_of_the_languages(glotlid_model, udhr_texts):
    # DataTrove keeps the scores of the wanted languages alone, in their order.
    wanted = ["uzn_Latn", "uig_Latn", "deu_Latn"]
    rule = language_rule(str(glotlid_model), languages=wanted, keep_top_pairs_threshold=0)
    verdict = rule.filter(Document(text=udhr_texts["uzn_latn"], id="uzn_latn"))
    scores = _scores_above(rule, udhr_texts["uzn_latn"], 0)
    top = {key: value for key, value in verdict.metadata.items() if key.startswith("top_")}
    assert list(top.items()) == [(f"top_language_{label}_score", scores[label]) for label in wanted]
    assert top["top_language_uzn_Latn_score"] > 0.9 and top["top_language_uig_Latn_score"] < 0.1
    assert labels_of([verdict]) == [("uzn", "Latn")] and not isinstance(verdict, Drop)


def test_a_pair_keeps_its_language_and_drops_the_others(glotlid_model, glotlid_lines):
    rule = language_rule(str(glotlid_model), languages=["deu_Latn"])
    german, french = ("\n".join(glotlid_lines[label].held_out) for label in ("deu_Latn", "fra_Latn"))
    kept, dropped = rule.filter_batch(documents([german, french]))
    assert not isinstance(kept, Drop) and labels_of([kept]) == [("deu", "Latn")]
    assert isinstance(dropped, Drop) and dropped.reason == "language"
    assert labels_of([dropped.document]) == [("fra", "Latn")]


def test_a_language_alone_keeps_each_of_its_scripts(glotlid_model, udhr_texts):
    # Uzbek is written in Cyrillic and in Latin script; Uyghur too in Latin.
    names = ("uzn_cyrl", "uzn_latn", "uig_latn")
    texts = [Document(text=udhr_texts[name], id=name) for name in names]
    either = language_rule(str(glotlid_model), languages=["uzn"])
    assert sorted(either._wanted_keys) == ["uzn_Cyrl", "uzn_Latn"]
    cyrillic, latin, uyghur = either.filter_batch(texts)
    assert labels_of([cyrillic, latin]) == [("uzn", "Cyrl"), ("uzn", "Latn")]
    assert not isinstance(cyrillic, Drop) and not isinstance(latin, Drop)
    assert isinstance(uyghur, Drop) and labels_of([uyghur.document]) == [("uig", "Latn")]
    latin_only = language_rule(str(glotlid_model), languages=["uzn_Latn"])
    assert [isinstance(verdict, Drop) for verdict in latin_only.filter_batch(texts)] == [True, False, True]
    # The language screen asks the filter which labels a code names.
    scores = either.language_scores([udhr_texts[name] for name in names])
    assert [score.language for score in scores] == ["uzn_Cyrl", "uzn_Latn", "uig_Latn"]
    assert min(scores[0].wanted, scores[1].wanted) > 0.9 and scores[2].wanted < 0.1
    assert either.reach([udhr_texts[name] for name in names], 0.5) == [True, True, False]


@pytest.mark.parametrize("wrong", ["deu_Cyrl", "deu_latn", "xyz", "de", "__label__deu_Latn", ""])
def test_codes_the_glotlid_model_does_not_know_fail_at_construction_listing_those_it_does(glotlid_model, wrong):
    message = f"not a language code of the model {glotlid_model}; it knows: abk_Cyrl, ace_Latn, acu_Latn, "
    with pytest.raises(UnknownLanguageError, match=re.escape(message)) as refused:
        LanguageFilter(str(glotlid_model), languages=["deu_Latn", wrong])
    assert str(refused.value).startswith(f"{wrong or repr(wrong)}: ")
    assert "and a language alone stands for each of its scripts (" in str(refused.value)


@pytest.mark.parametrize("threshold", [float("nan"), 2, -0.01])
def test_a_top_pairs_threshold_out_of_range_fails_at_construction(model_path, threshold):
    with pytest.raises(
        ValueError, match=rf"^keep_top_pairs_threshold must be a number from 0 to 1 \(got {threshold!r}\)"
    ):
        LanguageFilter(model_path, keep_top_pairs_threshold=threshold)


def test_lid176_labels_carry_no_script_and_take_top_pairs_too(model_path, udhr_texts):
    english = doc(udhr_texts, "eng")
    plain = language_rule(model_path).filter(english)
    assert list(plain.metadata) == ["source", "language", "language_score"]
    paired = language_rule(model_path, languages=None, keep_top_pairs_threshold=0.001).filter(english)
    assert {key: value for key, value in paired.metadata.items() if not key.startswith("top_")} == plain.metadata
    assert paired.metadata["top_language_en_score"] == plain.metadata["language_score"]
    assert set(paired.metadata) - set(plain.metadata) == {
        f"top_language_{label}_score" for label in _scores_above(language_rule(model_path), english.text, 0.001)
    }
