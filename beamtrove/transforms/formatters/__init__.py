"""Formatters: rules that rewrite documents without dropping any (apply them with ``Filter``)."""

from beamtrove.transforms.formatters.pii import PIIFormatter

__all__ = ["PIIFormatter"]
