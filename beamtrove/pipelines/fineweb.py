"""``beamtrove run fineweb``: the FineWeb filtering stack over WARC files.

Read WARC → URL filter → extract → language → Gopher repetition → Gopher
quality → C4 quality → FineWeb quality → JSONL, as FineWeb was built
(Penedo et al. 2024) and as DataTrove's FineWeb example configures it. A
cheap language screen after the URL filter spares extraction the pages
clearly in none of ``--languages`` (unless ``--no_language_screen``, or with
``--languages all``); the documents kept are the same. Writes
``documents/``, ``excluded/<filter>/`` (each dropped document with its
``filter_reason``), ``dead_letters/`` and ``stats.json`` under the output, or
under ``<output>/<dump>/`` with ``--dump``.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.commoncrawl import CC_BASE, DumpFiles, check_dump_name, parse_line_range
from beamtrove.configuration import Range
from beamtrove.document import Document
from beamtrove.fs import join
from beamtrove.metrics import StepMetrics
from beamtrove.options import BeamtroveOptions, Option, WordSplitterOptions, declared
from beamtrove.pipelines.common import ExtractionOptions, documents_sink, input_files, warc_reader
from beamtrove.pipelines.spec import DocumentStep, PipelineSpec
from beamtrove.pipelines.steps import (
    LanguageOptions,
    LanguageScreenOptions,
    URLFilterOptions,
    extraction,
    fixed_filter,
    language_filter,
    language_screen,
    url_filter,
    word_counting_filter,
)
from beamtrove.transforms.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from beamtrove.transforms.readers import ReadWarc

__all__ = ["SPEC", "FineWebOptions", "add_dump", "dump_output", "pages_reader"]

_ADD_DUMP = "add_dump"


def _check_line_range(value: str, flag: str) -> None:
    try:
        parse_line_range(value)
    except ValueError as wrong:
        raise ValueError(f"{flag}: {wrong}") from None


class FineWebOptions(PipelineOptions):
    """Options of the fineweb pipeline."""

    _add_argparse_args = declared(
        Option(
            "dump",
            "A Common Crawl dump such as CC-MAIN-2024-22: reads the WARC files its paths file lists under "
            "--cc_base unless --input is given, writes under <output>/<dump>/ and records the dump in each "
            "document's metadata.",
        ),
        Option(
            "cc_base",
            f"Where Common Crawl is read from with --dump: {CC_BASE} (no credentials needed), s3://commoncrawl "
            f"(AWS credentials), or any URL or folder laid out like them. Default: {CC_BASE}.",
            default=CC_BASE,
        ),
        Option(
            "cc_range",
            "With --dump: read only lines START:END of the dump's paths file (0-based, END excluded, either left "
            "out), e.g. 0:45000 and 45000: to split a dump across two launches.",
            check=_check_line_range,
        ),
        Option(
            "cc_files",
            "With --dump: read this many of its files (of --cc_range's, when given), sampled with --cc_seed: the "
            "same files on every runner, and a larger count reads them and more.",
            int,
            range=Range(1),
        ),
        Option("cc_seed", "With --cc_files: the seed of the sample. Default: 0.", int, 0, range=Range(0)),
    )


def dump_output(options: PipelineOptions) -> str | None:
    """``--output``, or the dump's folder under it with ``--dump``: everything of the run goes there.

    Raises:
        ValueError: ``--dump`` is not one folder name.
    """
    output, dump = options.view_as(BeamtroveOptions).output, options.view_as(FineWebOptions).dump
    if dump is not None:
        check_dump_name(dump)
    return join(output, dump) if output and dump else output


def _dump_files(options: PipelineOptions) -> DumpFiles | None:
    """The files of ``--dump`` the options select; None when the input is ``--input``.

    Raises:
        ValueError: A selection of the dump's files is given without reading the dump.
    """
    own = options.view_as(FineWebOptions)
    selection = [f"--{name}" for name in ("cc_range", "cc_files") if getattr(own, name) is not None]
    if input_files(options) or not own.dump:
        if selection:
            raise ValueError(
                f"{' and '.join(selection)} select files of --dump's paths file; with "
                f"{'--input' if own.dump else 'no --dump'}, there is none to select from."
            )
        return None
    start, end = parse_line_range(own.cc_range) if own.cc_range else (0, None)
    return DumpFiles(own.dump, own.cc_base, "warc", start, end, own.cc_files, own.cc_seed)


def pages_reader(options: PipelineOptions) -> ReadWarc:
    """The WARC files of ``--dump`` (as the options select them), else those of ``--input``.

    Raises:
        ValueError: Neither is given, or a selection of the dump's files without reading it.
    """
    dump_files = _dump_files(options)
    inputs = [dump_files] if dump_files else input_files(options)
    if not inputs:
        raise ValueError("This pipeline needs --input or --dump.")
    return warc_reader(options, inputs)


class _AddDumpFn(beam.DoFn):
    """Records the Common Crawl dump in each document's metadata."""

    def __init__(self, dump: str, step: str):
        self._dump = dump
        self._metrics = StepMetrics(step)

    def process(self, document: Document):
        self._metrics.received()
        self._metrics.emitted()
        yield dataclasses.replace(document, metadata={**document.metadata, "dump": self._dump})


def add_dump(options: PipelineOptions) -> DocumentStep | None:
    """The step recording ``--dump`` in each document's metadata; None without ``--dump``."""
    dump = options.view_as(FineWebOptions).dump
    return DocumentStep(_ADD_DUMP, _AddDumpFn(dump, _ADD_DUMP)) if dump else None


SPEC = PipelineSpec(
    name="fineweb",
    description="FineWeb's filtering stack: URL blocklist, trafilatura extraction, language ID, Gopher repetition "
    "and quality, C4 quality and FineWeb quality filters, over WARC files.",
    options=(
        FineWebOptions,
        URLFilterOptions,
        LanguageOptions,
        LanguageScreenOptions,
        ExtractionOptions,
        WordSplitterOptions,
    ),
    reader=pages_reader,
    steps=(
        add_dump,
        # Blocked pages are dropped before they cost an extraction.
        url_filter,
        # Pages clearly in another language are dropped before they cost an extraction.
        language_screen,
        extraction,
        language_filter,
        word_counting_filter(GopherRepetitionFilter),
        word_counting_filter(GopherQualityFilter),
        # FineWeb kept lines without terminal punctuation.
        fixed_filter(C4QualityFilter, filter_no_terminal_punct=False),
        word_counting_filter(FineWebQualityFilter),
    ),
    sink=documents_sink,
    output=dump_output,
    resumable=True,
    summary_stats=True,
)
