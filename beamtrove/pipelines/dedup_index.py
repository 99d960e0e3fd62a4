"""``beamtrove run dedup_index``: write a dedup index of documents, for later datasets to be deduplicated against.

Reads JSONL/Parquet/CSV documents as ``beamtrove run dedup`` does and writes,
in ``--output``, the index folder ``beamtrove run dedup --against`` reads:
the keys of the kinds ``--dedup`` names among exact, url, minhash and
sentence (layout in :mod:`beamtrove.transforms.dedup.index`). The MinHash,
span and keep-order options are the dedup pipeline's, and a run against the
index must use the same MinHash shingles and hashes and span length.
Built from a dump's input documents, the index makes ``dedup --against``
remove from a later dump what a dedup over both dumps would.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import Range
from beamtrove.fs import InputFile
from beamtrove.options import BeamtroveOptions, Option, WordSplitterOptions, declared
from beamtrove.pipelines.common import RowInputOptions, row_reader
from beamtrove.pipelines.dedup import DedupOptions, minhash_config
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.dedup import INDEX_KINDS, BuildDedupIndex

__all__ = ["SPEC", "DedupIndexOptions"]


class DedupIndexOptions(PipelineOptions):
    """Options of the dedup_index pipeline (besides the dedup pipeline's)."""

    _add_argparse_args = declared(
        Option(
            "index_name",
            "The index's name, in the reasons of what it removes (e.g. the dump, CC-MAIN-2024-10). Default: the "
            "output folder's name.",
        ),
        Option(
            "index_shards", "Record files per kind, each written by its own worker. Default: 8.", int, 8, range=Range(1)
        ),
    )


def _kinds(options: PipelineOptions) -> list[str]:
    chosen = [kind.strip() for kind in options.view_as(DedupOptions).dedup.split(",") if kind.strip()]
    if not chosen or set(chosen) - set(INDEX_KINDS):
        raise ValueError(f"dedup_index takes --dedup among {', '.join(INDEX_KINDS)} (got {','.join(chosen)!r}).")
    return chosen


# Options of the dedup pipeline that have nothing to do when only an index is written.
_DEDUP_ONLY = ("against", "cluster_map", "count_tokens", "minhash_threshold")


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    own = options.view_as(DedupIndexOptions)
    dedup = options.view_as(DedupOptions)
    given = [f"--{name}" for name in _DEDUP_ONLY if getattr(dedup, name)]
    if given:
        raise ValueError(
            f"{', '.join(given)}: dedup_index only writes an index, so these do nothing here; leave them out "
            "(--minhash_threshold applies when deduplicating against the index)."
        )
    index = BuildDedupIndex(
        output,
        _kinds(options),
        # The run writes into a staging folder first: the name comes from the folder the user gave.
        name=own.index_name or posixpath.basename(options.view_as(BeamtroveOptions).output.rstrip("/")),
        minhash=minhash_config(options),
        span_sentences=dedup.span_sentences,
        keep_by=dedup.keep_by,
        num_shards=own.index_shards,
    )
    return Sink("write_index", index, whole_input=True)


SPEC = PipelineSpec(
    name="dedup_index",
    description="Write a dedup index (exact, URL, MinHash and sentence-span keys) for dedup --against.",
    options=(DedupIndexOptions, DedupOptions, WordSplitterOptions, RowInputOptions),
    reader=row_reader,
    steps=(),
    sink=_sink,
    global_steps="an index holds the distinct keys of the whole input",
    runs_staged=True,
    compares_documents=True,
)
