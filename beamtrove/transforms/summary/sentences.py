"""Sentence-level statistics of a document, as DataTrove's ``SentenceStats`` computes them."""

from __future__ import annotations

from collections.abc import Sequence

from beamtrove.document import Document
from beamtrove.text import TERMINAL_PUNCTUATION, is_punctuation, split_words
from beamtrove.transforms.summary.base import StatsBlock, length_ratios, ratio

__all__ = ["SentenceStats", "split_sentences"]

_TERMINALS = frozenset(TERMINAL_PUNCTUATION)


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, blank ones left out.

    The rule :func:`beamtrove.text.count_sentences` counts by (spaCy's
    sentencizer, which DataTrove splits with): a sentence ends at a token made
    of one terminal punctuation mark once a token that is not punctuation
    follows it. A sentence runs from its first token to its last.
    """
    sentences = []
    start = end = position = 0
    ended = False
    for token in split_words(text):
        begin = text.index(token, position)
        position = begin + len(token)
        if ended and not is_punctuation(token):
            sentences.append(text[start:end])
            start, ended = begin, False
        if len(token) == 1 and token in _TERMINALS:
            ended = True
        end = position
    sentences.append(text[start:end])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


class SentenceStats(StatsBlock):
    """``n_sentences``, ``avg_sentence_length``, ``short_sentence_ratio_<k>`` (sentences of at most k
    characters) and ``long_sentence_ratio_<k>`` (at least k).

    Args:
        short_sentence_chars: The ``k`` of each ``short_sentence_ratio_<k>``.
        long_sentence_chars: The ``k`` of each ``long_sentence_ratio_<k>``.
    """

    name = "sentence"

    def __init__(self, short_sentence_chars: Sequence[int] = (20,), long_sentence_chars: Sequence[int] = (75,)):
        self.short_sentence_chars = tuple(short_sentence_chars)
        self.long_sentence_chars = tuple(long_sentence_chars)

    def extract(self, document: Document) -> dict[str, int | float]:
        lengths = [len(sentence) for sentence in split_sentences(document.text)]
        count = len(lengths)
        return {
            "n_sentences": count,
            "avg_sentence_length": ratio(sum(lengths), count),
            **length_ratios(
                lengths,
                "short_sentence_ratio_",
                self.short_sentence_chars,
                "long_sentence_ratio_",
                self.long_sentence_chars,
            ),
        }
