"""Filters: per-document keep-or-drop rules with reasons, applied with ``Filter``."""

from beamtrove.transforms.filters.base import (
    FILTER_REASON_KEY,
    DocumentFilter,
    DocumentFormatter,
    Drop,
    Filter,
    Verdict,
    excluded_output,
    load_once,
)
from beamtrove.transforms.filters.basic import LambdaFilter, LengthFilter, RegexFilter, SamplerFilter
from beamtrove.transforms.filters.c4 import C4BadWordsFilter, C4ParagraphFilter, C4QualityFilter
from beamtrove.transforms.filters.classifier import FastTextClassifierFilter
from beamtrove.transforms.filters.fineweb import FineWebQualityFilter
from beamtrove.transforms.filters.gopher import GopherQualityFilter, GopherRepetitionFilter
from beamtrove.transforms.filters.language import LanguageFilter
from beamtrove.transforms.filters.language_screen import DEFAULT_SCREEN_THRESHOLD, LanguageScreen
from beamtrove.transforms.filters.unigram import UnigramLogProbFilter
from beamtrove.transforms.filters.url import URLFilter

__all__ = [
    "DEFAULT_SCREEN_THRESHOLD",
    "FILTER_REASON_KEY",
    "C4BadWordsFilter",
    "C4ParagraphFilter",
    "C4QualityFilter",
    "DocumentFilter",
    "DocumentFormatter",
    "Drop",
    "FastTextClassifierFilter",
    "Filter",
    "FineWebQualityFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "LambdaFilter",
    "LanguageFilter",
    "LanguageScreen",
    "LengthFilter",
    "RegexFilter",
    "SamplerFilter",
    "URLFilter",
    "UnigramLogProbFilter",
    "Verdict",
    "excluded_output",
    "load_once",
]
