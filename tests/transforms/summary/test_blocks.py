"""The statistics blocks on real documents, with values worked out by hand."""

from __future__ import annotations

import pickle

import pytest

from beamtrove.document import Document
from beamtrove.text import count_sentences
from beamtrove.transforms.summary import DocStats, LangStats, LineStats, ParagraphStats, SentenceStats, WordStats
from beamtrove.transforms.summary.sentences import split_sentences
from tests.conftest import require

# The start of NLTK's 1789 Washington inaugural, and a made-up list with a repeated line.
INAUGURAL = "Fellow-Citizens of the Senate and of the House of Representatives:\n\nAmong the vicissitudes..."
LIST = "Menu\n- Home\n- Home\n* About us.\n"


def test_doc_stats_of_a_hand_counted_text():
    stats = DocStats().extract(Document(INAUGURAL, "a"))
    # 66 + 2 + 25 characters: 11 spaces and 2 newlines, 3 dots, a hyphen and a colon; 6 capitals; no digit.
    assert stats == {
        "length": 93,
        "white_space_ratio": 13 / 93,
        "non_alpha_digit_ratio": 18 / 93,
        "digit_ratio": 0.0,
        "uppercase_ratio": 6 / 93,
        "elipsis_ratio": 3 / 93,
        "punctuation_ratio": 5 / 93,
    }


def test_line_and_paragraph_stats_of_a_hand_counted_text():
    lines = LineStats().extract(Document(LIST, "b"))
    # Lines: "Menu", "- Home", "- Home", "* About us.", "" (after the last newline).
    assert lines["n_lines"] == 5
    assert lines["avg_line_length"] == (4 + 6 + 6 + 11 + 0) / 5
    assert lines["bullet_point_lines_ratio"] == 3 / 5
    assert lines["line_duplicates"] == 1 / 5
    assert lines["line_char_duplicates"] == 6 / 27
    assert lines["lines_ending_with_terminal_mark_ratio"] == 1 / 5
    assert lines["short_line_ratio_chars_10"] == 4 / 5
    assert lines["long_line_ratio_chars_2000"] == 0.0
    paragraphs = ParagraphStats().extract(Document(INAUGURAL, "a"))
    assert paragraphs["n_paragraphs"] == 2
    assert paragraphs["avg_paragraph_length"] == (66 + 25) / 2
    assert paragraphs["short_paragraph_ratio_100"] == 1.0


def test_word_stats_of_a_hand_counted_text():
    stats = WordStats().extract(Document(INAUGURAL, "a"))
    # Fellow - Citizens of the Senate and of the House of Representatives : Among the vicissitudes ...
    assert stats["n_words"] == 17
    assert stats["stop_word_ratio"] == 7 / 17  # of x3, the x3, and
    assert stats["type_token_ratio"] == 13 / 17  # of and the repeat 4 times
    assert stats["avg_words_per_line"] == 17 / 3
    assert stats["capitalized_word_ratio"] == 6 / 17


def test_empty_text_gives_zero_ratios():
    stats = {**DocStats().extract(Document("", "e")), **WordStats().extract(Document("", "e"))}
    assert stats["length"] == 0 and stats["n_words"] == 0
    assert stats["white_space_ratio"] == 0.0 and stats["avg_word_length"] == 0.0


def test_sentences_split_after_terminal_marks(inaugural):
    text = inaugural["1789-Washington"]
    sentences = split_sentences(text)
    assert sentences[0].startswith("Fellow-Citizens of the Senate")
    assert all(sentence == sentence.strip() and sentence for sentence in sentences)
    assert SentenceStats().extract(Document(text, "w"))["n_sentences"] == len(sentences) == count_sentences(text)


def test_lang_stats_scores_english_high_and_french_low(data_dir, udhr_texts):
    model = str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))
    block = LangStats(model, "en")
    block.setup()
    english = block.extract(Document(udhr_texts["eng"], "en"))["fasttext_en"]
    french = block.extract(Document(udhr_texts["fra"], "fr"))["fasttext_en"]
    assert english > 0.9 and french < 0.05
    labelled = Document("anything", "x", metadata={"language": "en", "language_score": 0.42})
    assert block.extract(labelled) == {"fasttext_en": 0.42}


def test_lang_stats_of_a_glotlid_pair_read_a_labelled_document_s_score(glotlid_model, udhr_texts):
    block = LangStats(str(glotlid_model), "deu_Latn")
    block.setup()
    german = block.extract(Document(udhr_texts["deu"], "de"))["fasttext_deu_Latn"]
    assert german > 0.5
    labelled = Document(
        "anything", "x", metadata={"language": "deu", "language_script": "Latn", "language_score": 0.42}
    )
    assert block.extract(labelled) == {"fasttext_deu_Latn": 0.42}
    other_script = Document(
        udhr_texts["deu"], "y", metadata={"language": "deu", "language_script": "Cyrl", "language_score": 0.42}
    )
    assert block.extract(other_script) == {"fasttext_deu_Latn": german}


def test_lang_stats_refuses_an_unknown_language(data_dir):
    model = str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))
    with pytest.raises(ValueError, match="xx"):
        LangStats(model, "xx")


# What DataTrove 0.10.1's English word tokenizer gives for this text (run in its venv).
_DATATROVE_WORDS = ["i", "m", "happy", "do", "nt", "go", "中文字符测试", "e.", "V.", "27", "."]


def test_word_stats_split_as_datatrove_does_with_spacy():
    pytest.importorskip("spacy", reason="--word_splitter spacy needs pip install 'beamtrove[spacy]'")
    text = "im happy\n\n dont go 中文字符测试 e.V. 27."
    # Pickled as a runner ships it to workers: spaCy's tokenizer is made where the block runs.
    spacy_words = pickle.loads(pickle.dumps(WordStats(word_splitter="spacy")))
    stats = spacy_words.extract(Document(text, "w"))
    assert stats["n_words"] == len(_DATATROVE_WORDS)
    assert stats["avg_word_length"] == sum(map(len, _DATATROVE_WORDS)) / len(_DATATROVE_WORDS)
    assert stats["type_token_ratio"] == 1.0
    # beamtrove's own splitter counts each of the six Chinese characters and keeps spelled-out contractions whole.
    assert WordStats().extract(Document(text, "w"))["n_words"] == 13


def test_an_unknown_word_splitter_is_refused():
    with pytest.raises(ValueError, match=r"one of beamtrove, spacy, language or a language of .*, not 'nltk'"):
        WordStats(word_splitter="nltk")
