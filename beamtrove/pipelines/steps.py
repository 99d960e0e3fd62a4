"""The per-document steps pipelines share: extraction, and any filter or formatter.

Each is a :class:`~beamtrove.pipelines.spec.DocumentStep` named after what it
runs, so its counters, its ``excluded/<name>/`` folder and its label in the
graph share that name.
"""

from __future__ import annotations

from collections.abc import Callable

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.assets import default_lid_model, default_url_blocklist
from beamtrove.configuration import FRACTION, Range
from beamtrove.options import Option, declared, word_splitting
from beamtrove.pipelines.common import ExtractionOptions
from beamtrove.pipelines.spec import DocumentStep
from beamtrove.text import check_word_splitter
from beamtrove.transforms.extractors import Extract, Extractor, ReadabilityInscriptis, Resiliparse, Trafilatura
from beamtrove.transforms.filters import (
    DEFAULT_SCREEN_THRESHOLD,
    DocumentFilter,
    Filter,
    LanguageFilter,
    LanguageScreen,
    URLFilter,
)
from beamtrove.transforms.filters.language import UnknownLanguageError

__all__ = [
    "EXTRACTOR_CLASSES",
    "LanguageOptions",
    "LanguageScreenOptions",
    "URLFilterOptions",
    "extraction",
    "filter_step",
    "fixed_filter",
    "glotlid_filter",
    "language_filter",
    "language_screen",
    "selected_languages",
    "url_filter",
    "word_counting_filter",
]


class URLFilterOptions(PipelineOptions):
    """Where the URL filter's blocklists are."""

    _add_argparse_args = declared(
        Option(
            "url_blocklist",
            "Folder with the UT1 domains/urls lists and banned word lists, path or fsspec URL. "
            "Default: the one `beamtrove assets fetch` stores in the asset cache.",
            default=default_url_blocklist(),
            reads="path",
        ),
    )


class LanguageOptions(PipelineOptions):
    """The language filter's model, languages, threshold and top pairs."""

    _add_argparse_args = declared(
        Option(
            "lid_model",
            "fastText language-ID model (lid.176.ftz or .bin, or GlotLID's model.bin: docs/filters.md), path or "
            "fsspec URL. Default: the lid.176 model `beamtrove assets fetch` stores in the asset cache.",
            default=default_lid_model(),
            reads="path",
        ),
        Option(
            "languages",
            "Comma-separated labels of the languages to keep, as the model names them: ISO 639 codes for lid.176 "
            "(en), language_Script for GlotLID (deu_Latn; deu alone keeps each of its scripts); 'all' keeps any "
            "language. Default: en (fineweb2: all).",
            default="en",
        ),
        Option("language_threshold", "Minimum language score. Default: 0.65.", float, 0.65, range=FRACTION),
        Option(
            "keep_top_pairs_threshold",
            "Also write top_language_<label>_score for each label scoring above this (of --languages only, when "
            "they are named), as DataTrove's keep_top_pairs_threshold; FineWeb-2 used 0.01. Default: none written.",
            float,
            range=FRACTION,
        ),
    )


class LanguageScreenOptions(PipelineOptions):
    """The language screen before extraction."""

    _add_argparse_args = declared(
        Option(
            "language_screen",
            "Before extraction, drop as language_screen the pages in which no part of the text, read cheaply with "
            "Resiliparse (the page's main text, and every 1000-character window of all its text), scores this for "
            "one of --languages, so that trafilatura spends no time on pages clearly in another language (the kept "
            "documents are the same: see docs/filters.md). Above 0 and at most "
            f"--language_threshold. Default: {DEFAULT_SCREEN_THRESHOLD} (or --language_threshold, if lower) "
            "whenever --languages names languages; with 'all' there is no screen.",
            float,
            const=DEFAULT_SCREEN_THRESHOLD,
            range=Range(0, 1, exclusive_minimum=True),
        ),
        Option(
            "no_language_screen",
            "Extract every page the URL filter keeps, with no language screen: the same documents kept, about "
            "twice as slowly on English crawl pages (docs/filters.md).",
            flag=True,
        ),
    )


#: What each name of :data:`~beamtrove.pipelines.common.EXTRACTORS` makes.
EXTRACTOR_CLASSES: dict[str, type[Extractor]] = {
    "readability": ReadabilityInscriptis,
    "resiliparse": Resiliparse,
    "trafilatura": Trafilatura,
}


def extraction(options: PipelineOptions) -> DocumentStep:
    """The step that replaces each page's HTML by its main text, with the extractor the options choose."""
    own = options.view_as(ExtractionOptions)
    if own.extractor == "trafilatura":
        extractor = Trafilatura(include_tables=not own.no_include_tables)
    elif own.no_include_tables:
        raise ValueError(f"--no_include_tables applies to --extractor trafilatura, not {own.extractor}.")
    else:
        extractor = EXTRACTOR_CLASSES[own.extractor]()
    extract = Extract(extractor, timeout=own.extract_timeout or None)
    return DocumentStep("extract", extract.step_fn())


def url_filter(options: PipelineOptions) -> DocumentStep:
    """The URL blocklist filter, with the lists the options name."""
    return filter_step(URLFilter(options.view_as(URLFilterOptions).url_blocklist))


def language_filter(options: PipelineOptions) -> DocumentStep:
    """The language filter, with the model, languages, threshold and top pairs the options name.

    Raises:
        ValueError: ``--languages`` names a language the model does not know.
    """
    own = options.view_as(LanguageOptions)
    try:
        rule = LanguageFilter(
            own.lid_model,
            languages=selected_languages(options),
            language_threshold=own.language_threshold,
            keep_top_pairs_threshold=own.keep_top_pairs_threshold,
        )
    except UnknownLanguageError as exc:
        raise ValueError(f"--languages {exc}") from None
    return filter_step(rule)


def glotlid_filter(options: PipelineOptions, keep_top_pairs_threshold: float | None) -> DocumentStep:
    """Language ID with a GlotLID-style model (``--lid_model``) that labels every document and drops none, as
    FineWeb-2 ran it: ``language``, ``language_script``, ``language_score`` and the top pairs above
    ``keep_top_pairs_threshold``.

    Raises:
        ValueError: The model's labels name no script (lid.176's): a multilingual pipeline keys everything by
            language and script.
    """
    rule = LanguageFilter(
        options.view_as(LanguageOptions).lid_model,
        languages=None,
        label_only=True,
        keep_top_pairs_threshold=keep_top_pairs_threshold,
    )
    if not rule.labels_scripts():
        raise ValueError(
            f"--lid_model {rule.model_path} labels languages without their script (as lid.176 does): this pipeline "
            "needs a GlotLID-style model, whose labels are language_Script (deu_Latn). Pass GlotLID's model.bin "
            "(huggingface-cli download cis-lmu/glotlid model.bin; docs/multilingual.md)."
        )
    return filter_step(rule)


def language_screen(options: PipelineOptions) -> DocumentStep | None:
    """The language screen, at the threshold ``--language_screen`` sets or its default; None when it is off.

    It is off with ``--no_language_screen``, and with ``--languages all``,
    which leaves it no languages to screen for.

    Raises:
        ValueError: ``--language_screen`` with ``--no_language_screen`` or with
            ``--languages all``, or a threshold above ``--language_threshold``.
    """
    own = options.view_as(LanguageScreenOptions)
    language = options.view_as(LanguageOptions)
    languages = selected_languages(options)
    if own.language_screen is not None and own.no_language_screen:
        raise ValueError("--language_screen sets the screen that --no_language_screen turns off: give one of them.")
    if own.language_screen is not None and languages is None:
        raise ValueError("--language_screen screens for the languages --languages names; it cannot with 'all'.")
    if own.no_language_screen or languages is None:
        return None
    # The screen must never drop what the language filter would keep: its threshold is at most the filter's.
    default = min(DEFAULT_SCREEN_THRESHOLD, language.language_threshold)
    threshold = default if own.language_screen is None else own.language_screen
    if not 0 < threshold <= min(language.language_threshold, 1):
        if own.language_screen is None:
            return None
        raise ValueError(
            f"--language_screen {threshold} is out of range: it must be above 0 and at most --language_threshold "
            f"({language.language_threshold}), or the screen would drop pages the language filter keeps."
        )
    try:
        return filter_step(LanguageScreen(language.lid_model, languages, threshold))
    except UnknownLanguageError as exc:
        raise ValueError(f"--languages {exc}") from None


def selected_languages(options: PipelineOptions) -> list[str] | None:
    """The languages ``--languages`` names; None for 'all'."""
    given = options.view_as(LanguageOptions).languages
    return None if given == "all" else [code.strip() for code in given.split(",") if code.strip()]


def filter_step(rule: DocumentFilter) -> DocumentStep:
    """The step applying a filter or formatter, named after it; what it drops goes to ``excluded/<name>/``."""
    return DocumentStep(rule.name, Filter(rule).step_fn(), excludes=True)


def fixed_filter(rule_class: type[DocumentFilter], **settings) -> Callable[[PipelineOptions], DocumentStep]:
    """A step factory for a filter whose settings do not depend on the run's options."""

    def make(options: PipelineOptions) -> DocumentStep:
        return filter_step(rule_class(**settings))

    return make


def word_counting_filter(rule_class: type[DocumentFilter], **settings) -> Callable[[PipelineOptions], DocumentStep]:
    """A step factory for a filter that counts words, split by the splitter ``--word_splitter`` names.

    ``--word_splitter language`` splits each document by its language's tokenizer, from ``--word_tokenizers``;
    the tokenizers of the languages ``--languages`` keeps are checked when the step is made.
    """

    def make(options: PipelineOptions) -> DocumentStep:
        splitting = word_splitting(options)
        kept = selected_languages(options)
        if kept is not None:
            # The languages the language filter keeps: each one's tokenizer must be usable before the run starts.
            check_word_splitter(splitting["word_splitter"], kept, word_tokenizers=splitting["word_tokenizers"])
        return filter_step(rule_class(**settings, **splitting))

    return make
