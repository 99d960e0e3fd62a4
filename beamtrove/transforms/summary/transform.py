"""Summary statistics of documents, combined across workers and written in DataTrove's layout."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence

import apache_beam as beam
import tldextract

from beamtrove.document import Document
from beamtrove.fs import join, write_json
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.summary.base import StatsBlock
from beamtrove.transforms.summary.metric import MetricStats, MetricStatsCombineFn, metric_dict_to_json
from beamtrove.transforms.summary.tokens import TOKEN_COUNT_KEY

__all__ = ["DEFAULT_GROUPS", "DEFAULT_TOP_K", "GROUPS", "METRIC_FILE", "TOP_K_GROUPS", "SummaryStats", "top_k"]

#: The ways DataTrove groups documents: all together, by rounded value, by host name, by public suffix.
GROUPS = ("summary", "histogram", "fqdn", "suffix")
DEFAULT_GROUPS = ("summary", "histogram")
#: The groups cut to their ``top_k`` keys with the most documents.
TOP_K_GROUPS = ("fqdn", "suffix")
#: DataTrove's default ``TopKConfig.top_k``.
DEFAULT_TOP_K = 100_000
#: The merged file of one statistic of one group (DataTrove's ``STATS_MERGED_NAME``).
METRIC_FILE = "metric.json"


def top_k(stats: Mapping[str, MetricStats], k: int) -> dict[str, MetricStats]:
    """The ``k`` keys of ``stats`` with the most documents; among equal counts, the first keys by name."""
    kept = heapq.nsmallest(k, stats, key=lambda key: (-stats[key].n, key))
    return {key: stats[key] for key in kept}


class _ExtractStatsFn(beam.DoFn):
    """Emits ``((group, statistic), (key, value))`` for every statistic of a document in every group."""

    def __init__(self, blocks: Sequence[StatsBlock], groups: Sequence[str], histogram_round_digits: int, step: str):
        self._blocks = tuple(blocks)
        self._groups = tuple(groups)
        self._digits = histogram_round_digits
        self._metrics = StepMetrics(step)

    def setup(self):
        for block in self._blocks:
            block.setup()
        # The bundled public suffix list: a worker fetches nothing, and every worker splits hosts alike.
        self._domains = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    def process(self, document: Document) -> Iterator[tuple[tuple[str, str], tuple[str, int | float]]]:
        self._metrics.received()
        stats: dict[str, int | float] = {}
        for block in self._blocks:
            stats.update(block.extract(document))
        tokens = document.metadata.get(TOKEN_COUNT_KEY, stats.get(TOKEN_COUNT_KEY))
        for group in self._groups:
            if group == "histogram":
                yield from self._histogram(stats, len(document.text), tokens)
                continue
            key = self._key(group, document)
            if key is None:
                self._metrics.inc(f"no_url.{group}")
                continue
            for stat, value in stats.items():
                yield (group, stat), (key, value)
        self._metrics.emitted()

    def _histogram(self, stats: Mapping[str, int | float], chars: int, tokens: int | None):
        # Each bucket counts its documents under the statistic's name, their characters under
        # <stat>__chars and, for documents with a token count, their tokens under <stat>__tokens.
        for stat, value in stats.items():
            bucket = str(round(value, self._digits))
            yield ("histogram", stat), (bucket, 1)
            yield ("histogram", f"{stat}__chars"), (bucket, chars)
            if tokens is not None:
                yield ("histogram", f"{stat}__tokens"), (bucket, tokens)

    def _key(self, group: str, document: Document) -> str | None:
        if group == "summary":
            return "summary"
        url = document.metadata.get("url")
        if not url:
            return None
        parts = self._domains.extract_str(url)
        return parts.fqdn if group == "fqdn" else parts.suffix


class _WriteStatsFn(beam.DoFn):
    def __init__(self, output_dir: str, top_k: int):
        self._output_dir = output_dir
        self._top_k = top_k

    def process(self, element: tuple[tuple[str, str], dict[str, MetricStats]]) -> Iterator[str]:
        (group, stat), stats = element
        if group in TOP_K_GROUPS:
            stats = top_k(stats, self._top_k)
        path = join(self._output_dir, group, stat, METRIC_FILE)
        write_json(metric_dict_to_json(stats), path)
        yield path


class SummaryStats(beam.PTransform):
    """Computes DataTrove's summary statistics of documents and writes them as DataTrove's merged files.

    Every block's statistics of every document are combined, per group,
    into ``<output_dir>/<group>/<statistic>/metric.json``: what DataTrove's
    stats blocks followed by its ``StatsMerger`` write, read by DataTrove's
    tools and :func:`~beamtrove.transforms.summary.merge_summary_stats`. Each
    file maps a key to the figures of the values under it (``total``, ``n``,
    ``mean``, ``variance``, ``std_dev``, ``min``, ``max``, ``unit``, with
    DataTrove's omissions; see :meth:`MetricStats.to_json`). The keys are, per
    group:

    * ``summary``: ``"summary"``, over every document;
    * ``histogram``: the value rounded to ``histogram_round_digits``, as a
      string; the figures under it count documents (``total`` is their number),
      ``<statistic>__chars`` their characters and ``<statistic>__tokens`` their
      tokens (documents with a ``token_count``);
    * ``fqdn`` and ``suffix``: the host name and the public suffix of the
      document's ``url`` metadata (tldextract's bundled list); documents
      without a URL are left out (counter ``no_url.<group>``). Only the
      ``top_k`` keys with the most documents are written. DataTrove cuts each
      task's file and then the merged file to its top k, which can miss a key
      spread thinly over many tasks; here the cut is made once, over all
      documents, and among keys with as many documents the first by name
      stay.

    The figures are exact sums, so a file's bytes do not depend on the runner
    or on how the work was split. Counters of ``step``: ``in`` and ``out``
    (documents). Returns the paths written, so a later step can wait for them.

    Args:
        output_dir: Where the groups' folders go (a path or fsspec URL).
        blocks: The blocks whose statistics are computed.
        groups: Among :data:`GROUPS`.
        histogram_round_digits: Decimal digits histogram values are rounded to.
        top_k: Keys kept in the ``fqdn`` and ``suffix`` groups.
        step: Stats name of the step.

    Raises:
        ValueError: No block, an unknown or repeated group, ``histogram_round_digits`` < 0, or ``top_k`` < 1.
    """

    def __init__(
        self,
        output_dir: str,
        blocks: Iterable[StatsBlock],
        groups: Iterable[str] = DEFAULT_GROUPS,
        histogram_round_digits: int = 3,
        top_k: int = DEFAULT_TOP_K,
        step: str = "summary_stats",
    ):
        super().__init__()
        self._blocks = tuple(blocks)
        self._groups = tuple(groups)
        if not self._blocks:
            raise ValueError("SummaryStats needs at least one statistics block.")
        unknown = [group for group in self._groups if group not in GROUPS]
        if unknown or not self._groups or len(set(self._groups)) != len(self._groups):
            raise ValueError(f"Summary groups are one or more of {', '.join(GROUPS)}, each once (got {self._groups}).")
        if histogram_round_digits < 0:
            raise ValueError(f"histogram_round_digits must be 0 or more (got {histogram_round_digits}).")
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1 (got {top_k}).")
        self._extract = _ExtractStatsFn(self._blocks, self._groups, histogram_round_digits, step)
        self._write = _WriteStatsFn(output_dir, top_k)

    def expand(self, documents):
        return (
            documents
            | "ExtractStats" >> beam.ParDo(self._extract)
            | "CombineStats" >> beam.CombinePerKey(MetricStatsCombineFn())
            | "WriteStats" >> beam.ParDo(self._write)
        )
