"""Exact-content and URL dedup: documents grouped by a key, the first of each group kept.

Both shuffle whole documents once (a ``GroupByKey`` on a hash of the key), so
they scale with the runner's shuffle and need no side input.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import apache_beam as beam

from beamtrove.document import Document
from beamtrove.layout import CLUSTERS, EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.text import normalize_text
from beamtrove.transforms.dedup.keep import ClusterMember, DedupStep, KeepOrder
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm

if TYPE_CHECKING:
    from beamtrove.transforms.dedup.index import DedupIndexes

__all__ = ["ExactDedup", "UrlDedup", "key_digest", "normalize_url"]

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def normalize_url(url: str) -> str:
    """``url`` with the differences that do not change the page folded away.

    Lowercases scheme and host, drops default ports, the fragment, a
    ``www.`` prefix and a trailing slash, and sorts the query parameters.
    Text that does not parse as a URL is only stripped.
    """
    url = url.strip()
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").removeprefix("www.")
    if port is not None and str(port) != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    query = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(parts.query, keep_blank_values=True)))
    return urllib.parse.urlunsplit((scheme, host, parts.path.rstrip("/"), query, ""))


def key_digest(key: str) -> bytes:
    """The 16-byte digest a dedup step groups on, and a dedup index stores, for a document's key."""
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _KeyDocumentsFn(beam.DoFn):
    def __init__(self, key_of: Callable[[Document], str | None], metrics: StepMetrics):
        self._key_of = key_of
        self._metrics = metrics

    def process(self, document: Document):
        self._metrics.received()
        self._metrics.chars("in", document.text)
        key = self._key_of(document)
        if key is None:
            self._metrics.inc("no_key")
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            yield document
            return
        yield beam.pvalue.TaggedOutput("keyed", (key_digest(key), document))


class _KeepFirstFn(beam.DoFn):
    def __init__(self, order: KeepOrder, reason: str, index_reasons: Sequence[str], metrics: StepMetrics):
        self._order = order
        self._reason = reason
        self._index_reasons = index_reasons
        self._metrics = metrics

    def process(self, grouped):
        # Two passes over the group rather than a sorted copy: a group can be huge (every empty page).
        # Its values are documents and, against indexes, the (position, id) of the indexes holding the key.
        _, values = grouped
        size = 0
        first_node = None
        first_match = None
        for value in values:
            if not isinstance(value, Document):
                first_match = value if first_match is None else min(first_match, tuple(value))
                continue
            size += 1
            node = self._order.node(value)
            if first_node is None or node < first_node:
                first_node = node
        if first_node is None:
            return
        self._metrics.observe("group_size", size)
        if first_match is not None:
            position, first_id = first_match
            reason, first_seen, size = self._index_reasons[position], True, size + 1
        else:
            reason, first_id, first_seen = self._reason, KeepOrder.document_id(first_node), False
        for document in values:
            if not isinstance(document, Document):
                continue
            if not first_seen and self._order.node(document) == first_node:
                first_seen = True
                self._metrics.emitted()
                self._metrics.chars("out", document.text)
                yield document
                continue
            self._metrics.dropped(reason)
            yield beam.pvalue.TaggedOutput(CLUSTERS, ClusterMember(document.id, first_id, size))
            yield excluded_output(document, reason, duplicate_of=first_id)


class _KeepFirstPerKey(DedupStep):
    def __init__(
        self,
        key_of: Callable[[Document], str | None],
        keep_by: str | None,
        reason: str,
        step: str,
        kind: str,
        against: DedupIndexes | None,
    ):
        super().__init__(step)
        self._key_of = key_of
        self._order = KeepOrder(keep_by)
        self._reason = reason
        self._kind = kind
        self._against = against

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step as stages: key each document, then keep the first of each key's group."""
        against = self._against is not None
        index = (Stage("ReadIndex", {}, self._read_index, {"indexed": KEYED}, whole=True),) if against else ()
        keyed = ("keyed", "indexed") if against else ("keyed",)
        return StagedForm(
            (
                Stage("Key", {"documents": ("documents",)}, self._key, {"keyed": KEYED, "unkeyed": SAME}),
                *index,
                Stage("KeepFirst", {"keyed": keyed}, self._keep_first, {"first": SAME, EXCLUDED: SAME, CLUSTERS: SAME}),
            ),
            input="documents",
            kept=("first", "unkeyed"),
            excluded=(EXCLUDED,),
            clusters=(CLUSTERS,),
        )

    def _key(self, pipeline, inputs, sides):
        fn = _KeyDocumentsFn(self._key_of, self._metrics)
        outputs = inputs["documents"] | "Key" >> beam.ParDo(fn).with_outputs("keyed", main="unkeyed")
        return {"keyed": outputs.keyed, "unkeyed": outputs.unkeyed}

    def _read_index(self, pipeline, inputs, sides):
        return {"indexed": pipeline | "ReadIndex" >> self._against.read(self._kind)}

    def _keep_first(self, pipeline, inputs, sides):
        index_reasons = []
        if self._against is not None:
            index_reasons = [self._against.reason(self._reason, n) for n in range(len(self._against.names))]
        fn = _KeepFirstFn(self._order, self._reason, index_reasons, self._metrics)
        first = (
            inputs["keyed"]
            | "GroupByKey" >> beam.GroupByKey()
            | "KeepFirst" >> beam.ParDo(fn).with_outputs(EXCLUDED, CLUSTERS, main="kept")
        )
        return {"first": first.kept, EXCLUDED: first[EXCLUDED], CLUSTERS: first[CLUSTERS]}


class ExactDedup(_KeepFirstPerKey):
    """Keeps one document per distinct text; the others go to ``excluded`` with reason ``exact_duplicate``.

    Returns :class:`DedupOutputs`. Removed documents get ``duplicate_of``.
    Counters: ``beamtrove/<step>``: ``in``, ``out``, ``dropped.exact_duplicate``, and the ``group_size``
    distribution (documents per key).

    Args:
        normalized: Compare texts after :func:`normalize_text` (case,
            punctuation, spacing, accents and digits ignored) rather than as they are.
        keep_by: See :class:`KeepOrder`.
        step: Stats name.
        against: Dedup indexes (of raw texts) whose documents come before every
            input document: a text they hold is removed with reason
            ``exact_duplicate_in_<index name>``.
    """

    def __init__(
        self,
        normalized: bool = False,
        keep_by: str | None = None,
        step: str = "exact",
        against: DedupIndexes | None = None,
    ):
        if normalized and against is not None:
            raise ValueError("Dedup indexes hold digests of raw texts: normalized exact dedup cannot use them.")
        key_of = _normalized_text if normalized else _text
        super().__init__(key_of, keep_by, "exact_duplicate", step, "exact", against)


class UrlDedup(_KeepFirstPerKey):
    """Keeps one document per :func:`normalize_url` of its ``url`` metadata; reason ``url_duplicate``.

    Documents without a URL are kept (counter ``no_key``). Returns :class:`DedupOutputs`.

    Args:
        keep_by: See :class:`KeepOrder` (for example ``"-date"`` keeps the latest crawl of a URL).
        step: Stats name.
        against: Dedup indexes whose documents come before every input
            document: a URL they hold is removed with reason
            ``url_duplicate_in_<index name>``.
    """

    def __init__(self, keep_by: str | None = None, step: str = "url", against: DedupIndexes | None = None):
        super().__init__(_normalized_url, keep_by, "url_duplicate", step, "url", against)


def _text(document: Document) -> str:
    return document.text


def _normalized_text(document: Document) -> str:
    return normalize_text(document.text)


def _normalized_url(document: Document) -> str | None:
    url = document.metadata.get("url")
    return normalize_url(url) if isinstance(url, str) and url.strip() else None
