"""Gopher's repetition and quality rules (Rae et al. 2021, "Scaling Language Models", appendix A1)."""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Iterable

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.text import check_word_splitter, find_duplicates, is_punctuation, word_splitter
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict

__all__ = ["GopherQualityFilter", "GopherRepetitionFilter"]

_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_LINE_BREAK = re.compile(r"\n+")


def _ngrams(words: tuple[str, ...], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(words[k:] for k in range(n)), strict=False))


def _top_ngram_chars(words: tuple[str, ...], n: int) -> int:
    """Characters covered by the most frequent ``n``-gram (words joined by spaces), once per occurrence."""
    counts = collections.Counter(_ngrams(words, n))
    if not counts:
        return 0
    ngram, count = counts.most_common(1)[0]
    return (sum(map(len, ngram)) + n - 1) * count


def _repeated_ngram_chars(words: tuple[str, ...], n: int, ends: list[int]) -> int:
    """Characters of the words in ``n``-grams that repeat an earlier one, overlaps not counted twice.

    ``ends[i]`` is the number of characters in ``words[:i]``.
    """
    ngrams = _ngrams(words, n)
    seen = set()
    repeated = 0
    i = 0
    while i < len(ngrams):
        if ngrams[i] in seen:
            repeated += ends[i + n] - ends[i]
            i += n
        else:
            seen.add(ngrams[i])
            i += 1
    return repeated


class GopherRepetitionFilter(DocumentFilter):
    """Drops documents whose lines, paragraphs or word n-grams repeat too much.

    Fractions are of the document's characters except the two ``*_frac``
    thresholds, which are fractions of lines or paragraphs. ``None`` disables a
    rule. Drop reasons: ``dup_para_frac``, ``dup_para_char_frac``,
    ``dup_line_frac``, ``dup_line_char_frac``, ``top_<n>_gram``,
    ``duplicated_<n>_n_grams``, ``empty``. ``word_splitter`` names what
    splits the n-grams' words (see :data:`beamtrove.text.WORD_SPLITTERS`;
    ``language``: each document's language's, from the table at
    ``word_tokenizers``, the fetched one when None).

    Raises:
        ValueError: An unknown word splitter, or one whose package is not installed.
    """

    name = "gopher_repetition"

    def __init__(
        self,
        dup_line_frac: float | None = 0.3,
        dup_para_frac: float | None = 0.3,
        dup_line_char_frac: float | None = 0.2,
        dup_para_char_frac: float | None = 0.2,
        top_n_grams: Iterable[tuple[int, float]] = ((2, 0.2), (3, 0.18), (4, 0.16)),
        dup_n_grams: Iterable[tuple[int, float]] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
        word_splitter: str = "beamtrove",
        word_tokenizers: str | None = None,
    ):
        check_word_splitter(word_splitter, word_tokenizers=word_tokenizers)
        self.word_splitter = word_splitter
        self.word_tokenizers = word_tokenizers
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = tuple(top_n_grams)
        self.dup_n_grams = tuple(dup_n_grams)

    def filter(self, document: Document) -> Verdict:
        text = document.text
        if not text:
            return Drop("empty")
        for unit, parts in (("para", _PARAGRAPH_BREAK.split(text.strip())), ("line", _LINE_BREAK.split(text))):
            repeats, repeated_chars = find_duplicates(parts)
            max_frac = getattr(self, f"dup_{unit}_frac")
            if max_frac is not None and repeats / len(parts) > max_frac:
                return Drop(f"dup_{unit}_frac")
            max_char_frac = getattr(self, f"dup_{unit}_char_frac")
            if max_char_frac is not None and repeated_chars / len(text) > max_char_frac:
                return Drop(f"dup_{unit}_char_frac")
        split = word_splitter(self.word_splitter, language_key(document.metadata), word_tokenizers=self.word_tokenizers)
        words = split(text)
        for n, max_frac in self.top_n_grams:
            if _top_ngram_chars(words, n) / len(text) > max_frac:
                return Drop(f"top_{n}_gram")
        ends = [0, *itertools.accumulate(map(len, words))]
        for n, max_frac in self.dup_n_grams:
            if _repeated_ngram_chars(words, n, ends) / len(text) > max_frac:
                return Drop(f"duplicated_{n}_n_grams")
        return document


#: The stop words Gopher requires two of.
GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


class GopherQualityFilter(DocumentFilter):
    """Drops documents that fail Gopher's quality heuristics.

    Words are the tokens of ``word_splitter`` (:func:`beamtrove.text.split_words`
    by default; ``spacy`` for DataTrove's English ones, ``language`` for each
    document's language's from the table at ``word_tokenizers``, see
    :data:`beamtrove.text.WORD_SPLITTERS`);
    "symbol" tokens are those made of punctuation only and do not count as
    words for the length rules. ``None`` disables a rule. Drop reasons: ``gopher_short_doc``,
    ``gopher_long_doc``, ``gopher_below_avg_threshold``,
    ``gopher_above_avg_threshold``, ``gopher_too_many_hashes``,
    ``gopher_too_many_ellipsis``, ``gopher_too_many_bullets``,
    ``gopher_too_many_end_ellipsis``, ``gopher_below_alpha_threshold``,
    ``gopher_enough_stop_words`` (the names DataTrove reports).

    Raises:
        ValueError: An unknown word splitter, or one whose package is not installed.
    """

    name = "gopher_quality"

    def __init__(
        self,
        min_doc_words: int | None = 50,
        max_doc_words: int | None = 100_000,
        min_avg_word_length: float | None = 3,
        max_avg_word_length: float | None = 10,
        max_symbol_word_ratio: float | None = 0.1,
        max_bullet_lines_ratio: float | None = 0.9,
        max_ellipsis_lines_ratio: float | None = 0.3,
        min_alpha_words_ratio: float | None = 0.8,
        min_stop_words: int | None = 2,
        stop_words: Iterable[str] = GOPHER_STOP_WORDS,
        word_splitter: str = "beamtrove",
        word_tokenizers: str | None = None,
    ):
        check_word_splitter(word_splitter, word_tokenizers=word_tokenizers)
        self.word_splitter = word_splitter
        self.word_tokenizers = word_tokenizers
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.min_alpha_words_ratio = min_alpha_words_ratio
        self.min_stop_words = min_stop_words
        self.stop_words = frozenset(stop_words)

    def filter(self, document: Document) -> Verdict:
        text = document.text
        split = word_splitter(self.word_splitter, language_key(document.metadata), word_tokenizers=self.word_tokenizers)
        tokens = split(text)
        words = [token for token in tokens if not is_punctuation(token)]
        if self.min_doc_words is not None and len(words) < self.min_doc_words:
            return Drop("gopher_short_doc")
        if self.max_doc_words is not None and len(words) > self.max_doc_words:
            return Drop("gopher_long_doc")
        if not words:
            return Drop("gopher_short_doc")
        mean_length = sum(map(len, words)) / len(words)
        if self.min_avg_word_length is not None and mean_length < self.min_avg_word_length:
            return Drop("gopher_below_avg_threshold")
        if self.max_avg_word_length is not None and mean_length > self.max_avg_word_length:
            return Drop("gopher_above_avg_threshold")
        if self.max_symbol_word_ratio is not None:
            if text.count("#") / len(tokens) > self.max_symbol_word_ratio:
                return Drop("gopher_too_many_hashes")
            if (text.count("...") + text.count("…")) / len(tokens) > self.max_symbol_word_ratio:
                return Drop("gopher_too_many_ellipsis")
        lines = text.splitlines()
        if self.max_bullet_lines_ratio is not None:
            bullets = sum(line.lstrip().startswith(("•", "-")) for line in lines)
            if bullets / len(lines) > self.max_bullet_lines_ratio:
                return Drop("gopher_too_many_bullets")
        if self.max_ellipsis_lines_ratio is not None:
            ellipses = sum(line.rstrip().endswith(("...", "…")) for line in lines)
            if ellipses / len(lines) > self.max_ellipsis_lines_ratio:
                return Drop("gopher_too_many_end_ellipsis")
        if self.min_alpha_words_ratio is not None:
            alpha = sum(any(char.isalpha() for char in token) for token in tokens)
            if alpha / len(tokens) < self.min_alpha_words_ratio:
                return Drop("gopher_below_alpha_threshold")
        if self.min_stop_words is not None and len(self.stop_words.intersection(tokens)) < self.min_stop_words:
            return Drop("gopher_enough_stop_words")
        return document
