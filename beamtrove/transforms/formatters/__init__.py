"""Formatters: rules that rewrite documents without dropping any (apply them with ``Filter``)."""

from beamtrove.transforms.formatters.ftfy import FTFYFormatter
from beamtrove.transforms.formatters.pii import PIIFormatter
from beamtrove.transforms.formatters.symbol_lines import SymbolLinesFormatter

__all__ = ["FTFYFormatter", "PIIFormatter", "SymbolLinesFormatter"]
