"""``beamtrove run fineweb2``: FineWeb-2's multilingual pipeline, every language with its own settings.

As FineWeb-2 was built (Penedo et al. 2025; ``huggingface/fineweb-2``'s
pipeline on DataTrove): WARC pages (``--dump`` or ``--input``) go through the
URL filter and extraction; extracted documents (JSONL, Parquet, ...) start
here directly. Then:

1. GlotLID-style language ID labels every document (``language``,
   ``language_script``, ``language_score`` and the other likely pairs above
   ``--keep_top_pairs_threshold``, 0.01 as FineWeb-2 kept them), dropping none;
2. ``language_score``: each language's documents are kept when their language
   has a config in ``--fineweb2_configs`` (and is one of ``--languages``) and
   they reach its minimum score;
3. MinHash dedup within each language (5-grams, 14 buckets of 8 hashes, the
   words split the language's way), keeping ``minhash_cluster_size``;
4. Gopher repetition, FineWeb quality and Gopher quality, each with the
   language's thresholds and stop words and its word splitting;
5. ftfy, PII masking and the removal of table-border lines (``|``).

Kept documents go to ``documents/<language>_<Script>/part-*.jsonl.gz``; what a
step drops to ``excluded/<step>/``; every step of 2-4 counts each language's
documents (``language.<language>_<Script>.in/out/dropped.<reason>`` in
``stats.json``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile, join
from beamtrove.languages import split_language
from beamtrove.layout import DOCUMENTS_DIR, WRITE_DOCUMENTS
from beamtrove.options import BeamtroveOptions, Option, declared, word_splitting
from beamtrove.pipelines.common import ExtractionOptions, RowInputOptions, document_reader, input_files
from beamtrove.pipelines.fineweb import FineWebOptions, add_dump, dump_output, pages_reader
from beamtrove.pipelines.spec import GlobalStep, PipelineSpec, Sink
from beamtrove.pipelines.steps import (
    LanguageOptions,
    URLFilterOptions,
    extraction,
    filter_step,
    fixed_filter,
    glotlid_filter,
    selected_languages,
    url_filter,
)
from beamtrove.text import check_word_splitter, is_language_splitter
from beamtrove.transforms.dedup import MinHashConfig, MinHashDedup
from beamtrove.transforms.filters import FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter
from beamtrove.transforms.filters.per_language import (
    FINEWEB2_CONFIGS_SOURCE,
    LanguageConfigs,
    LanguageScoreFilter,
    PerLanguageFilter,
)
from beamtrove.transforms.formatters import FTFYFormatter, PIIFormatter, SymbolLinesFormatter
from beamtrove.transforms.readers import FileReader, ReadWarc, reader_for
from beamtrove.transforms.writers import WriteJsonl

__all__ = [
    "SPEC",
    "FineWeb2Options",
    "fineweb_quality_rule",
    "gopher_quality_rule",
    "gopher_repetition_rule",
    "language_configs",
]

_LOGGER = logging.getLogger(__name__)

#: Where each language's documents go under ``documents/``: DataTrove's ``${language}_${language_script}``.
LANGUAGE_FILES = "${language}_${language_script}/part-${shard}.jsonl.gz"
#: The other likely languages FineWeb-2 recorded: those above this score.
FINEWEB2_TOP_PAIRS = 0.01


class FineWeb2Options(PipelineOptions):
    """Options of the fineweb2 pipeline."""

    _add_argparse_args = declared(
        Option(
            "fineweb2_configs",
            "Folder of FineWeb-2's per-language configs, one <language>_<Script>.yml each (path or fsspec URL): "
            f"the configs/ folder of {FINEWEB2_CONFIGS_SOURCE}. Required.",
            reads="path",
        ),
        Option(
            "missing_config",
            "What becomes of the documents of a language with no config: 'drop' them (as no_language_config), or "
            "filter them with the config of the language named here (e.g. fra_Latn), their words still split "
            "their own language's way. Default: drop.",
            default="drop",
        ),
    )


def language_configs(options: PipelineOptions) -> LanguageConfigs:
    """The configs ``--fineweb2_configs`` names, with ``--missing_config``'s fallback.

    Raises:
        ValueError: No ``--fineweb2_configs``, or a fallback without a config.
        FileNotFoundError: No such folder.
    """
    own = options.view_as(FineWeb2Options)
    if not own.fineweb2_configs:
        raise ValueError(
            "fineweb2 needs --fineweb2_configs, the folder of FineWeb-2's per-language configs "
            f"({FINEWEB2_CONFIGS_SOURCE})."
        )
    return _configs(own.fineweb2_configs, None if own.missing_config == "drop" else own.missing_config)


@functools.lru_cache(maxsize=4)
def _configs(folder: str, fallback: str | None) -> LanguageConfigs:
    # Listed once per run however many steps read them.
    return LanguageConfigs(folder, fallback)


def _reads_pages(options: PipelineOptions) -> bool:
    """Whether the input is web pages (``--dump``, or WARC files) rather than extracted documents."""
    if options.view_as(FineWebOptions).dump:
        return True
    inputs = input_files(options)
    urls = [getattr(path, "url", path) for path in inputs]
    return bool(urls) and reader_for(options.view_as(RowInputOptions).input_format, urls) is ReadWarc


def _reader(options: PipelineOptions) -> FileReader:
    return pages_reader(options) if _reads_pages(options) else document_reader(options)


def _on_pages(make):
    """A step that web pages need and extracted documents do not: the URL filter, extraction."""

    def step(options: PipelineOptions):
        return make(options) if _reads_pages(options) else None

    return step


def _language_id(options: PipelineOptions):
    threshold = options.view_as(LanguageOptions).keep_top_pairs_threshold
    return glotlid_filter(options, FINEWEB2_TOP_PAIRS if threshold is None else threshold)


def _language_score(options: PipelineOptions):
    languages, configs = selected_languages(options), language_configs(options)
    splitting = word_splitting(options)
    if languages is not None:
        # Each language asked for must have its word splitting here before the run starts, not on a worker.
        check_word_splitter(splitting["word_splitter"], languages, word_tokenizers=splitting["word_tokenizers"])
    elif is_language_splitter(splitting["word_splitter"]):
        _warn_of_languages_without_words(configs, splitting["word_splitter"], splitting["word_tokenizers"])
    return filter_step(LanguageScoreFilter(configs, languages))


@functools.cache
def _warn_of_languages_without_words(configs: LanguageConfigs, word_splitter: str, word_tokenizers: str | None) -> None:
    """Says which languages with a config cannot be split here: their documents would become dead letters.

    Once per process: a staged run builds its steps for many tasks.
    """
    needs: dict[str, list[str]] = {}
    for language in sorted(configs.languages):
        try:
            check_word_splitter(word_splitter, [language], word_tokenizers=word_tokenizers)
        except ValueError as problem:
            needs.setdefault(str(problem).rsplit(" needs ", 1)[-1], []).append(language)
    for need, languages in needs.items():
        _LOGGER.warning(
            "%d language(s) with a FineWeb-2 config cannot have their words split here, so their documents become "
            "dead letters (or name the languages to keep with --languages): %s. They need %s",
            len(languages),
            ", ".join(languages),
            need,
        )


def _minhash(options: PipelineOptions) -> GlobalStep:
    # FineWeb-2's MinHash: 5-grams, 14 buckets of 8 hashes, within each language, words split its own way (an
    # English splitter leaves MinHash its normalized text's space-separated words, as the dedup pipeline does).
    splitting = word_splitting(options)
    if not is_language_splitter(splitting["word_splitter"]):
        splitting = {}
    config = MinHashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, **splitting)
    return GlobalStep(MinHashDedup(config, per_language=True))


def _enabled(threshold: float | None) -> float | None:
    # FineWeb-2's settings follow DataTrove's rule: a threshold of 0 turns its rule off.
    return threshold or None


def gopher_repetition_rule(
    settings: Mapping[str, Any], word_splitter: str = "language", word_tokenizers: str | None = None
) -> GopherRepetitionFilter:
    """FineWeb-2's Gopher repetition filter with one language's settings."""
    # Trafilatura leaves few paragraphs, and FineWeb quality weighs repeated lines' characters: those rules are off.
    return GopherRepetitionFilter(
        dup_line_frac=_enabled(settings["dup_line_frac"]),
        dup_para_frac=None,
        dup_line_char_frac=None,
        dup_para_char_frac=None,
        top_n_grams=[(int(n), float(fraction)) for n, fraction in settings["top_n_grams"]],
        dup_n_grams=[(int(n), float(fraction)) for n, fraction in settings["dup_n_grams"]],
        word_splitter=word_splitter,
        word_tokenizers=word_tokenizers,
    )


def fineweb_quality_rule(
    settings: Mapping[str, Any], word_splitter: str = "language", word_tokenizers: str | None = None
) -> FineWebQualityFilter:
    """FineWeb-2's FineWeb quality filter with one language's settings."""
    # FineWeb-2 turned the short-line rule off and allowed ten times FineWeb's repeated-line characters.
    return FineWebQualityFilter(
        line_punct_thr=settings["line_punct_thr"],
        short_line_thr=999,
        char_duplicates_ratio=0.1,
        new_line_ratio=settings["new_line_ratio"],
        word_splitter=word_splitter,
        word_tokenizers=word_tokenizers,
    )


def gopher_quality_rule(
    settings: Mapping[str, Any], word_splitter: str = "language", word_tokenizers: str | None = None
) -> GopherQualityFilter:
    """FineWeb-2's Gopher quality filter with one language's settings."""
    return GopherQualityFilter(
        min_avg_word_length=_enabled(settings["min_avg_word_length"]),
        max_avg_word_length=_enabled(settings["max_avg_word_length"]),
        # DataTrove's max_non_alpha_words_ratio is the least fraction of words holding a letter.
        min_alpha_words_ratio=_enabled(settings["max_non_alpha_words_ratio"]),
        stop_words=settings["stopwords"],
        min_stop_words=2,
        word_splitter=word_splitter,
        word_tokenizers=word_tokenizers,
    )


def _per_language(name: str, make):
    def step(options: PipelineOptions):
        rule = PerLanguageFilter(name, language_configs(options), functools.partial(make, **word_splitting(options)))
        # Bad settings of a language asked for fail now, not on a worker.
        rule.check(language for language in selected_languages(options) or () if split_language(language)[1])
        return filter_step(rule)

    return step


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile] = ()) -> Sink:
    directory = join(output, DOCUMENTS_DIR)
    max_file_size = options.view_as(BeamtroveOptions).max_file_size
    return Sink(WRITE_DOCUMENTS, WriteJsonl(directory, LANGUAGE_FILES, max_file_size=max_file_size))


SPEC = PipelineSpec(
    name="fineweb2",
    description="FineWeb-2's multilingual pipeline: GlotLID language ID, each language's minimum score, MinHash "
    "dedup within each language, Gopher and FineWeb quality filters with each language's thresholds, stop words "
    "and word splitting, ftfy and PII; output per language.",
    options=(
        FineWeb2Options,
        LanguageOptions,
        FineWebOptions,
        URLFilterOptions,
        ExtractionOptions,
        RowInputOptions,
    ),
    reader=_reader,
    steps=(
        add_dump,
        _on_pages(url_filter),
        _on_pages(extraction),
        _language_id,
        _language_score,
        _minhash,
        _per_language(GopherRepetitionFilter.name, gopher_repetition_rule),
        _per_language(FineWebQualityFilter.name, fineweb_quality_rule),
        _per_language(GopherQualityFilter.name, gopher_quality_rule),
        fixed_filter(FTFYFormatter),
        fixed_filter(PIIFormatter),
        # Trafilatura turns table borders into lines of "|": FineWeb-2 made them line breaks.
        fixed_filter(SymbolLinesFormatter, symbols=["|"], replace_char="\n"),
    ),
    sink=_sink,
    output=dump_output,
    global_steps="MinHash dedup compares each language's documents across the whole input",
    runs_staged=True,
    compares_documents=True,
    summary_stats=True,
    defaults={"languages": "all", "word_splitter": "language"},
    refuses={
        "language_threshold": "each language's minimum language_score is its config's (--fineweb2_configs), as in "
        "FineWeb-2, whose language ID drops nothing."
    },
)
