"""The n-grams decontamination looks for, and how a text becomes them.

A benchmark item is a ``query`` (the prompt) and a ``label`` (the gold
answer). Both sides of decontamination normalize text the same way
(:func:`normalize_text`), split it into words and hash every run of ``n``
consecutive words joined by single spaces with 64-bit xxHash: DataTrove's
``NGramsDecontIndexer`` and ``NGramsDecontFilter`` with their defaults, so
that an index either tool builds names the same n-grams.
"""

from __future__ import annotations

import dataclasses
import string
import unicodedata
from collections.abc import Callable, Sequence

import regex
import xxhash

from beamtrove.text import check_word_splitter

__all__ = [
    "DecontConfig",
    "benchmark_ngrams",
    "hash_ngram",
    "normalize_text",
    "word_ngrams",
]

# The marks DataTrove's text simplification turns into spaces: ASCII punctuation, common CJK and typographic
# marks, and the C0/C1 control characters except tab and newline (whitespace, folded later anyway).
_MARKS = (
    string.punctuation
    + "\u2013\u2014\u2019\u201c\u201d\u201e\u2026\u2236\u2501\u25ba\u00ab\u00b4\u00bb"
    + "\u3001\u3002\u3008\u3009\u300a\u300b\u300c\u300d\u3010\u3011"
    + "\uff01\uff05\uff08\uff09\uff0c\uff0e\uff11\uff1a\uff1b\uff1f\uff5e"
    + "".join(chr(code) for code in (*range(0, 9), *range(11, 32), *range(127, 160)))
)
_MARKS_TO_SPACES = str.maketrans(_MARKS, " " * len(_MARKS))
# A number, with at most one decimal part after one of the separators in use across scripts.
_NUMBER = regex.compile(r"\p{Nd}+(?:[.,\u060c\u066b\u2396\u2397\u2398]\p{Nd}+)?")


def normalize_text(text: str) -> str:
    """``text`` as decontamination compares it: DataTrove's default text simplification.

    Lowercased; every number (``3``, ``3.14``, ``2,5``) becomes ``0``;
    punctuation and control characters become spaces; runs of whitespace
    become one space; accents are removed (NFD, combining marks dropped).
    Example: ``"Café  déjà-vu: 3.14 €!"`` becomes ``"cafe deja vu 0 €"``.
    """
    text = _NUMBER.sub("0", text.lower()).translate(_MARKS_TO_SPACES)
    text = unicodedata.normalize("NFD", " ".join(text.split()))
    return "".join(char for char in text if unicodedata.category(char) != "Mn").strip()


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
            as DataTrove's index, needs ``pip install 'beamtrove[spacy]'``).
    """

    n_grams: int = 12
    find_query_ngrams: bool = False
    find_overlap_ngrams: bool = True
    word_splitter: str = "beamtrove"

    def __post_init__(self):
        if self.n_grams < 1:
            raise ValueError(f"n_grams must be at least 1 (got {self.n_grams}).")
        check_word_splitter(self.word_splitter)


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
        split: The word splitter ``config.word_splitter`` names.
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
