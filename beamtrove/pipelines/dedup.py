"""``beamtrove run dedup``: remove duplicates from JSONL/Parquet/CSV documents.

Steps run in this order, each only when ``--dedup`` names it: ``exact``
(identical text), ``url`` (same normalized URL), ``bloom`` (documents whose
n-grams mostly occurred earlier, DataTrove's Bloom-filter rule), ``minhash`` (near
duplicates), ``sentence`` (C4-style repeated sentence spans) and
``substring`` (repeated runs of ``--substring_min_tokens`` tokens). Writes the
kept documents to ``<output>/documents/``, each removed one to
``<output>/excluded/<step>/`` (with ``filter_reason`` and ``duplicate_of``),
with ``--cluster_map`` one row per removed document to
``<output>/clusters/<step>/`` (``id``, ``kept_id``, ``cluster_size``), dead
letters to ``<output>/dead_letters/`` and the stats to ``stats.json``.
With ``--against INDEX,...`` every step but the token counts also removes
what the dedup indexes of earlier datasets hold (see
:mod:`beamtrove.transforms.dedup.index`). With ``--count_tokens``, the steps ``tokens_before_dedup`` and
``tokens_after_dedup`` count every document's tokens (DataTrove's
``TokensCounter``) before and after the dedup steps.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import FRACTION, Range
from beamtrove.layout import PART_FILES, TOKENS_AFTER_DEDUP, TOKENS_BEFORE_DEDUP
from beamtrove.options import Option, WordSplitterOptions, declared, word_splitting
from beamtrove.pipelines.common import RowInputOptions, documents_sink, row_reader
from beamtrove.pipelines.spec import DocumentStep, GlobalStep, PipelineSpec
from beamtrove.text import is_language_splitter
from beamtrove.transforms.dedup import (
    BloomDedup,
    BloomDedupConfig,
    ClusterMember,
    DedupIndexes,
    ExactDedup,
    MinHashConfig,
    MinHashDedup,
    SentenceDedup,
    SubstringDedup,
    UrlDedup,
)
from beamtrove.transforms.summary import CountTokens
from beamtrove.transforms.writers import JsonlFormat, WriteFiles

__all__ = ["SPEC", "STEPS", "DedupOptions", "minhash_config"]

#: The dedup steps, in the order they run.
STEPS = ("exact", "url", "bloom", "minhash", "sentence", "substring")


class DedupOptions(PipelineOptions):
    """Options of the dedup pipeline."""

    _add_argparse_args = declared(
        Option(
            "dedup",
            f"Comma-separated steps among {', '.join(STEPS)} (they run in that order). Default: minhash.",
            default="minhash",
        ),
        Option(
            "keep_by",
            "Metadata field deciding which duplicate is kept: the smallest value, or the largest with a "
            "leading '-' (e.g. date, -score). Default: the smallest id.",
        ),
        Option("cluster_map", "Write removed id, kept id and cluster size.", flag=True),
        Option("minhash_ngrams", "Words per MinHash shingle. Default: 5.", int, 5, range=Range(1)),
        # A band key holds its bucket number in two bytes.
        Option("minhash_buckets", "MinHash LSH buckets. Default: 14.", int, 14, range=Range(1, 0xFFFF)),
        Option("minhash_hashes_per_bucket", "Hashes per bucket. Default: 8.", int, 8, range=Range(1)),
        # The seed of numpy's RandomState.
        Option("minhash_seed", "Seed of the MinHash permutations. Default: 1.", int, 1, range=Range(0, 2**32 - 1)),
        Option(
            "minhash_threshold",
            "Only link documents whose signatures agree on at least this fraction of hashes (an estimate of "
            "their Jaccard similarity), e.g. 0.85. Default: link every pair sharing a bucket, as DataTrove does.",
            float,
            range=Range(0, 1, exclusive_minimum=True),
        ),
        Option(
            "max_cc_rounds",
            "Connected-components rounds to unroll (a 10,000-document chain needs 15). Default: 30.",
            int,
            30,
            range=Range(1),
        ),
        Option(
            "bloom_fpr",
            "False-positive rate of bloom's filter, which only narrows what is shuffled: the result is exact at any "
            "rate; 0 shuffles every shingle, as a --staged run over several partitions does at any rate. "
            "Default: 0.01.",
            float,
            0.01,
            range=Range(0, 1, exclusive_maximum=True),
        ),
        Option("bloom_ngrams", "Words per bloom shingle. Default: 13 (DataTrove's).", int, 13, range=Range(1)),
        Option(
            "bloom_threshold",
            "bloom removes a document when more than this fraction of its shingles occurred in earlier documents. "
            "Default: 0.8 (DataTrove's).",
            float,
            0.8,
            range=FRACTION,
        ),
        Option(
            "bloom_expected_shingles",
            "Distinct shingles expected in the whole input (about its word count): sizes bloom's filter and its "
            "slices of the key space. Default: 10000000.",
            int,
            10_000_000,
            range=Range(1),
        ),
        Option("bloom_filter_bytes", "Size bloom's filter in bytes instead of from --bloom_fpr.", int, range=Range(1)),
        Option(
            "bloom_partitions",
            "Slices of the shingle key space bloom searches. Default: from the expected.",
            int,
            range=Range(1),
        ),
        Option("span_sentences", "Sentences per span (sentence). Default: 3.", int, 3, range=Range(1)),
        Option(
            "min_doc_words",
            "Drop documents left with fewer words after sentence dedup. Default: 50.",
            int,
            50,
            range=Range(0),
        ),
        Option(
            "min_doc_sentences",
            "Drop documents left with fewer sentences after sentence dedup (0: no minimum). Default: 3.",
            int,
            3,
            range=Range(0),
        ),
        Option(
            "substring_tokenizer",
            "A tokenizer.json whose tokens the substring step counts (DataTrove uses GPT-2's). Required by substring.",
            reads="path",
        ),
        Option(
            "substring_min_tokens",
            "Tokens of the shortest repeated run substring cuts. Default: 50.",
            int,
            50,
            range=Range(1),
        ),
        Option(
            "substring_min_doc_words",
            "Drop documents left with fewer words after substring dedup (0: keep them all). Default: 50.",
            int,
            50,
            range=Range(0),
        ),
        Option(
            "against",
            "Comma-separated dedup index folders (beamtrove run dedup_index) of earlier datasets, e.g. released "
            "dumps: their documents count as coming before this input's, so whatever they hold is removed with "
            "reason <step>_duplicate_in_<index name> (spans are cut) by the exact, url, minhash and sentence steps; "
            "bloom and substring compare the input with itself only. The first index named wins a key several hold.",
            reads="paths",
        ),
        Option(
            "count_tokens",
            "A tokenizer.json: count every document's tokens before dedup (step tokens_before_dedup) and after "
            "it (tokens_after_dedup), setting its token_count metadata; the dedup ratio is after / before.",
            reads="path",
        ),
    )


def _chosen(options: PipelineOptions) -> list[str]:
    """The steps ``--dedup`` names, in the order they run."""
    own = options.view_as(DedupOptions)
    steps = [step.strip() for step in own.dedup.split(",") if step.strip()]
    if not steps or set(steps) - set(STEPS):
        raise ValueError(f"--dedup takes a comma-separated list of {', '.join(STEPS)} (got {own.dedup!r}).")
    return [step for step in STEPS if step in steps]


def minhash_config(options: PipelineOptions) -> MinHashConfig:
    """The MinHash settings ``--minhash_*`` set; ``--word_splitter`` when it splits by language.

    The English splitters leave MinHash's words as they were, the normalized text's space-separated ones.
    """
    own = options.view_as(DedupOptions)
    splitting = word_splitting(options)
    if not is_language_splitter(splitting["word_splitter"]):
        splitting = {}
    return MinHashConfig(
        own.minhash_ngrams,
        own.minhash_buckets,
        own.minhash_hashes_per_bucket,
        own.minhash_seed,
        own.minhash_threshold,
        **splitting,
    )


def _against(options: PipelineOptions) -> DedupIndexes | None:
    """The indexes ``--against`` names, their manifests read (so a missing one fails the run before it starts)."""
    against = options.view_as(DedupOptions).against
    if not against:
        return None
    paths = [path.strip() for path in against.split(",") if path.strip()]
    return DedupIndexes(paths)


def _cluster_member_key(member: ClusterMember) -> str:
    return member.id


def _cluster_map(directory: str) -> WriteFiles:
    """Writes a step's cluster map, one row per removed document: ``id``, ``kept_id``, ``cluster_size``."""
    rows = JsonlFormat(ClusterMember.to_row)
    return WriteFiles(directory, PART_FILES, rows, fields_of=ClusterMember.to_row, key_of=_cluster_member_key)


def _cluster_map_if_asked(options: PipelineOptions):
    return _cluster_map if options.view_as(DedupOptions).cluster_map else None


def _exact(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "exact" not in _chosen(options):
        return None
    exact = ExactDedup(keep_by=own.keep_by, against=_against(options))
    return GlobalStep(exact, _cluster_map_if_asked(options))


def _url(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "url" not in _chosen(options):
        return None
    urls = UrlDedup(keep_by=own.keep_by, against=_against(options))
    return GlobalStep(urls, _cluster_map_if_asked(options))


def _bloom(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "bloom" not in _chosen(options):
        return None
    config = BloomDedupConfig(
        n_grams=own.bloom_ngrams,
        threshold=own.bloom_threshold,
        fpr=own.bloom_fpr,
        expected_shingles=own.bloom_expected_shingles,
        filter_bytes=own.bloom_filter_bytes,
        partitions=own.bloom_partitions,
        **word_splitting(options),
    )
    # Bloom removes a document for the shingles it shares with many others, not as a member of one group.
    return GlobalStep(BloomDedup(config, keep_by=own.keep_by))


def _minhash(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "minhash" not in _chosen(options):
        return None
    near_duplicates = MinHashDedup(minhash_config(options), own.keep_by, own.max_cc_rounds, against=_against(options))
    return GlobalStep(near_duplicates, _cluster_map_if_asked(options))


def _sentence(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "sentence" not in _chosen(options):
        return None
    # Sentence dedup shortens documents rather than grouping them: it has no cluster map.
    spans = SentenceDedup(
        own.span_sentences,
        own.min_doc_words,
        own.keep_by,
        min_doc_sentences=own.min_doc_sentences,
        against=_against(options),
    )
    return GlobalStep(spans)


def _substring(options: PipelineOptions) -> GlobalStep | None:
    own = options.view_as(DedupOptions)
    if "substring" not in _chosen(options):
        return None
    if not own.substring_tokenizer:
        raise ValueError(
            "--dedup substring needs --substring_tokenizer, a tokenizer.json (e.g. GPT-2's, as DataTrove uses)."
        )
    # Substring dedup shortens documents, as sentence dedup does: no cluster map.
    substrings = SubstringDedup(
        own.substring_tokenizer, own.substring_min_tokens, own.substring_min_doc_words, own.keep_by
    )
    return GlobalStep(substrings)


def _token_counter(step: str):
    def make(options: PipelineOptions) -> DocumentStep | None:
        tokenizer = options.view_as(DedupOptions).count_tokens
        return DocumentStep(step, CountTokens(tokenizer, step=step).step_fn()) if tokenizer else None

    return make


SPEC = PipelineSpec(
    name="dedup",
    description="Remove duplicates from documents: exact text, same URL, Bloom-filter n-gram overlap, MinHash near "
    "duplicates, repeated sentence spans and repeated token substrings.",
    options=(DedupOptions, WordSplitterOptions, RowInputOptions),
    reader=row_reader,
    steps=(
        _token_counter(TOKENS_BEFORE_DEDUP),
        _exact,
        _url,
        _bloom,
        _minhash,
        _sentence,
        _substring,
        _token_counter(TOKENS_AFTER_DEDUP),
    ),
    sink=documents_sink,
    global_steps="every dedup step compares documents across the whole input",
    runs_staged=True,
    compares_documents=True,
    summary_stats=True,
)
