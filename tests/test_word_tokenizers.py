"""Each language's words, split by the tokenizer DataTrove 0.10.1's table assigns to it.

The expected words are those DataTrove's ``load_word_tokenizer(key).word_tokenize(text)`` gave on the same UDHR
excerpts (benchmarks/word_parity.py compares every language of the UDHR).
"""

from __future__ import annotations

import importlib.util
import zipfile

import pytest

from beamtrove.assets import asset_present, default_word_tokenizers
from beamtrove.text import check_word_splitter, word_splitter
from beamtrove.word_tokenizers import (
    FALLBACK,
    Assignment,
    _botok_pack,
    _japanese_pieces,
    check_languages,
    language_words,
    read_word_tokenizers,
)
from tests.conftest import DATA, require


@pytest.fixture(scope="module")
def table() -> str:
    """The fetched table (CI fetches the assets before the tests)."""
    if not asset_present("word_tokenizers"):
        pytest.skip("The word tokenizer table is not fetched: run `beamtrove assets fetch --only word_tokenizers`")
    return default_word_tokenizers()


def _needs(*modules: str) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install 'beamtrove[multilingual]')")


def _udhr(name: str) -> str:
    with zipfile.ZipFile(require(DATA / "text-corpora" / "nltk_data" / "udhr2.zip")) as archive:
        return archive.read(f"udhr2/{name}.txt").decode("utf-8")


def test_the_table_is_read_with_datatrove_keys(table):
    assignments = read_word_tokenizers(table)
    # One key per language and script, its bare code, and the ISO 639-1 forms, all from the rows in order.
    assert len(assignments) == 4343
    for key in ("tha_Thai", "tha", "th_Thai", "th"):
        assert assignments[key] == Assignment("thai")
    assert assignments["deu_Latn"] == assignments["de"] == Assignment("spacy", "de")
    assert assignments["cmn_Hani"] == Assignment("spacy", "zh")
    assert assignments["jpn_Jpan"] == assignments["ja"] == Assignment("spacy", "ja")
    assert assignments["aai_Latn"] == Assignment("spacy", "ms")
    assert assignments["kat_Geor"] == Assignment("whitespace")
    assert assignments["hin_Deva"] == Assignment("indic", "hi")
    assert assignments["kor_Hang"] == Assignment("kiwi")
    # DataTrove reads a default_* cell's FALSE as set: a later row in another script takes the bare code.
    assert assignments["hin"] == assignments["hi"] == Assignment("stanza", "kmr")
    assert assignments["zh"] == Assignment("spacy", "xx")
    # A row without a tokenizer gives no key: Javanese has one in Latin script, none in its own.
    assert assignments["jav_Latn"] == Assignment("spacy", "ms") and "jav_Java" not in assignments


def test_a_missing_table_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"There is no word tokenizer table at .*: give DataTrove's"):
        read_word_tokenizers(str(tmp_path / "tokenizer_assignment.csv"))


# UDHR file, language key, excerpt length, DataTrove's words.
_WORDS = [
    (
        "deu",
        "deu_Latn",
        150,
        [
            "Die",
            "Allgemeine",
            "Erklärung",
            "der",
            "Menschenrechte",
            "Resolution",
            "217",
            "A",
            "(",
            "III",
            ")",
            "vom",
            "10.12.1948",
            "Präambel",
            "Da",
            "die",
            "Anerkennung",
            "der",
            "angeborenen",
            "Wü",
        ],
    ),
    (
        "tha",
        "tha_Thai",
        120,
        [
            "ปฏิญญาสากลว่าด้วยสิทธิมนุษยชน",
            "คำปรารภ",
            "โดยที่",
            "การ",
            "ยอมรับ",
            "นับถือ",
            "เกียรติศักดิ์",
            "ประจำตัว",
            "และ",
            "สิทธิ",
            "เท่าเทียมกัน",
            "และ",
            "โอน",
            "มิได้",
        ],
    ),
    (
        "kat",
        "kat_Geor",
        120,
        [
            "ადამიანის",
            "უფლებათა",
            "საყოველთაო",
            "დეკლარაცია",
            "პრეამბულა",
            "ვინაიდან",
            "ადამიანთა",
            "ოჯახის",
            "ყველა",
            "წევრისათვის",
            "დამახასიათებელი",
        ],
    ),
    (
        "cmn_hans",
        "cmn_Hani",
        80,
        [
            "世界人权宣言",
            "联合国大会",
            "一九四八年",
            "十二月",
            "十日",
            "第",
            "217A",
            "(",
            "III",
            ")",
            "号",
            "决议",
            "通过",
            "并",
            "颁布",
            "1948",
            "年",
            "12",
            "月",
            "10",
            "日",
            "，",
            "联合国大会",
            "通过",
            "并",
            "颁布",
        ],
    ),
    (
        "jpn",
        "jpn_Jpan",
        80,
        [
            "『",
            "世界",
            "人権",
            "宣言",
            "』",
            "（",
            "1948",
            ".",
            "12",
            ".",
            "10",
            "第",
            "３",
            "回",
            "国連",
            "総会",
            "採択",
            "）",
            "〈",
            "前文",
            "〉",
            "人類",
            "社会",
            "の",
            "すべて",
            "の",
            "構成",
            "員",
            "の",
            "固有",
            "の",
            "尊厳",
            "と",
            "平等",
        ],
    ),
    (
        "hin",
        "hin_Deva",
        120,
        [
            "मानव",
            "अधिकारों",
            "की",
            "सार्वभौम",
            "घोषणा",
            "१०",
            "दिसम्बर",
            "१९४८",
            "को",
            "यूनाइटेड",
            "नेशन्स",
            "की",
            "जनरल",
            "असेम्बली",
            "ने",
            "मानव",
            "अधिकारों",
            "की",
            "सार्वभौम",
            "घ",
        ],
    ),
]
_MODULES = {
    "tha_Thai": ("pythainlp",),
    "cmn_Hani": ("spacy", "jieba"),
    "jpn_Jpan": ("sudachipy", "sudachidict_core"),
    "hin_Deva": ("indicnlp",),
}


@pytest.mark.parametrize(("name", "key", "end", "expected"), _WORDS, ids=[key for _, key, _, _ in _WORDS])
def test_each_language_is_split_as_datatrove_splits_it(table, name, key, end, expected):
    _needs(*_MODULES.get(key, ("spacy",)))
    text = _udhr(name)[:end]
    assert list(word_splitter("language", key, word_tokenizers=table)(text)) == expected
    # A language key names the same splitter for every document, whatever its own language.
    assert list(word_splitter(key, "eng_Latn", word_tokenizers=table)(text)) == expected


def test_vietnamese_words_keep_their_inner_spaces(table):
    _needs("spacy", "pyvi")
    words = word_splitter("language", "vie_Latn", word_tokenizers=table)(_udhr("vie")[:120])
    # pyvi joins syllables into words; this UDHR's decomposed tone marks stand apart, as in DataTrove.
    assert words[:3] == ("Tuyên ngôn", "toa", "\u0300") and words[-2:] == ("thông qua", "v")
    assert len(words) == 44


def test_no_language_or_an_unlisted_one_is_split_by_the_fallback(table):
    _needs("spacy")
    text = _udhr("eng")[:120]
    expected = ("Universal", "Declaration", "of", "Human", "Rights", "Preamble", "Whereas", "recognition", "of")
    fallback = word_splitter("language", None, word_tokenizers=table)
    assert fallback(text)[:9] == expected and len(fallback(text)) == 16
    assert word_splitter("language", "zzz_Zzzz", word_tokenizers=table)(text) == fallback(text)
    assert read_word_tokenizers(table).get("zzz_Zzzz", FALLBACK) == Assignment("whitespace")
    # The fallback is the whitespace kind's splitter itself, made once.
    assert language_words("kat_Geor", table) is fallback


def test_japanese_is_cut_where_datatrove_cuts_it():
    text = ((_udhr("jpn") + _udhr("eng")) * 40)[:150_000]
    pieces = _japanese_pieces(text)
    # DataTrove's chunk_text_on_bytes(text, 40000) on the same text.
    assert [len(piece) for piece in pieces] == [23970, 31010, 24560, 30410, 25300, 14750]
    assert "".join(pieces) == text and max(len(piece.encode()) for piece in pieces) <= 40_000
    assert _japanese_pieces("") == []


def test_a_missing_package_or_model_is_named_before_the_run(table):
    if importlib.util.find_spec("stanza") is not None:
        pytest.skip("stanza is installed here: its refusal cannot be seen")
    # Hindi's bare code is Stanza's Kurmanji in DataTrove's table (see above).
    with pytest.raises(ValueError, match=r"Splitting hi words \(stanza:kmr\) needs stanza: pip install stanza\."):
        check_word_splitter("language", ["tha_Thai", "hi"], word_tokenizers=table)
    with pytest.raises(ValueError, match="needs stanza"):
        word_splitter("language", "hin", word_tokenizers=table)
    with pytest.raises(ValueError, match="needs stanza"):
        check_word_splitter("hi", word_tokenizers=table)


def test_botok_without_its_dialect_pack_is_refused(table):
    _needs("botok")
    if _botok_pack().is_dir():
        pytest.skip(f"botok's dialect pack is in {_botok_pack()}: its refusal cannot be seen")
    with pytest.raises(ValueError, match="needs botok's general dialect pack"):
        check_languages(["bod_Tibt"], table)


def test_unknown_splitters_and_languages_are_refused(table):
    with pytest.raises(ValueError, match="not 'xyz_Latn'"):
        check_word_splitter("xyz_Latn", word_tokenizers=table)
    check_word_splitter("language", ["xyz_Latn"], word_tokenizers=table)  # split by the fallback
    with pytest.raises(ValueError, match="is not a language of the word tokenizer table"):
        check_languages(["xyz_Latn"], table, listed=True)


def test_language_splitters_need_the_table(tmp_path):
    missing = str(tmp_path / "tokenizer_assignment.csv")
    with pytest.raises(FileNotFoundError):
        check_word_splitter("language", word_tokenizers=missing)
    with pytest.raises(ValueError, match="not 'tha_Thai', and that table is not there"):
        check_word_splitter("tha_Thai", word_tokenizers=missing)
    # The English splitters never read it.
    check_word_splitter("beamtrove", word_tokenizers=missing)
