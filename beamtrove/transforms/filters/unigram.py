"""The average unigram log probability of a document's words, as DataTrove's ``UnigramLogProbFilter``.

DataTrove downloads Google's Web 1T unigram counts (the 333,333 most frequent
English words, ``word,count`` CSV) when the filter is made. beamtrove
downloads nothing at run time: it reads such a table from a path the user
gives, or, by default, derives one from the English frequencies of the
``wordfreq`` package (PyPI; code Apache-2.0, data CC BY-SA 4.0). wordfreq
blends Wikipedia, subtitles, news, books, web text and Twitter up to 2021,
lists 321,180 tokens (with contractions such as ``n't``, emoji, and digits
written as ``0``) and rounds frequencies to 1% steps; Google's table counts
lower-case words of web pages from 2006. The same text thus scores
differently under the two tables; the filter's rule is the same.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from collections.abc import Mapping

import numpy as np

from beamtrove.configuration import Range
from beamtrove.document import Document
from beamtrove.fs import filesystem, is_local, open_url
from beamtrove.languages import language_key
from beamtrove.text import check_word_splitter, word_splitter
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once

__all__ = ["LOGPROB_THRESHOLDS", "UnigramLogProbFilter", "read_unigram_table", "wordfreq_unigram_counts"]

# The probability of a word the table lacks, as in DataTrove.
_UNKNOWN_PROBABILITY = 1e-9
# wordfreq's smallest English frequency is about 1e-8: scaled by this, every count keeps five significant digits.
_WORDFREQ_SCALE = 1e12

#: The thresholds that keep some documents: a score is an average of log probabilities, so at most 0.
LOGPROB_THRESHOLDS = Range(maximum=0, exclusive_maximum=True)


def wordfreq_unigram_counts() -> dict[str, int]:
    """wordfreq's English frequencies (its ``large`` list) as counts, ``{word: count}``.

    A frequency times 10¹² rounded: the table a ``word,count`` CSV holds for
    DataTrove to read, with the same probabilities.

    Raises:
        ValueError: wordfreq is not installed.
    """
    if importlib.util.find_spec("wordfreq") is None:
        raise ValueError(
            "The default unigram table comes from wordfreq: pip install 'beamtrove[unigram]', "
            "or give a word,count CSV table (e.g. Google's 1T unigram_freq.csv)."
        )
    import wordfreq  # noqa: PLC0415 - an optional dependency

    frequencies = wordfreq.get_frequency_dict("en", wordlist="large")
    return {word: round(frequency * _WORDFREQ_SCALE) for word, frequency in frequencies.items()}


def read_unigram_table(path: str) -> dict[str, int]:
    """The ``{word: count}`` of a ``word,count`` CSV table with a header row (the format DataTrove downloads).

    Raises:
        FileNotFoundError: There is no table at ``path``.
        ValueError: The table lacks a ``word`` or ``count`` column, holds no
            row, or a count is not a positive integer (zero, negative or NaN
            counts would make the probabilities meaningless); the message
            names the file and the line.
    """
    fs, local = filesystem(path)
    if not fs.exists(local):
        raise FileNotFoundError(f"No unigram table at {path}: give a word,count CSV file (path or fsspec URL).")
    with open_url(path, "rb", compression="infer") as raw:
        rows = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        if not {"word", "count"}.issubset(rows.fieldnames or ()):
            raise ValueError(f"{path} is not a unigram table: its header must name word and count columns.")
        counts = {}
        for row in rows:
            try:
                count = int(row["count"])
            except (TypeError, ValueError):
                count = 0
            if count < 1:
                raise ValueError(f"{path}, line {rows.line_num}: the count {row['count']!r} is not a positive integer.")
            counts[row["word"]] = count
    if not counts:
        raise ValueError(f"{path} is not a unigram table: it holds no word,count rows after its header.")
    return counts


def _log_probabilities(counts: Mapping[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    logs = np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)) / total)
    return dict(zip(counts, logs.tolist(), strict=True))


class UnigramLogProbFilter(DocumentFilter):
    """Keeps documents whose words are, on average, likely English words.

    A document's score is the mean over its words (punctuation tokens
    included, looked up lower-cased) of the natural log of the word's
    probability in the unigram table, a word the table lacks counting as
    10⁻⁹; a document without words scores 0. Documents scoring at most
    ``logprobs_threshold`` are dropped as ``unigram_logprob``. The idea is
    peS2o's; the rule is DataTrove's.

    With Google's table (``table``) and ``word_splitter="spacy"`` decisions
    equal DataTrove's. The default table is wordfreq's (see the module), and
    the default splitter is beamtrove's, the one of the other quality filters.

    Args:
        logprobs_threshold: The average log probability a document must
            exceed, below 0 (:data:`LOGPROB_THRESHOLDS`).
        table: A ``word,count`` CSV table (path or fsspec URL; ``.gz`` and
            other compressions by name); ``None`` for wordfreq's English
            frequencies (``pip install 'beamtrove[unigram]'``).
        word_splitter: ``beamtrove`` or ``spacy`` (spaCy's English tokenizer,
            as DataTrove; ``pip install 'beamtrove[spacy]'``), or ``language``
            or a language key (see :data:`beamtrove.text.WORD_SPLITTERS`).
        word_tokenizers: The word tokenizer table ``language`` reads; the
            fetched one when None.

    Raises:
        FileNotFoundError: There is no table at ``table``.
        ValueError: A threshold out of range, an unreadable table, no
            wordfreq for the default table, an unknown splitter, or one whose
            package is not installed.
    """

    name = "unigram_logprob"

    def __init__(
        self,
        logprobs_threshold: float = -10.0,
        table: str | None = None,
        word_splitter: str = "beamtrove",
        word_tokenizers: str | None = None,
    ):
        check_word_splitter(word_splitter, word_tokenizers=word_tokenizers)
        self.logprobs_threshold = LOGPROB_THRESHOLDS.check(logprobs_threshold, "logprobs_threshold")
        self.table = table
        self.word_splitter = word_splitter
        self.word_tokenizers = word_tokenizers
        # Reads the table now: a missing or malformed one fails before the run starts.
        self._shared_log_probabilities()

    def setup(self) -> None:
        self._log_probabilities = self._shared_log_probabilities()
        self._unknown = float(np.log(_UNKNOWN_PROBABILITY))

    def preload(self) -> None:
        if self.table is None or is_local(self.table):
            self._shared_log_probabilities()

    def _shared_log_probabilities(self) -> dict[str, float]:
        def load() -> dict[str, float]:
            counts = wordfreq_unigram_counts() if self.table is None else read_unigram_table(self.table)
            return _log_probabilities(counts)

        return load_once((UnigramLogProbFilter, self.table), load)

    def score(self, text: str, language: str | None = None) -> float:
        """The average log probability of the words of ``text`` (0 when it has none), split as in ``language``."""
        words = word_splitter(self.word_splitter, language, word_tokenizers=self.word_tokenizers)(text)
        if not words:
            return 0.0
        return sum(self._log_probabilities.get(word.lower(), self._unknown) for word in words) / len(words)

    def filter(self, document: Document) -> Verdict:
        if self.score(document.text, language_key(document.metadata)) > self.logprobs_threshold:
            return document
        return Drop(self.name)
