"""Word-level statistics of a document, as DataTrove's ``WordStats`` computes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from beamtrove.document import Document
from beamtrove.text import split_words
from beamtrove.transforms.filters.gopher import GOPHER_STOP_WORDS
from beamtrove.transforms.summary.base import StatsBlock, ratio

__all__ = ["WordStats"]


class WordStats(StatsBlock):
    """``n_words``, ``avg_word_length``, ``avg_words_per_line``, ``short_word_ratio_<k>`` (words of at most
    k characters), ``long_word_ratio_<k>`` (at least k), ``type_token_ratio``, ``uppercase_word_ratio``,
    ``capitalized_word_ratio`` and ``stop_word_ratio``.

    Words are the tokens of :func:`beamtrove.text.split_words` (spaCy's
    English rules, which DataTrove's English word tokenizer applies),
    punctuation tokens included, as in DataTrove.

    Args:
        short_word_chars: The ``k`` of each ``short_word_ratio_<k>``.
        long_word_chars: The ``k`` of each ``long_word_ratio_<k>``.
        stop_words: The words ``stop_word_ratio`` counts.
    """

    name = "word"

    def __init__(
        self,
        short_word_chars: Sequence[int] = (3,),
        long_word_chars: Sequence[int] = (7,),
        stop_words: Iterable[str] = GOPHER_STOP_WORDS,
    ):
        self.short_word_chars = tuple(short_word_chars)
        self.long_word_chars = tuple(long_word_chars)
        self.stop_words = frozenset(stop_words)

    def extract(self, document: Document) -> dict[str, int | float]:
        words = split_words(document.text)
        count = len(words)
        lengths = [len(word) for word in words]
        return {
            "n_words": count,
            "avg_word_length": ratio(sum(lengths), count),
            "avg_words_per_line": ratio(count, len(document.text.splitlines())),
            **{
                f"short_word_ratio_{k}": ratio(sum(length <= k for length in lengths), count)
                for k in self.short_word_chars
            },
            **{
                f"long_word_ratio_{k}": ratio(sum(length >= k for length in lengths), count)
                for k in self.long_word_chars
            },
            "type_token_ratio": ratio(len(set(words)), count),
            "uppercase_word_ratio": ratio(sum(word.isupper() for word in words), count),
            "capitalized_word_ratio": ratio(sum(word.istitle() for word in words), count),
            "stop_word_ratio": ratio(sum(word in self.stop_words for word in words), count),
        }
