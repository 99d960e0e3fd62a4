"""``beamtrove run extract``: WARC pages to extracted text, with no filtering.

For users who filter elsewhere, and as the input of dedup and tokenization
runs. Writes ``<output>/documents/``, ``<output>/dead_letters/`` and
``stats.json``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions
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

__all__ = ["DESCRIPTION", "SHARED_OPTIONS", "Options", "build", "documents_path"]

DESCRIPTION = "Extract the main text of the HTML pages in WARC files and write it as JSONL."
SHARED_OPTIONS = (ExtractionOptions, ResumeOptions)


class Options(PipelineOptions):
    """The extract pipeline has no options beyond the extraction ones."""


def documents_path(options: PipelineOptions) -> str:
    """Where the extracted documents land: ``<output>/documents/``."""
    return join(options.view_as(BeamtroveOptions).output, DOCUMENTS_DIR)


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the extract steps to ``pipeline``.

    Raises:
        ValueError: Missing options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    inputs = input_files(options)
    if not inputs or not common.output:
        raise ValueError("extract needs --input and --output.")
    if options.view_as(ResumeOptions).resumable:
        process_resumably(pipeline, "extract", inputs, common.output, options, (Options, ExtractionOptions))
        return
    pages, read_errors = read_pages(pipeline, inputs, options)
    documents, extract_errors = extract_text(pages, options)
    write_documents(documents, [read_errors, extract_errors], common.output, options)
