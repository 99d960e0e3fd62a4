"""Near-duplicate removal with MinHash LSH, as Beam shuffles.

1. Each document gets a MinHash signature of its word n-gram shingles
   (``num_buckets`` times ``hashes_per_bucket`` 64-bit values).
2. Documents with identical signatures are grouped first: the first of them
   stands for the group in the band shuffle and the others link to it, so
   ``c`` copies make ``c - 1`` links instead of ``num_buckets`` times as many.
3. Every band of a representative's signature becomes a key ``(bucket,
   digest of the band)``; a ``GroupByKey`` brings together documents that
   agree on a whole band, and each group links its members to its first
   member (no pair explosion in large groups).
4. :class:`~beamtrove.transforms.dedup.components.ConnectedComponents` turns
   the links into clusters, with no stage holding all of them.
   With a ``threshold``, a link is only made when the two documents' whole
   signatures agree on at least that fraction of hashes (an estimate of
   their Jaccard similarity): LSH alone also links pairs well below its
   nominal threshold, and chains of such links merge unrelated documents.
5. One document per cluster is kept (the first in :class:`KeepOrder`), the
   others go to the ``excluded`` output with reason ``minhash_duplicate``.
   Documents and clusters meet in a join keyed by document, so no worker
   holds more than its own keys' clusters.

Two documents whose shingle sets have Jaccard similarity ``s`` share at least
one band with probability ``1 - (1 - s**r)**b`` (``r`` hashes per bucket,
``b`` buckets): about 0.92 at 0.8 and 0.99 at 0.85 with the defaults.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import apache_beam as beam

from beamtrove.document import Document
from beamtrove.languages import language_key
from beamtrove.layout import CLUSTERS, EXCLUDED
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.dedup.components import COMPONENTS, ConnectedComponents
from beamtrove.transforms.dedup.keep import INDEX, ClusterMember, DedupOutputs, DedupStep, KeepOrder, input_node
from beamtrove.transforms.dedup.signatures import DIGEST_BYTES, MinHashConfig, MinHasher, sketch_agreement
from beamtrove.transforms.filters.base import excluded_output
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages, flatten

if TYPE_CHECKING:
    from beamtrove.transforms.dedup.index import DedupIndexes

__all__ = [
    "MinHashClusters",
    "MinHashConfig",
    "MinHashDedup",
    "MinHasher",
    "RemoveClustered",
    "sketch_agreement",
]

# A band key: the bucket number (2 bytes) then the band's digest.
_BAND_KEY_BYTES = 2 + DIGEST_BYTES
# The tagged output of the links from each copy of a signature to the first document holding it.
_COPY_LINKS = "copy_links"
# The two sides of the join of documents with their components.
_DOCUMENTS, _COMPONENT = "documents", "component"
# The components of a staged run keyed by node, as the join takes them.
_NODE_COMPONENTS = "node_components"


class _SignatureFn(beam.DoFn):
    """Keys each document by a digest of its whole signature, with its band keys (and sketch) as the value."""

    def __init__(
        self, config: MinHashConfig, order: KeepOrder, against_indexes: bool, per_language: bool, metrics: StepMetrics
    ):
        self._config = config
        self._order = order
        self._against_indexes = against_indexes
        self._per_language = per_language
        self._metrics = metrics

    def setup(self):
        self._hasher = MinHasher(self._config)

    def process(self, document: Document):
        self._metrics.inc("documents")
        language = language_key(document.metadata)
        signature = self._hasher.signature(document.text, language)
        if signature is None:
            self._metrics.inc("too_short")
            return
        node = self._order.node(document)
        if self._against_indexes:
            node = input_node(node)
        # Keyed by the language, a signature and its bands meet only those of documents in the same language.
        within = (language or "").encode("utf-8") if self._per_language else b""
        digest = MinHasher.digest(signature, within)
        bands = b"".join(MinHasher.band_keys(signature, within))
        if self._config.threshold is None:
            yield digest, (node, bands)
        else:
            yield digest, (node, bands, MinHasher.sketch(signature))


class _BandKeysOfFirstFn(beam.DoFn):
    """Sends the first document of each identical-signature group into the band shuffle; links the rest to it.

    Identical signatures have identical bands and sketches, so each copy
    would only have met the first one in every band group: linking it
    directly gives the same clusters with one link instead of one per band.
    """

    def __init__(self, metrics: StepMetrics):
        self._metrics = metrics

    def process(self, grouped):
        _, members = grouped
        members = sorted(members, key=lambda member: member[0])
        first, bands, *sketch = members[0]
        self._metrics.observe("signature_group_size", len(members))
        copies = {member[0] for member in members[1:]} - {first}
        if copies:
            self._metrics.inc("identical_signatures", len(copies))
        for copy in copies:
            yield beam.pvalue.TaggedOutput(_COPY_LINKS, (copy, first))
        value = (first, *sketch) if sketch else first
        for start in range(0, len(bands), _BAND_KEY_BYTES):
            yield bands[start : start + _BAND_KEY_BYTES], value


class _LinkToFirstFn(beam.DoFn):
    """Links the members of a band group to its first member."""

    def __init__(self, metrics: StepMetrics):
        self._metrics = metrics

    def process(self, grouped):
        _, nodes = grouped
        nodes = set(nodes)
        if len(nodes) < 2:
            return
        first = min(nodes)
        nodes.discard(first)
        self._metrics.inc("shared_bands")
        self._metrics.observe("band_group_size", len(nodes) + 1)
        self._metrics.inc("links", len(nodes))
        for node in nodes:
            yield node, first


class _LinkVerifiedFn(beam.DoFn):
    """Links each member of a band group to the first earlier member whose signature agrees enough.

    Members that agree with no earlier one start a new sub-group, so a group
    holding two families of documents yields two stars, not one.
    """

    def __init__(self, threshold: float, metrics: StepMetrics):
        self._threshold = threshold
        self._metrics = metrics

    def process(self, grouped):
        _, members = grouped
        members = sorted(dict(members).items())
        if len(members) < 2:
            return
        self._metrics.inc("shared_bands")
        self._metrics.observe("band_group_size", len(members))
        heads = [members[0]]
        for node, sketch in members[1:]:
            head = next((head for head, kept in heads if sketch_agreement(sketch, kept) >= self._threshold), None)
            if head is None:
                self._metrics.inc("rejected_links")
                heads.append((node, sketch))
            else:
                self._metrics.inc("links")
                yield node, head


class MinHashClusters(beam.PTransform):
    """Documents in; a :class:`~beamtrove.transforms.dedup.components.Component` per clustered document out.

    Documents with no near duplicate (and those shorter than ``n_grams``
    words) appear in no component. Nodes are :meth:`KeepOrder.node` values.
    Counters: ``beamtrove/<step>``: ``documents``, ``too_short``,
    ``identical_signatures`` (documents linked to an earlier one with the
    same signature), ``shared_bands``, ``links`` (and ``rejected_links``
    with a ``threshold``), and the distributions ``signature_group_size``
    and ``band_group_size`` (of band groups with two members or more),
    and the counters of :class:`~beamtrove.transforms.dedup.components.ConnectedComponents`.

    Args:
        config: MinHash parameters.
        keep_by: See :class:`KeepOrder`; decides each cluster's root.
        max_rounds: Connected-components rounds to unroll.
        step: Stats name.
        against: Dedup indexes whose documents join the graph before every
            input document. Nodes are then :func:`input_node` s of the
            documents and :func:`index_node` s of the indexed ones.
        per_language: Link only documents of the same language
            (:func:`~beamtrove.languages.language_key` of their metadata; those
            without one form a group of their own), as FineWeb-2 deduplicated
            each language apart.

    Raises:
        ValueError: An index built with other shingles or hashes than ``config``, or indexes with ``per_language``
            (an index's keys belong to no language).
    """

    def __init__(
        self,
        config: MinHashConfig | None = None,
        keep_by: str | None = None,
        max_rounds: int = 30,
        step: str = "minhash",
        against: DedupIndexes | None = None,
        per_language: bool = False,
    ):
        super().__init__()
        self._config = config or MinHashConfig()
        if against is not None:
            if per_language:
                raise ValueError("MinHash within each language cannot run against dedup indexes, whose keys have none.")
            for manifest in against.manifests:
                manifest.check_minhash(self._config)
        self._against = against
        self._per_language = per_language
        self._order = KeepOrder(keep_by)
        self._components = ConnectedComponents(max_rounds, step=step)
        self._metrics = StepMetrics(step)

    def link_stages(self) -> tuple[Stage, ...]:
        """Stages from the ``documents`` dataset to the near duplicates' links: ``band_links`` and ``copy_links``."""
        against = self._against is not None
        index = (Stage("ReadIndex", {}, self._read_index, {"indexed": KEYED}, whole=True),) if against else ()
        return (
            Stage("Signatures", {"documents": ("documents",)}, self._signatures, {"signatures": KEYED}),
            Stage("BandKeys", {"signatures": ("signatures",)}, self._band_keys, {"bands": KEYED, _COPY_LINKS: SAME}),
            *index,
            Stage("Link", {"bands": ("bands", "indexed") if against else ("bands",)}, self._link, {"band_links": SAME}),
        )

    def components(self, links):
        """The components of ``links`` (node pairs)."""
        return links | "Components" >> self._components

    def component_stages(self, links: Sequence[str]) -> tuple[Stage, ...]:
        """The stages from the datasets ``links`` (node pairs) to their components, in the dataset ``COMPONENTS``."""
        return self._components.stages(links)

    def _signatures(self, pipeline, inputs, sides):
        fn = _SignatureFn(self._config, self._order, self._against is not None, self._per_language, self._metrics)
        return {"signatures": inputs["documents"] | "Signatures" >> beam.ParDo(fn)}

    def _band_keys(self, pipeline, inputs, sides):
        representatives = (
            inputs["signatures"]
            | "GroupBySignature" >> beam.GroupByKey()
            | "BandKeys" >> beam.ParDo(_BandKeysOfFirstFn(self._metrics)).with_outputs(_COPY_LINKS, main="bands")
        )
        return {"bands": representatives.bands, _COPY_LINKS: representatives[_COPY_LINKS]}

    def _read_index(self, pipeline, inputs, sides):
        with_sketches = bool(self._config.threshold)
        return {"indexed": pipeline | "ReadIndex" >> self._against.read("minhash", with_sketches=with_sketches)}

    def _link(self, pipeline, inputs, sides):
        threshold = self._config.threshold
        link = _LinkToFirstFn(self._metrics) if threshold is None else _LinkVerifiedFn(threshold, self._metrics)
        return {"band_links": inputs["bands"] | "GroupByBand" >> beam.GroupByKey() | "Link" >> beam.ParDo(link)}

    def expand(self, documents):
        datasets = apply_stages(StagedForm(self.link_stages(), "documents", kept=()), documents)
        links = flatten(documents.pipeline, [datasets["band_links"], datasets[_COPY_LINKS]], "AllLinks")
        return self.components(links)


class _KeyByNodeFn(beam.DoFn):
    """Keys each document by its node, as the components name it."""

    def __init__(self, order: KeepOrder, against_indexes: bool):
        self._order = order
        self._against_indexes = against_indexes

    def process(self, document: Document):
        node = self._order.node(document)
        yield (input_node(node) if self._against_indexes else node), document


class _RemoveClusteredFn(beam.DoFn):
    """Keeps or removes the documents of one node by the component joined to them."""

    def __init__(self, reason: str, index_reasons: Sequence[str] | None, metrics: StepMetrics):
        self._reason = reason
        self._index_reasons = index_reasons
        self._metrics = metrics

    def process(self, joined):
        node, sides = joined
        components = list(sides[_COMPONENT])
        component = components[0] if components else None
        for document in sides[_DOCUMENTS]:
            yield from self._decide(document, node, component)

    def _decide(self, document: Document, node: tuple, component: tuple | None):
        self._metrics.received()
        self._metrics.chars("in", document.text)
        if component is None:
            # Users filter and upsample on the size, so a document with no near duplicate says so too.
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            yield dataclasses.replace(document, metadata={**document.metadata, "minhash_cluster_size": 1})
            return
        root, size = component
        if root == node:
            self._metrics.emitted()
            self._metrics.chars("out", document.text)
            yield dataclasses.replace(document, metadata={**document.metadata, "minhash_cluster_size": size})
            return
        reason = self._reason
        if self._index_reasons is None:
            kept_id = KeepOrder.document_id(root)
        elif root[0] == INDEX:
            _, position, rank = root
            reason, kept_id = self._index_reasons[position], KeepOrder.ranked_id(rank)
        else:
            kept_id = KeepOrder.document_id(root[1])
        self._metrics.dropped(reason)
        yield beam.pvalue.TaggedOutput(CLUSTERS, ClusterMember(document.id, kept_id, size))
        yield excluded_output(document, reason, duplicate_of=kept_id, minhash_cluster_size=size)


class _RemoveLookedUpFn(_RemoveClusteredFn):
    """Keeps or removes each document by its node's component, looked up in the components given whole."""

    def process(self, keyed, components):
        node, document = keyed
        yield from self._decide(document, node, components.get(node))


def _input_components(component) -> Iterable[tuple]:
    # Indexed documents are not in the input: their components would only weigh on the join.
    if component.node[0] != INDEX:
        yield component.node, (component.root, component.size)


def _by_node(component) -> tuple:
    return component.node, (component.root, component.size)


class RemoveClustered(beam.PTransform):
    """Keeps the root of each cluster and the unclustered documents; sends the rest to ``excluded``.

    Documents and components are joined by node (a ``CoGroupByKey``), so
    each worker holds only the components of the documents it is given. Every kept document gets
    ``minhash_cluster_size`` in its metadata (1 when it has no near
    duplicate); removed documents also get
    ``duplicate_of`` (the kept id) and ``filter_reason``. Returns
    :class:`DedupOutputs`, whose ``clusters`` is the cluster map.

    Args:
        components: Output of :class:`MinHashClusters` on the same documents.
        keep_by: The ``keep_by`` the clusters were built with.
        reason: ``filter_reason`` and ``dropped.<reason>`` counter name.
        step: Stats name.
        against: The indexes the clusters were built against: a document
            clustered with an indexed one is removed with reason
            ``<reason>_in_<index name>`` and the indexed document as ``duplicate_of``.
    """

    def __init__(
        self,
        components,
        keep_by: str | None = None,
        reason: str = "minhash_duplicate",
        step: str = "minhash",
        against: DedupIndexes | None = None,
    ):
        super().__init__()
        self._components = components
        self._order = KeepOrder(keep_by)
        self._reason = reason
        self._metrics = StepMetrics(step)
        self._index_reasons = (
            None if against is None else [against.reason(reason, n) for n in range(len(against.names))]
        )

    def key_by_node(self, documents):
        """``documents`` keyed by their node, as the components name it."""
        return documents | "KeyByNode" >> beam.ParDo(_KeyByNodeFn(self._order, self._index_reasons is not None))

    def by_node(self, components):
        """The components of the input's documents, keyed by node: ``(node, (root, size))``."""
        if self._index_reasons is None:
            return components | "ByNode" >> beam.Map(_by_node)
        return components | "ByNode" >> beam.FlatMap(_input_components)

    def remove(self, keyed_documents, keyed_components) -> DedupOutputs:
        """Joins documents and components keyed by node and decides each document."""
        remove = _RemoveClusteredFn(self._reason, self._index_reasons, self._metrics)
        outputs = (
            {_DOCUMENTS: keyed_documents, _COMPONENT: keyed_components}
            | "JoinByNode" >> beam.CoGroupByKey()
            | "Remove" >> beam.ParDo(remove).with_outputs(EXCLUDED, CLUSTERS, main="kept")
        )
        return DedupOutputs(outputs.kept, outputs[EXCLUDED], outputs[CLUSTERS])

    def remove_looking_up(self, keyed_documents, keyed_components) -> DedupOutputs:
        """Decides each document keyed by node, its component looked up in ``keyed_components`` given whole.

        For a staged task, whose documents and components are one partition of
        the nodes: the documents stream past the partition's components
        instead of being grouped with them, which held every document of the
        partition at once (the largest task of a staged MinHash run). In one
        pipeline, where the components are those of the whole input, use
        :meth:`remove`.
        """
        remove = _RemoveLookedUpFn(self._reason, self._index_reasons, self._metrics)
        components = beam.pvalue.AsDict(keyed_components)
        outputs = keyed_documents | "Remove" >> beam.ParDo(remove, components).with_outputs(
            EXCLUDED, CLUSTERS, main="kept"
        )
        return DedupOutputs(outputs.kept, outputs[EXCLUDED], outputs[CLUSTERS])

    def expand(self, documents):
        return self.remove(self.key_by_node(documents), self.by_node(self._components))


class MinHashDedup(DedupStep):
    """:class:`MinHashClusters` then :class:`RemoveClustered` on one PCollection of documents.

    Returns ``.kept``, ``.excluded`` and ``.clusters`` as :class:`RemoveClustered` does.

    Args:
        config: MinHash parameters.
        keep_by: See :class:`KeepOrder`.
        max_rounds: Connected-components rounds to unroll.
        against: Dedup indexes whose documents come before every input document.
        step: Stats name of the clustering and of the removal alike.
        per_language: Compare only documents of the same language (see :class:`MinHashClusters`).
    """

    def __init__(
        self,
        config: MinHashConfig | None = None,
        keep_by: str | None = None,
        max_rounds: int = 30,
        against: DedupIndexes | None = None,
        step: str = "minhash",
        per_language: bool = False,
    ):
        super().__init__(step)
        self._clusters = MinHashClusters(config, keep_by, max_rounds, step, against, per_language)
        # Its components arrive through the stages, not the constructor.
        self._remove = RemoveClustered(None, keep_by, step=step, against=against)

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The step as stages: signatures, band groups, links, the components' rounds, then the removal."""
        return StagedForm(
            (
                *self._clusters.link_stages(),
                Stage("KeyByNode", {"documents": ("documents",)}, self._key_by_node, {"by_node": KEYED}),
                *self._clusters.component_stages(("band_links", _COPY_LINKS)),
                Stage("ByNode", {"components": (COMPONENTS,)}, self._by_node, {_NODE_COMPONENTS: KEYED}),
                Stage(
                    "Remove",
                    {_DOCUMENTS: ("by_node",), _COMPONENT: (_NODE_COMPONENTS,)},
                    # Over partitions, a task's components are its partition's, few enough to look up; in one
                    # pipeline they are the whole input's, which only a join spreads over the workers.
                    functools.partial(self._removal, look_up=partitions > 1),
                    {"kept": SAME, EXCLUDED: SAME, CLUSTERS: SAME},
                ),
            ),
            input="documents",
            kept=("kept",),
            excluded=(EXCLUDED,),
            clusters=(CLUSTERS,),
        )

    def _key_by_node(self, pipeline, inputs, sides):
        return {"by_node": self._remove.key_by_node(inputs["documents"])}

    def _by_node(self, pipeline, inputs, sides):
        return {_NODE_COMPONENTS: self._remove.by_node(inputs["components"])}

    def _removal(self, pipeline, inputs, sides, *, look_up: bool):
        remove = self._remove.remove_looking_up if look_up else self._remove.remove
        removed = remove(inputs[_DOCUMENTS], inputs[_COMPONENT])
        return {"kept": removed.kept, EXCLUDED: removed.excluded, CLUSTERS: removed.clusters}
