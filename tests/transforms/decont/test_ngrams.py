"""N-grams and hashes of decontamination, checked against DataTrove 0.10.1's outputs."""

from __future__ import annotations

import importlib.util

import pytest

from beamtrove.text import normalize_text, word_splitter
from beamtrove.transforms.decont import DecontConfig, benchmark_ngrams, hash_ngram

needs_spacy = pytest.mark.skipif(importlib.util.find_spec("spacy") is None, reason="spaCy is an optional dependency")

# Kennedy, 1961; the hash is what DataTrove's xxhash64 gives.
KENNEDY = (
    "Let every nation know, whether it wishes us well or ill, that we shall pay any price, bear any burden, "
    "meet any hardship, support any friend, oppose any foe to assure the survival and the success of liberty."
)


def test_hash_is_datatrove_xxhash64_of_the_joined_words():
    assert hash_ngram("shall pay any price bear any burden meet any hardship support any") == 4429175803123627840
    assert hash_ngram("\ud800 lone surrogate") == hash_ngram("\ud800 lone surrogate")


def test_benchmark_ngrams_follow_datatrove_config_example():
    # NGramsDecontConfig's own example: query A..E, label F..J, 4-grams.
    query, label = "A B C D E", "F G H I J"
    split = word_splitter("beamtrove")
    label_only = ["f g h i", "g h i j"]
    overlap = ["c d e f", "d e f g", "e f g h"]
    query_only = ["a b c d", "b c d e"]
    assert benchmark_ngrams(label, query, DecontConfig(n_grams=4), split) == label_only + overlap
    both = DecontConfig(n_grams=4, find_query_ngrams=True)
    assert benchmark_ngrams(label, query, both, split) == label_only + query_only + overlap
    neither = DecontConfig(n_grams=4, find_overlap_ngrams=False)
    assert benchmark_ngrams(label, query, neither, split) == label_only
    assert benchmark_ngrams(label, None, DecontConfig(n_grams=4), split) == label_only
    # A two-word query and label still give the one overlap n-gram that fits them.
    assert benchmark_ngrams("F G", "D E", DecontConfig(n_grams=4), split) == ["d e f g"]
    assert benchmark_ngrams("F G", "E", DecontConfig(n_grams=4), split) == []


def test_twelve_grams_of_a_real_label():
    grams = benchmark_ngrams(KENNEDY, None, DecontConfig(), word_splitter("beamtrove"))
    assert len(grams) == 27
    assert grams[0] == "let every nation know whether it wishes us well or ill that"
    assert grams[-1] == "oppose any foe to assure the survival and the success of liberty"


@needs_spacy
def test_spacy_splits_words_as_datatrove_and_beamtrove_keeps_them_whole():
    text = normalize_text("Ich bin im Haus; I cannot, don't.")
    assert list(word_splitter("spacy")(text)) == ["ich", "bin", "i", "m", "haus", "i", "can", "not", "don", "t"]
    assert list(word_splitter("beamtrove")(text)) == ["ich", "bin", "im", "haus", "i", "cannot", "don", "t"]


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match="n_grams must be at least 1"):
        DecontConfig(n_grams=0)
    with pytest.raises(ValueError, match=r"one of beamtrove, spacy, language or a language of .*, not 'nltk'"):
        DecontConfig(word_splitter="nltk")
