"""Word and sentence splitting on real sentences from the shared corpora, and text normalization.

Every sentence below is quoted from a real text, and each test first checks
that the quote is in that text. The expected tokens follow spaCy's English
tokenizer conventions that DataTrove's word counts rely on, worked out by hand;
the expected normalized texts are what DataTrove 0.10.1's ``simplify_text`` gives.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
import tracemalloc
import unicodedata
import zipfile

import numpy as np
import pytest
import regex

from beamtrove.text import (
    _MARKS,
    TERMINAL_PUNCTUATION,
    _split_chunk,
    _with_property,
    check_word_splitter,
    count_sentences,
    find_duplicates,
    is_punctuation,
    normalize_text,
    spaced_words,
    split_words,
    word_splitter,
)
from beamtrove.transforms.decont import DecontConfig, benchmark_ngrams
from beamtrove.transforms.dedup import MinHashConfig, MinHasher, bloom_shingles, shingle_hashes, span_digests
from tests.conftest import require


@pytest.fixture(scope="module")
def corpora(data_dir) -> dict[str, str]:
    """A few real texts: State of the Union 2006, a movie review, two gold articles, the UDHR in Chinese."""
    nltk = data_dir / "text-corpora" / "nltk_data"
    texts = {}
    with zipfile.ZipFile(require(nltk / "state_union.zip")) as archive:
        texts["bush"] = archive.read("state_union/2006-GWBush.txt").decode("utf-8")
    with zipfile.ZipFile(require(nltk / "movie_reviews.zip")) as archive:
        texts["review"] = archive.read("movie_reviews/neg/cv000_29416.txt").decode("utf-8")
    with zipfile.ZipFile(require(nltk / "inaugural.zip")) as archive:
        texts["washington"] = archive.read("inaugural/1793-Washington.txt").decode("utf-8")
    gold = json.loads(require(data_dir / "article-extraction-benchmark" / "ground-truth.json").read_text("utf-8"))
    for name, prefix in (("tennis", "0d46122928"), ("stadia", "e100c9612a"), ("wired", "d48aeb9cf2")):
        (key,) = [key for key in gold if key.startswith(prefix)]
        texts[name] = gold[key]["articleBody"]
    return texts


def quoted(corpora: dict[str, str], name: str, sentence: str) -> str:
    assert sentence in corpora[name], f"not a quote from {name}: {sentence!r}"
    return sentence


def test_english_clitics_split_off(corpora):
    sentence = quoted(
        corpora,
        "bush",
        "Every time I'm invited to this rostrum, I'm humbled by the privilege, and mindful of the history "
        "we've seen together.",
    )
    assert split_words(sentence) == (
        "Every", "time", "I", "'m", "invited", "to", "this", "rostrum", ",", "I", "'m", "humbled", "by", "the",
        "privilege", ",", "and", "mindful", "of", "the", "history", "we", "'ve", "seen", "together", ".",
    )  # fmt: skip
    # The review corpus is lower-cased and pre-tokenized, but keeps "didn't" whole: do|n't splits.
    review = quoted(corpora, "review", "these folks just didn't snag this one correctly . ")
    assert split_words(review) == ("these", "folks", "just", "did", "n't", "snag", "this", "one", "correctly", ".")
    # Typographic apostrophes (U+2019) split the same way as ASCII ones.
    assert split_words(quoted(corpora, "stadia", "Destiny 2 isn’t the only game")) == (
        "Destiny", "2", "is", "n’t", "the", "only", "game",
    )  # fmt: skip
    assert split_words(quoted(corpora, "stadia", "According to The Verge’s Stadia review")) == (
        "According", "to", "The", "Verge", "’s", "Stadia", "review",
    )  # fmt: skip
    # A possessive in upper case: BUSH'S -> BUSH + 'S; the initial "W." is an abbreviation.
    assert split_words(quoted(corpora, "bush", "PRESIDENT GEORGE W. BUSH'S ADDRESS")) == (
        "PRESIDENT", "GEORGE", "W.", "BUSH", "'S", "ADDRESS",
    )  # fmt: skip


def test_abbreviations_stay_whole_and_do_not_end_sentences(corpora):
    sentence = quoted(corpora, "bush", "at the Capitol, Tuesday, Jan. 31, 2006.")
    assert split_words(sentence) == ("at", "the", "Capitol", ",", "Tuesday", ",", "Jan.", "31", ",", "2006", ".")
    assert split_words(quoted(corpora, "bush", "Mr. Speaker, Vice President Cheney")) == (
        "Mr.", "Speaker", ",", "Vice", "President", "Cheney",
    )  # fmt: skip
    us = quoted(
        corpora,
        "tennis",
        "The U.S. had won all previous 15 meetings with their North American neighbours, though they had not met "
        "since 1965.",
    )
    assert split_words(us)[:3] == ("The", "U.S.", "had")
    assert count_sentences(us) == 1
    night = quoted(
        corpora, "tennis", "a marathon series that ended close to 2 a.m. local time (0100 GMT) on Wednesday."
    )
    assert "a.m." in split_words(night)
    assert count_sentences(night) == 1


def test_punctuation_and_ellipses_are_their_own_tokens(corpora):
    # The review corpus spaces its ellipses out: three tokens; a typed "...." stays one.
    spaced = quoted(corpora, "review", 'watch the movie and " sorta " find out . . . ')
    assert split_words(spaced) == ("watch", "the", "movie", "and", '"', "sorta", '"', "find", "out", ".", ".", ".")
    assert split_words("may receive further discipline....") == ("may", "receive", "further", "discipline", "....")
    assert split_words(quoted(corpora, "bush", "one another -- and I will do my part.")) == (
        "one", "another", "--", "and", "I", "will", "do", "my", "part", ".",
    )  # fmt: skip
    # Hyphenated words split at the hyphen (the review's "mind-fuck").
    assert split_words(quoted(corpora, "review", "a mind-fuck movie")) == ("a", "mind", "-", "fuck", "movie")


def test_urls_emails_and_numbers_stay_whole(corpora):
    wired = quoted(corpora, "wired", "Email the writer at louise_matsakis@wired.com. Signal: 347-966-3806.")
    assert split_words(wired) == (
        "Email", "the", "writer", "at", "louise_matsakis@wired.com", ".", "Signal", ":", "347", "-", "966", "-",
        "3806", ".",
    )  # fmt: skip
    stadia = quoted(corpora, "stadia", "tap into powerful 10.7 teraflop hardware, allowing anybody to play games at 4k")
    assert split_words(stadia) == (
        "tap", "into", "powerful", "10.7", "teraflop", "hardware", ",", "allowing", "anybody", "to", "play", "games",
        "at", "4k",
    )  # fmt: skip
    neymar = quoted(corpora, "tennis", "Brazil star Neymar was among the more than 12,000 in attendance")
    assert split_words(neymar) == (
        "Brazil", "star", "Neymar", "was", "among", "the", "more", "than", "12,000", "in", "attendance",
    )  # fmt: skip
    article = "Yes this is real and yes the state spent nearly half a million dollars on it: https://t.co/Nc0nKoXGBP"
    assert split_words(article)[-3:] == ("it", ":", "https://t.co/Nc0nKoXGBP")
    assert split_words("please visit: www.ascom.com") == ("please", "visit", ":", "www.ascom.com")


def test_scripts_without_spaces_split_per_character(udhr_texts):
    chinese = udhr_texts["cmn_hans"]
    line = "1948 年 12 月 10 日，联合国大会通过并颁布《世界人权宣言》。"
    assert line in chinese
    assert split_words(line) == (
        "1948", "年", "12", "月", "10", "日", "，", "联", "合", "国", "大", "会", "通", "过", "并", "颁", "布", "《",
        "世", "界", "人", "权", "宣", "言", "》", "。",
    )  # fmt: skip
    assert count_sentences(line) == 1
    # Korean is written with spaces: its words stay whole.
    korean = udhr_texts["kor"].split()[:3]
    assert [split_words(word) for word in korean] == [(word,) for word in korean]
    # Every Han character of the whole Chinese declaration is a token of its own.
    han = [token for token in split_words(chinese) if "\u4e00" <= token[0] <= "\u9fff"]
    assert han and all(len(token) == 1 for token in han)
    assert len(han) == sum("\u4e00" <= char <= "\u9fff" for char in chinese)


def test_spacy_splitter_keeps_runs_whole_and_applies_english_exceptions(udhr_texts):
    pytest.importorskip("spacy", reason="word_splitter('spacy') needs spaCy: pip install 'beamtrove[spacy]'")
    spacy_words = word_splitter("spacy")
    assert word_splitter("beamtrove") is split_words and word_splitter("spacy") is spacy_words
    line = "1948 年 12 月 10 日，联合国大会通过并颁布《世界人权宣言》。"
    assert line in udhr_texts["cmn_hans"]
    assert spacy_words(line) == ("1948", "年", "12", "月", "10", "日，联合国大会通过并颁布《世界人权宣言", "》", "。")
    # German "im" is English "I'm" written without its apostrophe to spaCy's English tokenizer.
    german = "sollen einander im Geist der Brüderlichkeit begegnen."
    assert german in udhr_texts["deu"]
    assert spacy_words(german) == ("sollen", "einander", "i", "m", "Geist", "der", "Brüderlichkeit", "begegnen", ".")
    assert split_words(german) == ("sollen", "einander", "im", "Geist", "der", "Brüderlichkeit", "begegnen", ".")


def test_unknown_word_splitters_are_refused():
    with pytest.raises(ValueError, match=r"The word splitter is one of beamtrove, spacy, language or .*, not 'nltk'"):
        word_splitter("nltk")
    with pytest.raises(ValueError, match="not 'SPACY'"):
        check_word_splitter("SPACY")


def test_count_sentences_on_real_text(corpora, udhr_texts):
    # Washington's second inaugural address, the shortest ever given: four sentences, the last a long
    # oath with a parenthesis.
    washington = corpora["washington"]
    assert washington.startswith("Fellow citizens, I am again called upon by the voice of my country")
    assert count_sentences(washington) == 4
    # Closing quotes stay with the sentence they close: three sentences, not five.
    quote = quoted(
        corpora,
        "tennis",
        '"It was a difficult situation for us," Lopez said. "We needed this win, otherwise we could be close to '
        'being out of the tournament. Now we are in a good position to advance."',
    )
    assert count_sentences(quote) == 3
    assert count_sentences(quoted(corpora, "tennis", '"I almost died there," Bublik said, jokingly.')) == 1
    # Japanese ends sentences with 。: article 1 of the UDHR holds two.
    japanese = [line.strip() for line in udhr_texts["jpn"].splitlines() if line.strip().startswith("すべての人間は")]
    assert japanese[0].count("。") == 2
    assert count_sentences(japanese[0]) == 2
    # Hindi ends them with the danda।
    assert "।" in TERMINAL_PUNCTUATION
    assert count_sentences("") == 0
    assert count_sentences(" . . . ") == 0


def test_terminal_punctuation_and_punctuation_tokens():
    for mark in (".", "!", "?", "。", "।", "؟", "！", "？"):
        assert mark in TERMINAL_PUNCTUATION
    for mark in (",", ";", ":", "…", "-", '"'):
        assert mark not in TERMINAL_PUNCTUATION
    for token in ("—", "“", "…", "₩", "$", "....", "--", "《"):
        assert is_punctuation(token), token
    for token in ("a", "1", "'s", "n't", "4k", "人", "U.S."):
        assert not is_punctuation(token), token


def test_terminal_punctuation_is_every_sentence_terminal_found_in_blocks_of_bounded_memory():
    every_code_point = "".join(map(chr, range(sys.maxunicode + 1)))
    assert tuple(regex.findall(r"\p{Sentence_Terminal}", every_code_point)) == TERMINAL_PUNCTUATION
    # Sentence terminals sit on both sides of the 65,536-code-point blocks (𑇅 is U+111C5).
    assert "𑇅" in TERMINAL_PUNCTUATION and "。" in TERMINAL_PUNCTUATION
    del every_code_point
    tracemalloc.start()
    try:
        assert _with_property(r"\p{Sentence_Terminal}") == TERMINAL_PUNCTUATION
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Every code point as a string at once takes about 100 MB; a block, a few.
    assert peak < 16 << 20, peak


def test_find_duplicates_on_real_paragraphs_and_lines(udhr_texts, data_dir):
    with zipfile.ZipFile(require(data_dir / "text-corpora" / "nltk_data" / "state_union.zip")) as archive:
        # The Nixon addresses hold a few Big5 punctuation bytes (\xa1\xa6 for an apostrophe): decode leniently.
        nixon = archive.read("state_union/1970-Nixon.txt").decode("utf-8", "replace")
    paragraphs = nixon.strip().split("\n\n")
    # Nixon's 1970 address is one long paragraph and a footnote, then "??" three times.
    assert paragraphs[-3:] == ["??", "??", "??"]
    assert find_duplicates(paragraphs) == (2, 4)
    # The English UDHR separates its articles with whitespace-only lines: 64 of 9 spaces, 31 of 3 and 26 of 6,
    # so 63 + 30 + 25 = 118 lines repeat an earlier one, holding 63*9 + 30*3 + 25*6 = 807 characters.
    lines = udhr_texts["eng"].split("\n")
    assert lines.count(" " * 9) == 64 and lines.count(" " * 3) == 31 and lines.count(" " * 6) == 26
    assert find_duplicates(lines) == (118, 807)
    assert find_duplicates([]) == (0, 0)


def _page_text(path) -> str:
    with gzip.open(path) as page:
        return page.read().decode("utf-8", "replace")


def _tokens_digest(texts) -> tuple[int, str]:
    """How many tokens ``split_words`` makes of ``texts``, and a SHA-256 of them all."""
    digest, tokens = hashlib.sha256(), 0
    for text in texts:
        words = split_words(text)
        tokens += len(words)
        digest.update("\x1f".join(words).encode("utf-8", "surrogatepass") + b"\x1e")
    return tokens, digest.hexdigest()


def test_splitting_gives_the_words_of_0_12_1_on_real_and_hostile_text(udhr_texts, data_dir):
    # The figures are those of beamtrove 0.12.1's splitter, whose time grew with the square of a run of marks:
    # the linear one must split every text into the very same words.
    assert _tokens_digest(udhr_texts.values()) == (
        809358, "0cd6a72aa9334a75ad1ddeb65d5c372b53a531d95c47b635e86acb2ca133da1f",
    )  # fmt: skip
    # Raw HTML of real pages in many languages: markup, scripts and entities make long runs of marks.
    pages = sorted(require(data_dir / "trafilatura-eval" / "cache").glob("*.html.gz"))[:40]
    assert _tokens_digest(map(_page_text, pages)) == (
        728023, "41638a6b91ebf6cd035bdd5c262738eb575c06d09ba27dea765c6c8666424c18",
    )  # fmt: skip
    rng = random.Random(29)
    marks = "*!?.,;:'’\"…$%+-—/()§#=«»。，" + "aAsS1."
    hostile = ["".join(rng.choice(marks) for _ in range(rng.randint(1, 80))) for _ in range(3000)]
    assert _tokens_digest(hostile) == (24093, "a54fed549b0850514a78e7863d8396f0f81daf26432c6f821a0281930482229d")


def test_a_megabyte_run_of_marks_splits_into_one_token_per_mark():
    # One such record took 0.12.1 about a day (its time grew with the square of the run).
    assert split_words("*" * 1_000_000) == ("*",) * 1_000_000
    assert split_words("!?.,;" * 200_000) == tuple("!?.,;" * 200_000)
    # What the marks surround is split as when it stands alone, however long the run.
    stars = ("*",) * 500_000
    assert split_words("*" * 500_000 + "don't" + "*" * 500_000) == (*stars, "do", "n't", *stars)
    assert split_words("(" * 500_000 + "U.S.A." + ")" * 500_000) == (
        *("(",) * 500_000, "U.S.A.", *(")",) * 500_000,
    )  # fmt: skip
    assert split_words("U.S." + "!" * 500_000) == ("U.S.", *("!",) * 500_000)
    assert split_words("$" * 500_000 + "1") == (*("$",) * 500_000, "1")
    dots = "." * 500_000
    assert split_words(dots + "x" + dots) == (dots, "x", dots)


def test_the_rules_split_no_chunk_of_letters_below_the_scripts_without_spaces():
    # split_words takes such chunks as words without running the rules: the rules must agree, for every letter.
    letters = [chr(code) for code in range(0xE00) if chr(code).isalpha()]
    assert len(letters) > 1500
    for letter in letters:
        for chunk in (letter, letter * 3, f"a{letter}", f"{letter}s", f"{letter}A{letter}"):
            assert _split_chunk(chunk) == [chunk], chunk
    # A number, a mark or a character of a script without spaces still goes through them.
    assert split_words("0µm straße 3€ 東京") == ("0", "µm", "straße", "3", "€", "東", "京")


def test_spaced_words_are_the_words_joined_by_spaces_and_a_plain_text_is_not_copied(udhr_texts):
    texts = list(udhr_texts.values())
    for text in [*texts, *map(normalize_text, texts), "a  b", " a\tb ", "", "0µm 東京 x", "don't €5"]:
        assert spaced_words(text) == " ".join(split_words(text))
    plain = normalize_text(udhr_texts["eng"])
    assert spaced_words(plain) is plain
    assert spaced_words(normalize_text(udhr_texts["cmn_hans"])).count(" ") > 1000


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Café  déjà-vu: 3.14 € (1,000.5)!  ¿Qué?", "cafe deja vu 0 € 0 0 ¿que"),
        ("“Fellow-Citizens”\t\r\n of the\u00a0SENATE…", "fellow citizens of the senate"),
        ("Price: 1,299.00 USD (was 1.499,00)", "price 0 0 usd was 0 0"),
        ("Ünïcödé — “quotes” and «guillemets»", "unicode quotes and guillemets"),
        # Kana voicing marks decompose into combining marks and go, as accents do.
        ("日本語のテキスト、です。", "日本語のテキスト てす"),
        # Symbols, other scripts' marks and invisible characters outside DataTrove's list stay in the words.
        ("a • b © c ° d ‐ e", "a • b © c ° d ‐ e"),
        ("Mittel\u00adalter, Mittelalter", "mittel\u00adalter mittelalter"),
        ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 word\u200bjoin",) * 2,
        ("", ""),
    ],
)
def test_normalize_text_folds_case_accents_numbers_spacing_and_datatroves_punctuation(text, normalized):
    assert normalize_text(text) == normalized


def _simplified_by_definition(text: str) -> str:
    """The normalization as its docstring says it, a character at a time with Python's own Unicode tables."""
    text = regex.sub(r"\p{Nd}+(?:[.,\u060c\u066b\u2396\u2397\u2398]\p{Nd}+)?", "0", text.lower())
    text = "".join(" " if char in _MARKS else char for char in text)
    text = unicodedata.normalize("NFD", " ".join(text.split()))
    return "".join(char for char in text if unicodedata.category(char) != "Mn").strip()


def test_normalize_text_keeps_to_its_definition_for_every_code_point():
    # Marks are found with the regex module's tables, which may be of a newer Unicode than Python's (110 code points
    # unassigned in Python 3.11's are nonspacing marks there); Python's decide. Planes 4 to 13 hold no character
    # in any Unicode version yet, 15 and 16 private use only.
    codes = [*range(0x40000), *range(0xE0000, 0xF0000)]
    differing = [
        hex(code) for code in codes if normalize_text(f"Ab{chr(code)}c") != _simplified_by_definition(f"Ab{chr(code)}c")
    ]
    assert differing == []


def test_normalize_text_is_datatroves_simplify_text_in_388_languages(udhr_texts):
    digest = hashlib.sha256()
    for text in udhr_texts.values():
        digest.update(normalize_text(text).encode("utf-8", "surrogatepass") + b"\x1e")
    assert digest.hexdigest() == "69da26744a0812651cb19b5d6bbf6d4893285537163eb1ae8a0135dbcf0de414"


def test_dedup_and_decontamination_see_the_euro_sign_of_real_prices_as_a_word(data_dir, udhr_texts):
    evaldata = json.loads(gzip.decompress(require(data_dir / "trafilatura-eval" / "evaldata.json.gz").read_bytes()))
    prices = sorted({snippet for page in evaldata.values() for snippet in page.get("with", []) if "€" in snippet})
    assert [normalize_text(price) for price in prices] == [
        "0 €",
        "0 0 € gutschein fur den einkauf bei edeka erhalten",
        "erwachsene 0 € preis 0",
        "hohen anfangsinvestition von rund 0 € schwer erschwinglich",
    ]
    words = ["hohen", "anfangsinvestition", "von", "rund", "0", "€", "schwer", "erschwinglich"]
    # Decontamination's n-grams, and the shingles of MinHash, Bloom and sentence dedup, hold the sign.
    assert benchmark_ngrams(prices[3], None, DecontConfig(n_grams=3), split_words)[3:5] == ["rund 0 €", "0 € schwer"]
    expected = shingle_hashes(" ".join(words), 3)
    assert np.array_equal(bloom_shingles(prices[3], 3), expected)
    hasher = MinHasher(MinHashConfig(n_grams=3))
    assert not np.array_equal(hasher.signature(prices[3]), hasher.signature(prices[3].replace("€", "")))
    assert span_digests(prices[2], 1) != span_digests(prices[2].replace("€", ""), 1)
    # The UDHR in Chachi writes the sign inside a word: it stays there, accents gone.
    assert "mijaiñung€'" in udhr_texts["cbi"]
    assert " tyashi mijainung€ tsamantsa " in normalize_text(udhr_texts["cbi"])
