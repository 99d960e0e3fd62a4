"""Vectorized n-gram shingles of normalized text."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from beamtrove.text import normalize_text
from beamtrove.transforms.dedup import shingle_hashes
from beamtrove.transforms.dedup.shingles import RecentTexts, word_shingle_hashes


def test_shingles_of_real_reviews_are_one_hash_per_distinct_five_gram(reviews):
    seen: dict[str, int] = {}
    for document in reviews:
        normalized = normalize_text(document.text)
        words = normalized.split()
        hashes = shingle_hashes(normalized, 5)
        grams = [" ".join(words[i : i + 5]) for i in range(len(words) - 4)]
        assert len(hashes) == len(grams) > 0
        for gram, value in zip(grams, hashes.tolist(), strict=True):
            assert seen.setdefault(gram, value) == value
    # No two different n-grams share a hash.
    assert len(set(seen.values())) == len(seen) > 100_000


def test_texts_shorter_than_the_ngram_have_no_shingles():
    assert shingle_hashes("four words are here", 5).size == 0
    assert shingle_hashes("", 5).size == 0
    assert shingle_hashes("five words are here now", 5).size == 1


def test_shingles_do_not_depend_on_the_python_process(reviews):
    text = normalize_text(reviews[0].text)
    code = (
        "import sys; from beamtrove.transforms.dedup import shingle_hashes;"
        "print(shingle_hashes(sys.stdin.read(), 5).tolist())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {str(shingle_hashes(text, 5).tolist()) + "\n"}
    assert shingle_hashes(text, 5).dtype == np.uint64


def test_documents_beyond_the_cached_powers_hash_the_same_ngrams_alike(reviews):
    words = normalize_text(reviews[5].text).split()
    repeats = (1 << 20) // len(" ".join(words)) + 2
    text = " ".join(words * repeats)
    assert len(text.encode()) > 1 << 20
    hashes = shingle_hashes(text, 5)
    period = len(words)
    # The same 5-gram recurs every len(words) positions, before and after the first MiB.
    assert np.array_equal(hashes[period:], hashes[:-period])
    assert np.array_equal(hashes[: period - 4], shingle_hashes(" ".join(words), 5))


def test_word_shingles_hash_as_the_text_of_those_words_does(reviews):
    for document in reviews[:200]:
        normalized = normalize_text(document.text)
        assert np.array_equal(word_shingle_hashes(normalized.split(" "), 5), shingle_hashes(normalized, 5))
    # A word with a space inside (pyvi's Vietnamese "sinh viên") stays one word of the n-gram.
    words = ["tôi", "là", "sinh viên", "đại học", "bách khoa"]
    assert len(word_shingle_hashes(words, 5)) == 1
    assert len(shingle_hashes(" ".join(words), 5)) == 4
    assert word_shingle_hashes(words[:4], 5).size == 0


def test_recent_texts_compute_each_text_once_while_it_is_kept(reviews):
    calls = []

    def hashed(text: str, language: str | None) -> np.ndarray:
        calls.append((text, language))
        return shingle_hashes(normalize_text(text), 5)

    texts = [document.text for document in reviews[:3]]
    recent = RecentTexts(hashed, lambda result: result.nbytes, 1 << 20)
    for text in texts * 2:
        assert np.array_equal(recent(text), shingle_hashes(normalize_text(text), 5))
    # A copy of a text (another string) is the same text; the same text in another language is another.
    recent("".join(list(texts[1])))
    recent(texts[0], "fra_Latn")
    assert calls == [(text, None) for text in texts] + [(texts[0], "fra_Latn")]


def test_recent_texts_drop_the_least_recently_used_first():
    calls = []
    # Results of 80 bytes, room for three.
    recent = RecentTexts(lambda text, language: calls.append(text) or np.zeros(10), lambda result: result.nbytes, 240)
    for text in ("a", "b", "c", "a", "d", "a", "c", "b"):
        recent(text)
    # "d" pushed out "b", the least recently used then; "b" pushed out "d" (used before "a" and "c").
    assert calls == ["a", "b", "c", "d", "b"]
    for text in ("d", "c", "b"):
        recent(text)
    assert calls == ["a", "b", "c", "d", "b", "d"]


def test_recent_texts_do_not_keep_a_result_larger_than_all_they_may_hold():
    calls = []
    recent = RecentTexts(lambda text, language: calls.append(text) or np.zeros(100), lambda result: result.nbytes, 799)
    recent("a text")
    recent("a text")
    assert calls == ["a text", "a text"]
