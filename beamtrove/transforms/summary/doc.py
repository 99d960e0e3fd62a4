"""Character-level statistics of a document, as DataTrove's ``DocStats`` computes them."""

from __future__ import annotations

import re

from beamtrove.document import Document
from beamtrove.transforms.summary.base import StatsBlock, ratio

__all__ = ["PUNCTUATION", "DocStats"]

#: The characters DataTrove's ``punctuation_ratio`` counts: ASCII and CJK punctuation, and the control
#: characters other than tab and line feed.
PUNCTUATION = frozenset(
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~«´»…–—”“„’►━∶、。〈〉《》「」【】！％（），．１：；？～"  # noqa: RUF001
    + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)]))
)
_ELLIPSES = re.compile(r"\.\.\.|…")


class DocStats(StatsBlock):
    """``length`` (characters) and the ratios of whitespace, non-alphanumeric, digit, uppercase, ellipsis
    (``elipsis_ratio``, DataTrove's spelling) and punctuation characters to it.
    """

    name = "doc"

    def extract(self, document: Document) -> dict[str, int | float]:
        text = document.text
        length = len(text)
        return {
            "length": length,
            "white_space_ratio": ratio(sum(char.isspace() for char in text), length),
            "non_alpha_digit_ratio": ratio(sum(not char.isalpha() and not char.isdigit() for char in text), length),
            "digit_ratio": ratio(sum(char.isdigit() for char in text), length),
            "uppercase_ratio": ratio(sum(char.isupper() for char in text), length),
            "elipsis_ratio": ratio(sum(len(match) for match in _ELLIPSES.findall(text)), length),
            "punctuation_ratio": ratio(sum(char in PUNCTUATION for char in text), length),
        }
