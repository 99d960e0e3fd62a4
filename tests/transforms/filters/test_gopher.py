"""Gopher's repetition and quality rules on real text, every drop reason hand-checked."""

from __future__ import annotations

import importlib.util
import re

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.assets import asset_present
from beamtrove.document import Document
from beamtrove.text import split_words, word_splitter
from beamtrove.transforms.filters import Drop, Filter, GopherQualityFilter, GopherRepetitionFilter
from tests.conftest import run_and_collect
from tests.transforms.filters.conftest import article, outcomes


def reason(rule, text: str) -> str:
    verdict = rule.filter(Document(text=text, id="doc"))
    return verdict.reason if isinstance(verdict, Drop) else "kept"


def rights(udhr_texts, max_chars: int) -> str:
    """The UDHR's sentences that open with "Everyone has the right", one per line, at most ``max_chars`` long.

    The English declaration holds 21 of them, all different; the same 2-, 3- and 4-gram opens each line.
    """
    sentences = re.findall(r"Everyone has the right[^.]*\.", udhr_texts["eng"])
    assert len(sentences) == len(set(sentences)) == 21
    return "\n".join(sentence for sentence in sentences if len(sentence) <= max_chars)


# --- GopherRepetitionFilter ---------------------------------------------------------------------------------


def test_repetition_keeps_ordinary_speeches(inaugural, state_union):
    rule = GopherRepetitionFilter()
    for text in (inaugural["2009-Obama"], inaugural["1961-Kennedy"], state_union["2006-GWBush"]):
        assert reason(rule, text) == "kept"


def test_repetition_empty_and_paragraph_reasons(udhr_texts, state_union):
    rule = GopherRepetitionFilter()
    # The NLTK UDHR file for Nkoya is empty.
    assert reason(rule, udhr_texts["nku"]) == "empty"
    # Nixon's 1970 address: one huge paragraph, a footnote, then three "??" paragraphs. Two of six paragraphs
    # repeat an earlier one: 2/6 = 0.33 > 0.3.
    assert reason(rule, state_union["1970-Nixon"]) == "dup_para_frac"
    # Four real paragraphs of Bush's 2006 address, the first repeated at the end: 1 of 4 paragraphs repeats
    # (0.25 <= 0.3), but it is the longest (707 of 2,405 characters, 0.29 > 0.2).
    paragraphs = state_union["2006-GWBush"].split("\n\n")
    first, second, third = paragraphs[4], paragraphs[1], paragraphs[2]
    assert [len(first), len(second), len(third)] == [707, 484, 501]
    assert reason(rule, "\n\n".join([first, second, third, first])) == "dup_para_char_frac"
    # The same lines in two different paragraphs (first+second, third+first): no paragraph repeats, one line of
    # four does (0.25 <= 0.3) with 0.29 of the characters (> 0.2).
    lines = f"{first}\n{second}\n\n{third}\n{first}"
    assert reason(rule, lines) == "dup_line_char_frac"


def test_repetition_line_reasons(movie_reviews, udhr_texts):
    rule = GopherRepetitionFilter()
    # cv690 holds its review twice over: 26 of its 69 lines repeat an earlier one (0.38 > 0.3).
    review = movie_reviews["neg/cv690_5425"]
    lines = review.split("\n")
    assert lines.count(lines[0]) == 2
    assert reason(rule, review) == "dup_line_frac"
    # The UDHR files separate articles with whitespace-only lines, which repeat: 118 of the English
    # declaration's 213 lines (see tests/test_text.py), 0.55 > 0.3.
    assert reason(rule, udhr_texts["eng"]) == "dup_line_frac"
    assert reason(GopherRepetitionFilter(dup_line_frac=None, dup_line_char_frac=None), udhr_texts["eng"]) == "kept"


def test_repetition_top_n_grams(udhr_texts, movie_reviews):
    rule = GopherRepetitionFilter()
    # The two shortest rights, "...to a nationality." and "...to education." (77 characters with the newline):
    # every 2-gram occurs twice, and the first, "Everyone has", covers 2 * 12 = 24 characters, 0.31 > 0.2.
    assert rights(udhr_texts, 60) == "Everyone has the right to a nationality.\nEveryone has the right to education."
    assert reason(rule, rights(udhr_texts, 60)) == "top_2_gram"
    # The 12 rights of at most 100 characters (910 characters): "Everyone has" covers 12 * 12 = 144 (0.16 <=
    # 0.2), "Everyone has the" 12 * 16 = 192 (0.21 > 0.18).
    assert reason(rule, rights(udhr_texts, 100)) == "top_3_gram"
    # All 21 (2,676 characters): "Everyone has the" covers 21 * 16 = 336 (0.13 <= 0.18), "Everyone has the
    # right" 21 * 22 = 462 (0.17 > 0.16).
    assert reason(rule, rights(udhr_texts, 1000)) == "top_4_gram"
    # A one-line review of 91 characters: no n-gram repeats, so the top one is the first, and the 4-gram
    # "this film is extraordinarily" alone covers 28 characters (0.31 > 0.16; "this film is" is 12, 0.13).
    short = movie_reviews["neg/cv506_17521"]
    assert short == "this film is extraordinarily horrendous and i'm not going to waste any more words on it . \n"
    assert reason(rule, short) == "top_4_gram"


@pytest.mark.parametrize(("n", "max_frac"), [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)])
def test_repetition_duplicated_n_grams(movie_reviews, n, max_frac):
    # cv732 repeats 14 of its 113 lines (0.12 <= 0.3, 0.11 of the characters <= 0.2), whole passages of its
    # X-Files review appearing twice: a third of its characters are in repeated n-grams for every n from 5 to 10.
    review = movie_reviews["neg/cv732_13092"]
    assert reason(GopherRepetitionFilter(), review) == "duplicated_5_n_grams"
    only_n = GopherRepetitionFilter(top_n_grams=(), dup_n_grams=((n, max_frac),))
    assert reason(only_n, review) == f"duplicated_{n}_n_grams"


# --- GopherQualityFilter ------------------------------------------------------------------------------------


def test_quality_keeps_ordinary_english(inaugural, udhr_texts):
    rule = GopherQualityFilter()
    assert reason(rule, inaugural["2009-Obama"]) == "kept"
    assert reason(rule, udhr_texts["eng"]) == "kept"


def test_quality_length_reasons(movie_reviews, inaugural, udhr_texts):
    rule = GopherQualityFilter()
    # 18 words: this film is extraordinarily horrendous and i 'm not going to waste any more words on it.
    assert reason(rule, movie_reviews["neg/cv506_17521"]) == "gopher_short_doc"
    # All 59 inaugural addresses together: about 138,000 words > 100,000.
    everything = "\n\n".join(inaugural[name] for name in sorted(inaugural))
    assert reason(rule, everything) == "gopher_long_doc"
    assert reason(GopherQualityFilter(max_doc_words=None), everything) == "kept"
    # With the minimum disabled, a document without words is still dropped as short.
    assert reason(GopherQualityFilter(min_doc_words=None), udhr_texts["nku"]) == "gopher_short_doc"


def test_quality_word_length_reasons(udhr_texts):
    rule = GopherQualityFilter()
    # Chinese splits into one token per character: the mean word length is about 1 < 3.
    assert reason(rule, udhr_texts["cmn_hans"]) == "gopher_below_avg_threshold"
    # Greenlandic is polysynthetic: "SILARSUARMIOQATIGIINNUT", "anooqatigiinnut", ... average 14.6 > 10.
    assert "PISINNAATITAAFFIIT" in udhr_texts["kal"]
    assert reason(rule, udhr_texts["kal"]) == "gopher_above_avg_threshold"


def test_quality_symbol_reasons(ground_truth, state_union):
    rule = GopherQualityFilter()
    # A real sponsored-post disclosure ("This shop has been compensated by #CollectiveBias, Inc. and its
    # advertiser. All opinions are mine alone. #HealthyHydration #ad") with its first paragraph turned into
    # hashtag spam: each of its words gets a "#", so there is a hash for every other token (> 0.1).
    post = article(ground_truth, "0e014df693")["articleBody"]
    disclosure, paragraph = post.split("\n\n")[:2]
    assert disclosure.count("#") == 3
    hashtags = " ".join("#" + word.strip(".,’") for word in paragraph.split())
    assert reason(rule, f"{disclosure}\n\n{paragraph}\n\n{hashtags}") == "gopher_too_many_hashes"
    # Sentences of Bush's 2006 address quoted with their middle elided ("In a system of … differences and
    # debate."): one ellipsis for every 8 or 9 tokens (> 0.1).
    sentences = [s for s in re.split(r"(?<=\.) ", state_union["2006-GWBush"].split("\n\n")[3]) if len(s.split()) > 8]
    elided = [" ".join([*s.split()[:4], "…", *s.split()[-3:]]) for s in sentences]
    assert elided[0] == "In a system of … differences and debate."
    assert reason(rule, "\n".join(elided * 2)) == "gopher_too_many_ellipsis"


def test_quality_line_shape_reasons(inaugural, ground_truth):
    rule = GopherQualityFilter()
    # The first 12 sentences of Obama's 2009 address as a bulleted list: every line starts with "•" (1.0 > 0.9).
    sentences = re.split(r"(?<=[.!?:])\s+", inaugural["2009-Obama"])[:12]
    assert sentences[:2] == ["My fellow citizens:", sentences[1]] and "\n" not in "".join(sentences)
    assert reason(rule, "\n".join("• " + sentence for sentence in sentences)) == "gopher_too_many_bullets"
    assert reason(rule, "\n".join("- " + sentence for sentence in sentences)) == "gopher_too_many_bullets"
    assert reason(rule, "\n".join(sentences)) == "kept"
    # The Wall Street Journal's paywalled gold text: two paragraphs, the second cut off with "....". One of its
    # three lines (the blank one counts) ends with an ellipsis: 0.33 > 0.3.
    wsj = article(ground_truth, "7ab16ade32")["articleBody"]
    assert wsj.endswith("and may receive further discipline....") and len(wsj.splitlines()) == 3
    assert reason(rule, wsj) == "gopher_too_many_end_ellipsis"


def test_quality_alpha_and_stop_word_reasons(ground_truth, udhr_texts):
    rule = GopherQualityFilter()
    # NASCAR standings ("1 Kyle Busch 5040 5 1 17 27"): six number columns against two or three name tokens per
    # row; 158 of 415 tokens hold a letter (0.38 < 0.8).
    standings = article(ground_truth, "11ea381ad9")["articleBody"]
    assert "1 Kyle Busch 5040 5 1 17 27" in standings
    assert reason(rule, standings) == "gopher_below_alpha_threshold"
    # French holds none of "the", "be", "to", "of", "and", "that", "have", "with".
    assert reason(rule, udhr_texts["fra"]) == "gopher_enough_stop_words"
    assert reason(GopherQualityFilter(min_stop_words=None), udhr_texts["fra"]) == "kept"


# --- Beam ---------------------------------------------------------------------------------------------------


def test_gopher_filters_in_a_pipeline(inaugural, state_union, movie_reviews, udhr_texts, ground_truth):
    docs = [
        Document(text=inaugural["2009-Obama"], id="2009-Obama"),
        Document(text=inaugural["1961-Kennedy"], id="1961-Kennedy"),
        Document(text=udhr_texts["fra"], id="fra"),
        Document(text=movie_reviews["neg/cv506_17521"], id="cv506"),
        Document(text=article(ground_truth, "7ab16ade32")["articleBody"], id="wsj"),
        Document(text=state_union["1970-Nixon"], id="1970-Nixon"),
        Document(text=movie_reviews["neg/cv690_5425"], id="cv690"),
    ]

    def build(pipeline):
        quality = pipeline | beam.Create(docs) | "Quality" >> Filter(GopherQualityFilter())
        repetition = quality.kept | "Repetition" >> Filter(GopherRepetitionFilter())
        assert_that(
            outcomes(quality, "Q"),
            equal_to(
                [
                    ("kept", "2009-Obama"),
                    ("kept", "1961-Kennedy"),
                    ("excluded", "fra", "gopher_enough_stop_words"),
                    ("excluded", "cv506", "gopher_short_doc"),
                    ("excluded", "wsj", "gopher_too_many_end_ellipsis"),
                    ("kept", "1970-Nixon"),
                    ("kept", "cv690"),
                ]
            ),
            label="QualityOutcomes",
        )
        assert_that(
            outcomes(repetition, "R"),
            equal_to(
                [
                    ("kept", "2009-Obama"),
                    ("kept", "1961-Kennedy"),
                    ("excluded", "1970-Nixon", "dup_para_frac"),
                    ("excluded", "cv690", "dup_line_frac"),
                ]
            ),
            label="RepetitionOutcomes",
        )

    stats = run_and_collect(build)
    assert stats["gopher_quality"]["counters"] == {
        "in": 7,
        "out": 4,
        "dropped.gopher_enough_stop_words": 1,
        "dropped.gopher_short_doc": 1,
        "dropped.gopher_too_many_end_ellipsis": 1,
    }
    assert stats["gopher_repetition"]["counters"] == {
        "in": 4,
        "out": 2,
        "dropped.dup_para_frac": 1,
        "dropped.dup_line_frac": 1,
    }


# --- word_splitter="spacy": DataTrove's words ----------------------------------------------------------------

# DataTrove 0.10.1's GopherRepetitionFilter() and GopherQualityFilter() on these declarations (run in its own venv;
# with spaCy words all 388 languages agree). beamtrove's default splitter counts a word per character in
# scripts without spaces, where spaCy keeps the run whole.
DATATROVE_DECISIONS = {
    "jpn": ("dup_line_frac", "gopher_above_avg_threshold"),
    "cmn_hans": ("dup_line_frac", "gopher_above_avg_threshold"),
    "tha": ("dup_line_frac", "gopher_above_avg_threshold"),
    "bod": ("kept", "gopher_above_avg_threshold"),
    "dzo": ("kept", "gopher_short_doc"),
    "deu": ("dup_line_frac", "gopher_enough_stop_words"),
}


@pytest.mark.parametrize("language", sorted(DATATROVE_DECISIONS))
def test_spacy_words_give_datatrove_decisions_in_any_script(udhr_texts, language):
    pytest.importorskip("spacy", reason="word_splitter='spacy' needs spaCy: pip install 'beamtrove[spacy]'")
    text = udhr_texts[language]
    repetition, quality = GopherRepetitionFilter(word_splitter="spacy"), GopherQualityFilter(word_splitter="spacy")
    assert (reason(repetition, text), reason(quality, text)) == DATATROVE_DECISIONS[language]


def test_the_default_splitter_parts_from_spacy_on_text_without_spaces(udhr_texts):
    assert reason(GopherRepetitionFilter(), udhr_texts["bod"]) == "duplicated_5_n_grams"
    assert reason(GopherQualityFilter(), udhr_texts["jpn"]) == "gopher_below_avg_threshold"


def test_an_unknown_word_splitter_is_refused():
    with pytest.raises(ValueError, match=r"The word splitter is one of beamtrove, spacy, language or .*, not 'nltk'"):
        GopherQualityFilter(word_splitter="nltk")
    with pytest.raises(ValueError, match="not 'Spacy'"):
        GopherRepetitionFilter(word_splitter="Spacy")


def test_the_language_splitter_counts_thai_words(udhr_texts):
    if not asset_present("word_tokenizers") or importlib.util.find_spec("pythainlp") is None:
        pytest.skip("needs the fetched word tokenizer table and pythainlp (pip install 'beamtrove[multilingual]')")
    # The Thai UDHR as GlotLID labels it.
    thai = Document(text=udhr_texts["tha"], id="tha", metadata={"language": "tha", "language_script": "Thai"})
    thai_stop_words = ("และ", "การ", "ของ", "ใน")
    # beamtrove's splitter counts a word per Thai character: 8,929 one-character "words".
    assert len(split_words(thai.text)) == 8929
    per_character = GopherQualityFilter(stop_words=thai_stop_words)
    assert per_character.filter(thai).reason == "gopher_below_avg_threshold"
    # PyThaiNLP's words, as DataTrove's tokenizer for tha_Thai: 1,867 of 4.8 characters on average.
    words = word_splitter("language", "tha_Thai")(thai.text)
    assert len(words) == 1867 and round(sum(map(len, words)) / len(words), 2) == 4.79
    assert GopherQualityFilter(stop_words=thai_stop_words, word_splitter="language").filter(thai) is thai
    # With English stop words, the one rule Thai text fails.
    assert GopherQualityFilter(word_splitter="language").filter(thai).reason == "gopher_enough_stop_words"
    # Five characters recur far more than five words do.
    no_line_rules = {f"dup_{unit}_{what}": None for unit in ("line", "para") for what in ("frac", "char_frac")}
    assert GopherRepetitionFilter(**no_line_rules).filter(thai).reason == "duplicated_5_n_grams"
    assert GopherRepetitionFilter(**no_line_rules, word_splitter="language").filter(thai) is thai
