"""Word-level statistics of a document, as DataTrove's ``WordStats`` computes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.text import check_word_splitter, word_splitter
from beamtrove.transforms.filters.gopher import GOPHER_STOP_WORDS
from beamtrove.transforms.summary.base import StatsBlock, length_ratios, ratio

__all__ = ["WordStats"]


class WordStats(StatsBlock):
    """``n_words``, ``avg_word_length``, ``avg_words_per_line``, ``short_word_ratio_<k>`` (words of at most
    k characters), ``long_word_ratio_<k>`` (at least k), ``type_token_ratio``, ``uppercase_word_ratio``,
    ``capitalized_word_ratio`` and ``stop_word_ratio``.

    Words are punctuation tokens included, as in DataTrove. By default they
    are those of :func:`beamtrove.text.split_words`, the splitter of
    beamtrove's filters: spaCy's English rules, except that text in a script
    written without spaces counts a word per character where spaCy keeps the
    run whole, and spelled-out contractions (``im``, ``dont``) stay one word.
    ``word_splitter="spacy"`` splits with spaCy's English tokenizer itself, as
    DataTrove does, for statistics equal to DataTrove's (spaCy must be
    installed: ``pip install 'beamtrove[spacy]'``); ``word_splitter="language"``
    with each document's language's tokenizer, as DataTrove's ``WordStats``
    given a language.

    Args:
        short_word_chars: The ``k`` of each ``short_word_ratio_<k>``.
        long_word_chars: The ``k`` of each ``long_word_ratio_<k>``.
        stop_words: The words ``stop_word_ratio`` counts.
        word_splitter: One of :data:`beamtrove.text.WORD_SPLITTERS`, or a language key.
        word_tokenizers: The word tokenizer table ``language`` reads; the fetched one when None.

    Raises:
        ValueError: An unknown splitter, or one whose package is not installed.
    """

    name = "word"

    def __init__(
        self,
        short_word_chars: Sequence[int] = (3,),
        long_word_chars: Sequence[int] = (7,),
        stop_words: Iterable[str] = GOPHER_STOP_WORDS,
        word_splitter: str = "beamtrove",
        word_tokenizers: str | None = None,
    ):
        check_word_splitter(word_splitter, word_tokenizers=word_tokenizers)
        self.short_word_chars = tuple(short_word_chars)
        self.long_word_chars = tuple(long_word_chars)
        self.stop_words = frozenset(stop_words)
        self.word_splitter = word_splitter
        self.word_tokenizers = word_tokenizers

    def extract(self, document: Document) -> dict[str, int | float]:
        split = word_splitter(self.word_splitter, language_key(document.metadata), word_tokenizers=self.word_tokenizers)
        words = split(document.text)
        count = len(words)
        lengths = [len(word) for word in words]
        return {
            "n_words": count,
            "avg_word_length": ratio(sum(lengths), count),
            "avg_words_per_line": ratio(count, len(document.text.splitlines())),
            **length_ratios(
                lengths, "short_word_ratio_", self.short_word_chars, "long_word_ratio_", self.long_word_chars
            ),
            "type_token_ratio": ratio(len(set(words)), count),
            "uppercase_word_ratio": ratio(sum(word.isupper() for word in words), count),
            "capitalized_word_ratio": ratio(sum(word.istitle() for word in words), count),
            "stop_word_ratio": ratio(sum(word in self.stop_words for word in words), count),
        }
