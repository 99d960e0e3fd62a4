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
import re

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

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

__all__ = ["SPEC", "FineWebOptions"]

_ADD_DUMP = "add_dump"


class FineWebOptions(PipelineOptions):
    """Options of the fineweb pipeline."""

    _add_argparse_args = declared(
        Option(
            "dump",
            "A Common Crawl dump such as CC-MAIN-2024-22: reads its WARC files under --cc_base unless --input "
            "is given, writes under <output>/<dump>/ and records the dump in each document's metadata.",
        ),
        Option("cc_base", "Where Common Crawl lives. Default: s3://commoncrawl.", default="s3://commoncrawl"),
    )


# One folder name: the dump's folder must stay inside --output.
_DUMP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _output(options: PipelineOptions) -> str | None:
    """``--output``, or the dump's folder under it with ``--dump``: everything of the run goes there.

    Raises:
        ValueError: ``--dump`` is not one folder name.
    """
    output, dump = options.view_as(BeamtroveOptions).output, options.view_as(FineWebOptions).dump
    if dump is not None and not _DUMP_NAME.fullmatch(dump):
        raise ValueError(
            f"--dump {dump!r} must be one folder name such as CC-MAIN-2024-22: letters, digits, '.', '_' and '-', "
            "starting with a letter or digit."
        )
    return join(output, dump) if output and dump else output


def _reader(options: PipelineOptions) -> ReadWarc:
    own = options.view_as(FineWebOptions)
    inputs = input_files(options)
    if not inputs and own.dump:
        inputs = [join(own.cc_base, "crawl-data", own.dump, "segments", "*", "warc", "*.warc.gz")]
    if not inputs:
        raise ValueError("fineweb needs --input or --dump.")
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


def _add_dump(options: PipelineOptions) -> DocumentStep | None:
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
    reader=_reader,
    steps=(
        _add_dump,
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
    output=_output,
    resumable=True,
    summary_stats=True,
)
