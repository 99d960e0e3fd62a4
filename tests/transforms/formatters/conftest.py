"""The filter tests' real corpora, for the formatter tests too."""

from tests.transforms.filters.conftest import ground_truth

__all__ = ["ground_truth"]
