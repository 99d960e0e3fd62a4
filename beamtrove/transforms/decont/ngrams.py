"""The n-grams decontamination looks for, and how a text becomes them.

A benchmark item is a ``query`` (the prompt) and a ``label`` (the gold
answer). Both sides of decontamination normalize text the same way
(:func:`~beamtrove.text.normalize_text`), split it into words and hash every
run of ``n`` consecutive words joined by single spaces with 64-bit xxHash:
DataTrove's ``NGramsDecontIndexer`` and ``NGramsDecontFilter`` with their
defaults, so that an index either tool builds names the same n-grams.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import xxhash

from beamtrove.text import check_word_splitter, normalize_text

__all__ = [
    "DecontConfig",
    "benchmark_ngrams",
    "hash_ngram",
    "word_ngrams",
]


@dataclasses.dataclass(frozen=True)
class DecontConfig:
    """Which n-grams of a benchmark item count as contamination (DataTrove's ``NGramsDecontConfig``).

    With ``n_grams=4``, query ``a b c d e`` and label ``f g h i j``, the
    index holds the label's n-grams ``f g h i`` and ``g h i j``; with
    ``find_overlap_ngrams`` also those spanning both, ``c d e f``, ``d e f g``
    and ``e f g h``; with ``find_query_ngrams`` also the query's own,
    ``a b c d`` and ``b c d e``.

    Attributes:
        n_grams: Words per n-gram.
        find_query_ngrams: Also index n-grams of the query alone.
        find_overlap_ngrams: Also index n-grams that end the query and start the label.
        word_splitter: ``beamtrove`` (:func:`beamtrove.text.split_words`) or
            ``spacy`` (spaCy's English tokenizer, DataTrove's: the same hashes
            as DataTrove's index, needs ``pip install 'beamtrove[spacy]'``); a
            language key (``"tha_Thai"``: that language's words, as DataTrove's
            ``language=``), or ``language`` (each item's and each document's
            language's, see :data:`beamtrove.text.WORD_SPLITTERS`).
        word_tokenizers: The word tokenizer table a language splitter reads;
            the fetched one when None.
    """

    n_grams: int = 12
    find_query_ngrams: bool = False
    find_overlap_ngrams: bool = True
    word_splitter: str = "beamtrove"
    word_tokenizers: str | None = None

    def __post_init__(self):
        if self.n_grams < 1:
            raise ValueError(f"n_grams must be at least 1 (got {self.n_grams}).")
        check_word_splitter(self.word_splitter, word_tokenizers=self.word_tokenizers)


def word_ngrams(words: Sequence[str], n: int) -> list[str]:
    """Every run of ``n`` consecutive ``words``, joined by single spaces, in text order."""
    return [" ".join(words[start : start + n]) for start in range(len(words) - n + 1)]


def benchmark_ngrams(
    label: str, query: str | None, config: DecontConfig, split: Callable[[str], Sequence[str]]
) -> list[str]:
    """The n-grams of one benchmark item that ``config`` indexes.

    Args:
        label: The gold answer.
        query: The prompt, or None when the item has none.
        config: Which n-grams to take.
        split: The word splitter ``config.word_splitter`` names, for the item's language.
    """
    n = config.n_grams
    label_words = list(split(normalize_text(label)))
    found = word_ngrams(label_words, n)
    if query is None:
        return found
    query_words = list(split(normalize_text(query)))
    if config.find_query_ngrams:
        found += word_ngrams(query_words, n)
    if config.find_overlap_ngrams:
        # The last k query words and the first n - k label words, for every k from n - 1 down to 1.
        found += [
            " ".join(query_words[len(query_words) - k :] + label_words[: n - k])
            for k in range(n - 1, 0, -1)
            if k <= len(query_words) and n - k <= len(label_words)
        ]
    return found


def hash_ngram(ngram: str) -> int:
    """The 64-bit xxHash (seed 0) of the n-gram's UTF-8 bytes, as DataTrove hashes it.

    A lone surrogate (from a JSON ``\\ud800`` escape) is hashed as its three UTF-8-style bytes rather than failing.
    """
    return xxhash.xxh64_intdigest(ngram.encode("utf-8", "surrogatepass"))
