"""DataTrove's summary statistics of documents, as Beam combiners.

A block (:class:`DocStats`, :class:`WordStats`, :class:`LineStats`,
:class:`ParagraphStats`, :class:`SentenceStats`, :class:`TokenStats`,
:class:`LangStats`) computes statistics of each document under DataTrove's
names; :class:`SummaryStats` combines them per group and writes DataTrove's
merged files, ``<output>/<group>/<statistic>/metric.json``;
:func:`merge_summary_stats` adds up the files of several runs or dumps.
:class:`CountTokens` sets each document's ``token_count``, as DataTrove's
``TokensCounter``.
"""

from beamtrove.transforms.summary.base import StatsBlock
from beamtrove.transforms.summary.doc import DocStats
from beamtrove.transforms.summary.language import LangStats
from beamtrove.transforms.summary.lines import LineStats
from beamtrove.transforms.summary.merge import merge_summary_stats
from beamtrove.transforms.summary.metric import MetricStats, MetricStatsCombineFn
from beamtrove.transforms.summary.paragraphs import ParagraphStats
from beamtrove.transforms.summary.sentences import SentenceStats, split_sentences
from beamtrove.transforms.summary.tokens import TOKEN_COUNT_KEY, CountTokens, TokenStats
from beamtrove.transforms.summary.transform import (
    DEFAULT_GROUPS,
    DEFAULT_TOP_K,
    GROUPS,
    METRIC_FILE,
    SummaryStats,
)
from beamtrove.transforms.summary.words import WordStats

__all__ = [
    "DEFAULT_GROUPS",
    "DEFAULT_TOP_K",
    "GROUPS",
    "METRIC_FILE",
    "TOKEN_COUNT_KEY",
    "CountTokens",
    "DocStats",
    "LangStats",
    "LineStats",
    "MetricStats",
    "MetricStatsCombineFn",
    "ParagraphStats",
    "SentenceStats",
    "StatsBlock",
    "SummaryStats",
    "TokenStats",
    "WordStats",
    "merge_summary_stats",
    "split_sentences",
]
