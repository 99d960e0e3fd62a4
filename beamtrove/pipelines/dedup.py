"""``beamtrove run dedup``: remove duplicates from JSONL/Parquet/CSV documents.

Steps run in this order, each only when ``--dedup`` names it: ``exact``
(identical text), ``url`` (same normalized URL), ``minhash`` (near
duplicates) and ``sentence`` (C4-style repeated sentence spans). Writes the
kept documents to ``<output>/documents/``, each removed one to
``<output>/excluded/<step>/`` (with ``filter_reason`` and ``duplicate_of``),
with ``--cluster_map`` one row per removed document to
``<output>/clusters/<step>/`` (``id``, ``kept_id``, ``cluster_size``), dead
letters to ``<output>/dead_letters/`` and the stats to ``stats.json``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.pipelines.fineweb import EXCLUDED_DIR
from beamtrove.pipelines.inputs import RowInputOptions, document_reader, input_files
from beamtrove.pipelines.warc_text import write_documents
from beamtrove.transforms.dedup import (
    ClusterMember,
    DedupOutputs,
    ExactDedup,
    MinHashClusters,
    MinHashConfig,
    RemoveClustered,
    SentenceDedup,
    UrlDedup,
)
from beamtrove.transforms.writers import JsonlFormat, WriteFiles, WriteJsonl

__all__ = ["CLUSTERS_DIR", "DESCRIPTION", "GLOBAL_STEPS", "SHARED_OPTIONS", "STEPS", "Options", "build"]

DESCRIPTION = "Remove exact, URL, MinHash near-duplicate and repeated-sentence duplicates from documents."
SHARED_OPTIONS = (RowInputOptions,)
#: The dedup steps, in the order they run.
STEPS = ("exact", "url", "minhash", "sentence")
CLUSTERS_DIR = "clusters"


GLOBAL_STEPS = "every dedup step compares documents across the whole input"


class Options(PipelineOptions):
    """Options of the dedup pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "dedup",
            default="minhash",
            help=f"Comma-separated steps among {', '.join(STEPS)} (they run in that order). Default: minhash.",
        )
        add_option(
            parser,
            "keep_by",
            help="Metadata field deciding which duplicate is kept: the smallest value, or the largest with a "
            "leading '-' (e.g. date, -score). Default: the smallest id.",
        )
        add_option(parser, "cluster_map", action="store_true", help="Write removed id, kept id and cluster size.")
        add_option(parser, "minhash_ngrams", type=int, default=5, help="Words per MinHash shingle. Default: 5.")
        add_option(parser, "minhash_buckets", type=int, default=14, help="MinHash LSH buckets. Default: 14.")
        add_option(parser, "minhash_hashes_per_bucket", type=int, default=8, help="Hashes per bucket. Default: 8.")
        add_option(parser, "minhash_seed", type=int, default=1, help="Seed of the MinHash permutations. Default: 1.")
        add_option(
            parser,
            "minhash_threshold",
            type=float,
            help="Only link documents whose signatures agree on at least this fraction of hashes (an estimate of "
            "their Jaccard similarity), e.g. 0.85. Default: link every pair sharing a bucket, as DataTrove does.",
        )
        add_option(
            parser,
            "max_cc_rounds",
            type=int,
            default=30,
            help="Connected-components rounds to unroll (a 10,000-document chain needs 15). Default: 30.",
        )
        add_option(parser, "span_sentences", type=int, default=3, help="Sentences per span (sentence). Default: 3.")
        add_option(
            parser,
            "min_doc_words",
            type=int,
            default=50,
            help="Drop documents left with fewer words after sentence dedup. Default: 50.",
        )


def _steps(own: Options) -> list[str]:
    steps = [step.strip() for step in own.dedup.split(",") if step.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown or not steps:
        raise ValueError(f"--dedup takes a comma-separated list of {', '.join(STEPS)} (got {own.dedup!r}).")
    return [step for step in STEPS if step in steps]


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the dedup steps to ``pipeline``.

    Raises:
        ValueError: Missing or bad options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    if not input_files(options) or not common.output:
        raise ValueError("dedup needs --input and --output.")
    steps = _steps(own)
    config = MinHashConfig(
        own.minhash_ngrams, own.minhash_buckets, own.minhash_hashes_per_bucket, own.minhash_seed, own.minhash_threshold
    )
    reader = document_reader(options, allow_warc=False)
    documents, read_errors = pipeline | "Read" >> reader.with_dead_letters()
    output = common.output
    for step in steps:
        if step == "exact":
            result = documents | "ExactDedup" >> ExactDedup(keep_by=own.keep_by)
        elif step == "url":
            result = documents | "UrlDedup" >> UrlDedup(keep_by=own.keep_by)
        elif step == "minhash":
            clusters = documents | "MinHashClusters" >> MinHashClusters(config, own.keep_by, own.max_cc_rounds)
            if step == steps[0]:
                # A second read streams the documents past the finished clusters instead of holding them
                # all; its dead letters repeat the first read's.
                documents = pipeline | "ReadAgain" >> document_reader(options, allow_warc=False)
            result = documents | "MinHashDedup" >> RemoveClustered(clusters, own.keep_by)
        else:
            result = documents | "SentenceDedup" >> SentenceDedup(own.span_sentences, own.min_doc_words, own.keep_by)
        _write_removed(result, step, output, options)
        documents = result.kept
    write_documents(documents, [read_errors], output, options)


def _write_removed(result, step: str, output: str, options: PipelineOptions) -> None:
    result.excluded | f"WriteExcluded_{step}" >> WriteJsonl(
        join(output, EXCLUDED_DIR, step),
        "part-${shard}.jsonl.gz",
        max_file_size=options.view_as(BeamtroveOptions).max_file_size,
    )
    # Sentence dedup shortens documents rather than grouping them: it has no cluster map.
    if options.view_as(Options).cluster_map and isinstance(result, DedupOutputs):
        result.clusters | f"WriteClusters_{step}" >> WriteFiles(
            join(output, CLUSTERS_DIR, step),
            "part-${shard}.jsonl.gz",
            JsonlFormat(ClusterMember.to_row),
            fields_of=ClusterMember.to_row,
            key_of=_cluster_member_key,
        )


def _cluster_member_key(member: ClusterMember) -> str:
    return member.id
