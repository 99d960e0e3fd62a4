"""General-purpose filters: sampling, regular expressions, length and any predicate."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from beamtrove.document import Document
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict

__all__ = ["LambdaFilter", "LengthFilter", "RegexFilter", "SamplerFilter"]


class SamplerFilter(DocumentFilter):
    """Keeps a random ``rate`` of the documents.

    The draw is a hash of the document id and ``seed``, not a random stream, so
    the same documents are kept on every runner, worker count and rerun.
    Drop reason: ``sampled_out``.
    """

    name = "sampler"

    def __init__(self, rate: float, seed: int = 0):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, not {rate!r}.")
        self.rate = rate
        self.seed = seed

    def filter(self, document: Document) -> Verdict:
        digest = hashlib.blake2b(f"{self.seed}:{document.id}".encode(), digest_size=8).digest()
        return document if int.from_bytes(digest, "big") / 2**64 < self.rate else Drop("sampled_out")


class RegexFilter(DocumentFilter):
    """Drops documents whose text matches ``pattern`` anywhere (reason ``regex``)."""

    name = "regex_filter"

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = re.compile(pattern, flags)

    def filter(self, document: Document) -> Verdict:
        return Drop("regex") if self.pattern.search(document.text) else document


class LengthFilter(DocumentFilter):
    """Drops documents shorter than ``min_chars`` (``too_short``) or longer than ``max_chars`` (``too_long``)."""

    name = "length_filter"

    def __init__(self, min_chars: int | None = None, max_chars: int | None = None):
        if min_chars is None and max_chars is None:
            raise ValueError("LengthFilter needs min_chars, max_chars or both.")
        self.min_chars = min_chars
        self.max_chars = max_chars

    def filter(self, document: Document) -> Verdict:
        if self.min_chars is not None and len(document.text) < self.min_chars:
            return Drop("too_short")
        if self.max_chars is not None and len(document.text) > self.max_chars:
            return Drop("too_long")
        return document


class LambdaFilter(DocumentFilter):
    """Keeps documents for which ``predicate(document)`` is true; drops the others as ``reason``."""

    name = "lambda_filter"

    def __init__(self, predicate: Callable[[Document], bool], reason: str = "lambda"):
        self.predicate = predicate
        self.reason = reason

    def filter(self, document: Document) -> Verdict:
        return document if self.predicate(document) else Drop(self.reason)
