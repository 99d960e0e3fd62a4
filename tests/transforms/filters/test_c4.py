"""C4's line cleaning, bad-words and paragraph rules on real articles, pages, reviews and speeches."""

from __future__ import annotations

import gzip
import html
import re

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.filters import C4BadWordsFilter, C4ParagraphFilter, C4QualityFilter, Drop, Filter
from tests.conftest import require, run_and_collect
from tests.transforms.filters.conftest import article, outcomes

STADIA = "e100c9612ad8495db03b2a9f968952d0eaa4853d9b32ded6a29f8e313a974873"
VORTEX = "95301fb7883e0ee5214d1111554d30dd97e08c6380d7699369c0b9c15f42e6aa"
COOKIE_NOTICE = (
    "We use cookies to improve your experience on our website. By browsing this website, you agree to our use of "
    "cookies."
)


def page(data_dir, name: str) -> str:
    path = require(data_dir / "article-extraction-benchmark" / "html" / f"{name}.html.gz")
    return gzip.decompress(path.read_bytes()).decode("utf-8", "replace")


def lorem_ipsum(data_dir) -> str:
    """The author blurb greator.com left as placeholder text (in its JSON-LD)."""
    path = require(data_dir / "trafilatura-eval" / "eval" / "greator.com.innerezufriedenheit.html.gz")
    source = gzip.decompress(path.read_bytes()).decode("utf-8")
    (blurb,) = re.findall(r'"description":"(Lorem ipsum[^"]*)"', source)
    return blurb


def run(rule, text: str):
    return rule.filter(Document(text=text, id="doc"))


# --- C4QualityFilter ----------------------------------------------------------------------------------------


def test_keeps_article_lines_and_removes_page_boilerplate(ground_truth, data_dir):
    body = ground_truth[STADIA]["articleBody"]
    stadia_page, vortex_page = page(data_dir, STADIA), page(data_dir, VORTEX)
    # Boilerplate lines as they appear on the real pages.
    javascript = "Please enable JavaScript to view the comments."
    assert javascript in stadia_page and "Privacy &amp; Cookie Policy" in stadia_page
    assert COOKIE_NOTICE in vortex_page
    text = "\n".join([body, javascript, html.unescape("Privacy &amp; Cookie Policy"), COOKIE_NOTICE])
    paragraphs = body.split("\n")
    # Hand-checked: paragraph 2 ends "Google confirmed this in a statement…" (an ellipsis is no terminal
    # punctuation), blank lines have no words, the JavaScript line mentions javascript, "Privacy & Cookie Policy"
    # has no final punctuation and the notice says "use cookies". The five other paragraphs stay.
    assert paragraphs[2].endswith("in a statement…")
    kept = run(C4QualityFilter(), text)
    assert kept.text == "\n".join(paragraphs[i] for i in (0, 4, 6, 8, 10))
    assert kept.id == "doc"
    # Without the terminal punctuation rule the truncated paragraph comes back; "Privacy & Cookie Policy" still
    # goes, now for holding "cookie policy".
    lenient = run(C4QualityFilter(filter_no_terminal_punct=False), text).text.split("\n")
    assert lenient == [paragraphs[i] for i in (0, 2, 4, 6, 8, 10)]
    # With the javascript and policy rules off too, all the boilerplate stays.
    everything = C4QualityFilter(filter_no_terminal_punct=False, filter_javascript=False, filter_policy=False)
    assert run(everything, text).text.split("\n")[-3:] == [javascript, "Privacy & Cookie Policy", COOKIE_NOTICE]


def test_strips_wikipedia_style_citations(ground_truth):
    # Ascom's press release cites its sources as "[1]" and "[2]" and lists them at the end.
    body = article(ground_truth, "5ae11e580a")["articleBody"]
    lines = body.split("\n")
    assert lines[4].endswith("up to 1,000 alarms per shift [1], even though up to 99% of those do not even require "
                             "clinical intervention [2].")  # fmt: skip
    kept = run(C4QualityFilter(), body).text.split("\n")
    # Dateline "BAAR, SWITZERLAND", "please visit: www.ascom.com" and reference [2] (no final period) go; the
    # citation marks are cut out of the kept lines, leaving the space before them, and reference [1] keeps the
    # space that followed its mark (lines are stripped before citations are removed, as in DataTrove).
    assert kept == [
        lines[2],
        lines[4].replace(" [1]", " ").replace(" [2]", " ").replace("  ", " "),
        lines[6],
        lines[8],
        lines[10],
        lines[14].removeprefix("[1]"),
    ]
    assert kept[1].endswith("per shift , even though up to 99% of those do not even require clinical intervention .")
    assert kept[-1] == (
        " Alarm fatigue: impacts on patient safety, Ruskin KJ, Hueske-Kraus D. "
        "Curr Opin Anaesthesiol. 2015; 28: 685-690."
    )
    assert "[1]" in run(C4QualityFilter(remove_citations=False), body).text


def test_document_drop_reasons(ground_truth, data_dir, movie_reviews, inaugural):
    rule = C4QualityFilter()
    body = ground_truth[STADIA]["articleBody"]
    # A real placeholder blurb: it ends with a period, so it survives the line rules and sinks the document.
    blurb = lorem_ipsum(data_dir)
    assert blurb.endswith("sanctus est Lorem ipsum dolor sit amet.")
    assert run(rule, f"{body}\n{blurb}") == Drop("lorem_ipsum")
    assert run(C4QualityFilter(filter_lorem_ipsum=False), f"{body}\n{blurb}").text.endswith(blurb)
    # cv544 kept an RTF field code from its source: "academy award{symbol 153 \ f " times new roman " \ s 10 \ h}".
    review = movie_reviews["pos/cv544_5108"]
    assert "award{symbol 153" in review
    assert run(rule, review) == Drop("curly_bracket")
    # Washington's second inaugural address has 4 sentences (< 5).
    assert run(rule, inaugural["1793-Washington"]) == Drop("too_few_sentences")
    assert run(C4QualityFilter(min_num_sentences=-1), inaugural["1793-Washington"]).text.startswith("Fellow citizens")
    assert run(C4QualityFilter(min_num_sentences=4), inaugural["1793-Washington"]).text.startswith("Fellow citizens")
    # An article whose lines all lack terminal punctuation keeps no sentence at all.
    assert run(rule, "BAAR, SWITZERLAND\nplease visit: www.ascom.com") == Drop("too_few_sentences")


def test_long_words_remove_their_line(ground_truth):
    # The nj.com article embeds tweets with t.co links; a 20-character word limit removes those lines only.
    body = article(ground_truth, "3f65af7b6b")["articleBody"]
    line = "Yes this is real and yes the state spent nearly half a million dollars on it: https://t.co/Nc0nKoXGBP"
    assert line in body.split("\n")
    assert line in run(C4QualityFilter(filter_no_terminal_punct=False), body).text.split("\n")
    assert line not in run(C4QualityFilter(filter_no_terminal_punct=False, max_word_length=20), body).text


# --- C4BadWordsFilter ---------------------------------------------------------------------------------------


@pytest.fixture
def words_dir(tmp_path, data_dir):
    """An LDNOOBW-style words folder whose ``en`` and ``ja`` lists are DataTrove's banned_subwords.txt."""
    words = require(data_dir / "blocklists" / "ut1" / "banned_subwords.txt").read_text(encoding="utf-8")
    (tmp_path / "en").write_text(words, encoding="utf-8")
    (tmp_path / "ja").write_text(words, encoding="utf-8")
    return str(tmp_path)


def bad_words_rule(words_dir, **options) -> C4BadWordsFilter:
    rule = C4BadWordsFilter(words_dir, **options)
    rule.setup()
    return rule


def test_bad_words_match_whole_words_only(words_dir, movie_reviews):
    rule = bad_words_rule(words_dir)
    # Hand-found phrases of the list in real reviews: a film title, a Watergate nickname, a song title.
    for name, phrase in (
        ("neg/cv357_14710", "booty call ( which was ok )"),
        ("neg/cv954_19932", 'the identity of " deep throat "'),
        ("neg/cv636_16954", '" tainted love . "'),
    ):
        assert phrase in movie_reviews[name]
        assert run(rule, movie_reviews[name]) == Drop("badwords_en"), name
    # "a giant cockroach-like alien": "giant cock" is on the list but "cockroach" is another word.
    alien = movie_reviews["pos/cv622_8147"]
    assert "a giant cockroach-like alien" in alien
    assert run(rule, alien).text == alien
    assert run(rule, movie_reviews["neg/cv000_29416"]).text == movie_reviews["neg/cv000_29416"]
    # Japanese is written without spaces, so its list matches inside words: the same review labelled "ja" goes.
    japanese = Document(text=alien, id="alien", metadata={"language": "ja"})
    assert bad_words_rule(words_dir, languages=("en", "ja")).filter(japanese) == Drop("badwords_ja")


def test_bad_words_languages_and_keep_fraction(words_dir, movie_reviews, udhr_texts):
    rule = bad_words_rule(words_dir)
    french = Document(text=udhr_texts["fra"], id="fra", metadata={"language": "fr"})
    assert rule.filter(french) is french  # no list for French: kept
    with pytest.raises(ValueError, match="'fr'"):
        bad_words_rule(words_dir, fail_on_missing_language=True).filter(french)
    with pytest.raises(FileNotFoundError, match="LDNOOBW"):
        C4BadWordsFilter(words_dir, languages=("en", "de"))
    # The 29 reviews that name a listed phrase (hand-checked list above), kept at a fraction chosen by id hash.
    flagged = [
        Document(text=text, id=name)
        for name, text in movie_reviews.items()
        if isinstance(run(rule, text), Drop)
    ]  # fmt: skip
    assert len(flagged) == 29
    assert all(isinstance(bad_words_rule(words_dir, keep_fraction=0.0).filter(d), Drop) for d in flagged)
    assert all(not isinstance(bad_words_rule(words_dir, keep_fraction=1.0).filter(d), Drop) for d in flagged)
    half = bad_words_rule(words_dir, keep_fraction=0.5)
    kept = {d.id for d in flagged if not isinstance(half.filter(d), Drop)}
    assert 5 <= len(kept) <= 24  # binomial(29, 0.5) falls outside with probability 1e-4
    assert kept == {
        d.id for d in flagged if not isinstance(bad_words_rule(words_dir, keep_fraction=0.5).filter(d), Drop)
    }
    other_seed = {
        d.id for d in flagged if not isinstance(bad_words_rule(words_dir, keep_fraction=0.5, seed=1).filter(d), Drop)
    }
    assert other_seed != kept


# --- C4ParagraphFilter -------------------------------------------------------------------------------------

TOO_FEW_PARAGRAPHS = Drop("< 3 paragraphs")  # DataTrove's reason


def test_paragraph_rule_on_real_texts(ground_truth, inaugural):
    rule = C4ParagraphFilter()
    # Stadia's lines are 646, 383, 375, 280... characters long: three of 200 or more.
    stadia = ground_truth[STADIA]["articleBody"]
    assert run(rule, stadia).text == stadia
    assert run(rule, inaugural["2009-Obama"]).text == inaugural["2009-Obama"]
    # Washington's second address has two long paragraphs (455 and 330 characters); Vortex's article two (283,
    # 255) and a blank line; GiveWell's one line of 419.
    assert run(rule, inaugural["1793-Washington"]) == TOO_FEW_PARAGRAPHS
    assert run(rule, ground_truth[VORTEX]["articleBody"]) == TOO_FEW_PARAGRAPHS
    assert run(rule, article(ground_truth, "ac3c035520")["articleBody"]) == TOO_FEW_PARAGRAPHS
    assert run(C4ParagraphFilter(min_paragraphs=2), inaugural["1793-Washington"]).text.startswith("Fellow citizens")
    assert run(C4ParagraphFilter(min_paragraphs=2, min_paragraph_length=456), inaugural["1793-Washington"]) == Drop(
        "< 2 paragraphs"
    )


def test_paragraph_length_boundaries(ground_truth):
    rule = C4ParagraphFilter()
    paragraph = ground_truth[STADIA]["articleBody"].split("\n")[0]
    at_limit, short = paragraph[:200], paragraph[:199]
    assert run(rule, "\n".join([at_limit] * 3)).text == "\n".join([at_limit] * 3)
    assert run(rule, "\n".join([at_limit, at_limit, short])) == TOO_FEW_PARAGRAPHS
    # Only "\n" separates paragraphs, and every character counts: a carriage return too, but not a "\n".
    windows = "\r\n".join([short] * 3) + "\r"
    assert run(rule, windows).text == windows
    assert run(rule, "\n\n\n".join([short] * 3)) == TOO_FEW_PARAGRAPHS
    assert run(rule, "\u2028".join([at_limit] * 3)) == TOO_FEW_PARAGRAPHS
    assert run(rule, "") == TOO_FEW_PARAGRAPHS


# --- Beam ---------------------------------------------------------------------------------------------------


def test_c4_filters_in_a_pipeline(ground_truth, movie_reviews, inaugural, words_dir):
    docs = [
        Document(text=ground_truth[STADIA]["articleBody"], id="stadia", metadata={"language": "en"}),
        Document(text=inaugural["2009-Obama"], id="2009-Obama"),
        Document(text=movie_reviews["pos/cv544_5108"], id="cv544"),
        Document(text=inaugural["1793-Washington"], id="1793-Washington"),
        Document(text=movie_reviews["neg/cv357_14710"], id="cv357"),
        Document(text=movie_reviews["pos/cv622_8147"], id="cv622"),
    ]
    # A document whose language has no list raises with fail_on_missing_language: a dead letter.
    docs.append(Document(text=inaugural["1961-Kennedy"], id="1961-Kennedy", metadata={"language": "fr"}))

    def build(pipeline):
        quality = pipeline | beam.Create(docs) | "Quality" >> Filter(C4QualityFilter())
        bad_words = quality.kept | "BadWords" >> Filter(C4BadWordsFilter(words_dir, fail_on_missing_language=True))
        assert_that(
            outcomes(quality, "Q"),
            equal_to(
                [
                    ("kept", "stadia"),
                    ("kept", "2009-Obama"),
                    ("excluded", "cv544", "curly_bracket"),
                    ("excluded", "1793-Washington", "too_few_sentences"),
                    ("kept", "cv357"),
                    ("kept", "cv622"),
                    ("kept", "1961-Kennedy"),
                ]
            ),
            label="QualityOutcomes",
        )
        assert_that(
            outcomes(bad_words, "B"),
            equal_to(
                [
                    ("kept", "stadia"),
                    ("kept", "2009-Obama"),
                    ("excluded", "cv357", "badwords_en"),
                    ("kept", "cv622"),
                    ("dead", "1961-Kennedy", "ValueError"),
                ]
            ),
            label="BadWordsOutcomes",
        )

    stats = run_and_collect(build)
    assert stats["c4_quality"]["counters"] == {
        "in": 7,
        "out": 5,
        "dropped.curly_bracket": 1,
        "dropped.too_few_sentences": 1,
    }
    assert stats["c4_badwords"]["counters"] == {"in": 5, "out": 3, "dropped.badwords_en": 1, "errors.ValueError": 1}


def test_paragraph_filter_in_a_pipeline(ground_truth, inaugural):
    docs = [
        Document(text=ground_truth[STADIA]["articleBody"], id="stadia"),
        Document(text=inaugural["1793-Washington"], id="1793-Washington"),
        Document(text=inaugural["2009-Obama"], id="2009-Obama"),
    ]

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(C4ParagraphFilter())
        assert_that(
            outcomes(result),
            equal_to([("kept", "stadia"), ("excluded", "1793-Washington", "< 3 paragraphs"), ("kept", "2009-Obama")]),
        )

    assert run_and_collect(build)["c4_paragraph"]["counters"] == {"in": 3, "out": 2, "dropped.< 3 paragraphs": 1}
