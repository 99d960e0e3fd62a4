"""LanguageFilter (fastText lid.176) on the UDHR in 388 languages."""

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
