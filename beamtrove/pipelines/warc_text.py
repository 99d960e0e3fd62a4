"""Steps the WARC-to-text pipelines share: reading, extraction and their outputs."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.dead_letter import DEAD_LETTER_DIR
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.transforms.extractors import Extract, Resiliparse, Trafilatura
from beamtrove.transforms.readers import ReadWarc
from beamtrove.transforms.writers import WriteDeadLetters, WriteJsonl

__all__ = ["DOCUMENTS_DIR", "ExtractionOptions", "extract_text", "read_pages", "write_documents"]

DOCUMENTS_DIR = "documents"
_EXTRACTORS = {"trafilatura": Trafilatura, "resiliparse": Resiliparse}


class ExtractionOptions(PipelineOptions):
    """How pages are read and their text extracted."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "extractor",
            default="trafilatura",
            choices=sorted(_EXTRACTORS),
            help="Main-text extractor: trafilatura (DataTrove's and FineWeb's) or resiliparse (much faster). "
            "Default: trafilatura.",
        )
        add_option(
            parser,
            "extract_timeout",
            type=float,
            default=1.0,
            help="Seconds one page may take to extract before it becomes a dead letter; 0 runs the extractor "
            "in the worker with no limit. Default: 1.",
        )
        add_option(
            parser, "max_payload_bytes", type=int, help="Skip WARC payloads larger than this (skipped.too_large)."
        )


def read_pages(pipeline: beam.Pipeline, input_patterns: list[str], options: PipelineOptions):
    """Reads the HTML pages of the WARC files: ``(pages, dead_letters)``."""
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(ExtractionOptions)
    reader = ReadWarc(
        input_patterns,
        max_payload_bytes=own.max_payload_bytes,
        skip=common.skip,
        limit=common.limit,
        progress_interval=common.progress_interval,
    )
    return pipeline | "ReadWarc" >> reader.with_dead_letters()


def extract_text(pages: beam.PCollection, options: PipelineOptions):
    """Extracts the pages' main text with the chosen extractor: ``(documents, dead_letters)``."""
    own = options.view_as(ExtractionOptions)
    extractor = _EXTRACTORS[own.extractor]()
    return pages | "extract" >> Extract(extractor, timeout=own.extract_timeout or None).with_dead_letters()


def write_documents(documents, dead_letters: list, output: str, options: PipelineOptions) -> None:
    """Writes the documents under ``<output>/documents/`` and all dead letters under ``<output>/dead_letters/``."""
    max_file_size = options.view_as(BeamtroveOptions).max_file_size
    documents | "WriteDocuments" >> WriteJsonl(
        join(output, DOCUMENTS_DIR), "part-${shard}.jsonl.gz", max_file_size=max_file_size
    )
    (
        dead_letters
        | "FlattenDeadLetters" >> beam.Flatten()
        | "WriteDeadLetters" >> WriteDeadLetters(join(output, DEAD_LETTER_DIR))
    )
