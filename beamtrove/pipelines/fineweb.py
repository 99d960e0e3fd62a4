"""``beamtrove run fineweb``: the FineWeb filtering stack over WARC files.

Read WARC → URL filter → extract → language → Gopher repetition → Gopher
quality → C4 quality → FineWeb quality → JSONL, as FineWeb was built
(Penedo et al. 2024) and as DataTrove's FineWeb example configures it. Writes
``documents/``, ``excluded/<filter>/`` (each dropped document with its
``filter_reason``), ``dead_letters/`` and ``stats.json`` under the output, or
under ``<output>/<dump>/`` with ``--dump``.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.assets import default_lid_model, default_url_blocklist
from beamtrove.document import Document
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.pipelines.inputs import input_files
from beamtrove.pipelines.warc_text import (
    DOCUMENTS_DIR,
    ExtractionOptions,
    extract_text,
    process_resumably,
    read_pages,
    write_documents,
)
from beamtrove.resume import ResumeOptions
from beamtrove.transforms.filters import (
    C4QualityFilter,
    DocumentFilter,
    Filter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    URLFilter,
)
from beamtrove.transforms.per_input import EXCLUDED_DIR
from beamtrove.transforms.writers import WriteJsonl

__all__ = ["DESCRIPTION", "EXCLUDED_DIR", "SHARED_OPTIONS", "Options", "build", "documents_path", "dump_paths"]

DESCRIPTION = (
    "FineWeb's filtering stack: URL blocklist, trafilatura extraction, language ID, Gopher repetition and quality, "
    "C4 quality and FineWeb quality filters, over WARC files."
)
SHARED_OPTIONS = (ExtractionOptions, ResumeOptions)


class Options(PipelineOptions):
    """Options of the fineweb pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "dump",
            help="A Common Crawl dump such as CC-MAIN-2024-22: reads its WARC files under --cc_base unless --input "
            "is given, writes under <output>/<dump>/ and records the dump in each document's metadata.",
        )
        add_option(
            parser, "cc_base", default="s3://commoncrawl", help="Where Common Crawl lives. Default: s3://commoncrawl."
        )
        add_option(
            parser,
            "lid_model",
            default=default_lid_model(),
            help="fastText language-ID model (lid.176.ftz or .bin), path or fsspec URL. "
            "Default: the one `beamtrove assets fetch` stores in the asset cache.",
        )
        add_option(
            parser,
            "url_blocklist",
            default=default_url_blocklist(),
            help="Folder with the UT1 domains/urls lists and banned word lists, path or fsspec URL. "
            "Default: the one `beamtrove assets fetch` stores in the asset cache.",
        )
        add_option(
            parser,
            "languages",
            default="en",
            help="Comma-separated ISO 639 codes of the languages to keep; 'all' keeps any language. Default: en.",
        )
        add_option(
            parser, "language_threshold", type=float, default=0.65, help="Minimum language score. Default: 0.65."
        )


def dump_paths(dump: str, cc_base: str, output: str) -> tuple[str, str]:
    """The WARC glob of a Common Crawl dump and the output folder for it."""
    return join(cc_base, "crawl-data", dump, "segments", "*", "warc", "*.warc.gz"), join(output, dump)


def documents_path(options: PipelineOptions) -> str:
    """Where the kept documents land: ``documents/`` under the output, or under the dump's folder with --dump."""
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    output = dump_paths(own.dump, own.cc_base, common.output)[1] if own.dump else common.output
    return join(output, DOCUMENTS_DIR)


class _AddDump(beam.DoFn):
    """Records the Common Crawl dump in each document's metadata."""

    def __init__(self, dump: str):
        self._dump = dump

    def process(self, document: Document):
        yield dataclasses.replace(document, metadata={**document.metadata, "dump": self._dump})


def _filters(own: Options) -> list[DocumentFilter]:
    languages = None if own.languages == "all" else [code.strip() for code in own.languages.split(",")]
    return [
        LanguageFilter(own.lid_model, languages=languages, language_threshold=own.language_threshold),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        # FineWeb kept lines without terminal punctuation.
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
    ]


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the FineWeb steps to ``pipeline``.

    Raises:
        ValueError: Missing options.
        FileNotFoundError: The input matches no file, or the language model or
            URL blocklist is missing.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    inputs, output = input_files(options), common.output
    if not output:
        raise ValueError("fineweb needs --output.")
    if own.dump:
        dump_input, output = dump_paths(own.dump, own.cc_base, output)
        inputs = inputs or [dump_input]
        # Everything of the run, stats.json included, lives in the dump's folder.
        common.output = output
    if not inputs:
        raise ValueError("fineweb needs --input or --dump.")
    # Built here, so a missing model or blocklist fails before anything runs.
    url_filter = URLFilter(own.url_blocklist)
    later_filters = _filters(own)
    if options.view_as(ResumeOptions).resumable:
        steps = [Filter(rule) for rule in (url_filter, *later_filters)]
        process_resumably(
            pipeline,
            "fineweb",
            inputs,
            output,
            options,
            (Options, ExtractionOptions),
            before_extraction=[
                *([("AddDump", _AddDump(own.dump))] if own.dump else []),
                (steps[0].step, steps[0].step_fn()),
            ],
            after_extraction=[(step.step, step.step_fn()) for step in steps[1:]],
        )
        return

    pages, read_errors = read_pages(pipeline, inputs, options)
    if own.dump:
        pages = pages | "AddDump" >> beam.ParDo(_AddDump(own.dump))
    dead_letters = [read_errors]
    # Blocked pages are dropped before they cost an extraction.
    pages = _apply(pages, url_filter, output, dead_letters, options)
    documents, extract_errors = extract_text(pages, options)
    dead_letters.append(extract_errors)
    for rule in later_filters:
        documents = _apply(documents, rule, output, dead_letters, options)
    write_documents(documents, dead_letters, output, options)


def _apply(documents, rule: DocumentFilter, output: str, dead_letters: list, options: PipelineOptions):
    """Applies ``rule``, writes what it drops to ``excluded/<rule name>/``; returns the kept documents."""
    result = documents | rule.name >> Filter(rule)
    result.excluded | f"write_excluded_{rule.name}" >> WriteJsonl(
        join(output, EXCLUDED_DIR, rule.name),
        "part-${shard}.jsonl.gz",
        max_file_size=options.view_as(BeamtroveOptions).max_file_size,
    )
    dead_letters.append(result.dead_letters)
    return result.kept
