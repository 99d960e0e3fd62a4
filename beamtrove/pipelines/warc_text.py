"""Steps the WARC-to-text pipelines share: reading, extraction and their outputs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.dead_letter import DEAD_LETTER_DIR
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.resume import ResumeOptions, configuration, pending_inputs
from beamtrove.transforms.extractors import Extract, Resiliparse, Trafilatura
from beamtrove.transforms.per_input import DOCUMENTS_DIR, ProcessInputs
from beamtrove.transforms.readers import ReadWarc
from beamtrove.transforms.writers import WriteDeadLetters, WriteJsonl

__all__ = [
    "DOCUMENTS_DIR",
    "ExtractionOptions",
    "extract_text",
    "process_resumably",
    "read_pages",
    "write_documents",
]

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


def _warc_reader(input_patterns: list, options: PipelineOptions) -> ReadWarc:
    common = options.view_as(BeamtroveOptions)
    return ReadWarc(
        input_patterns,
        max_payload_bytes=options.view_as(ExtractionOptions).max_payload_bytes,
        skip=common.skip,
        limit=common.limit,
        progress_interval=common.progress_interval,
    )


def _extraction(options: PipelineOptions) -> Extract:
    own = options.view_as(ExtractionOptions)
    return Extract(_EXTRACTORS[own.extractor](), timeout=own.extract_timeout or None)


def read_pages(pipeline: beam.Pipeline, input_patterns: list, options: PipelineOptions):
    """Reads the HTML pages of the WARC files: ``(pages, dead_letters)``."""
    return pipeline | "ReadWarc" >> _warc_reader(input_patterns, options).with_dead_letters()


def extract_text(pages: beam.PCollection, options: PipelineOptions):
    """Extracts the pages' main text with the chosen extractor: ``(documents, dead_letters)``."""
    return pages | "extract" >> _extraction(options).with_dead_letters()


def process_resumably(
    pipeline: beam.Pipeline,
    pipeline_name: str,
    input_patterns: list,
    output: str,
    options: PipelineOptions,
    option_classes: Iterable[type[PipelineOptions]],
    *,
    before_extraction: Sequence[tuple[str, beam.DoFn]] = (),
    after_extraction: Sequence[tuple[str, beam.DoFn]] = (),
) -> None:
    """Reads the WARC files that ``output`` has not completed and processes them one input file at a time.

    Each file's pages go through ``before_extraction``, the extraction the
    options choose, then ``after_extraction`` (``(name, DoFn)`` steps); see
    :mod:`beamtrove.resume`. ``option_classes`` are those whose values must
    not change between reruns.

    Raises:
        ValueError: --skip or --limit is given, or the output holds a run
            with another configuration.
    """
    common = options.view_as(BeamtroveOptions)
    if common.skip or common.limit is not None:
        raise ValueError("--skip and --limit count documents across all inputs; they do not apply to --resumable.")
    reader = _warc_reader(input_patterns, options)
    config = configuration(pipeline_name, options, option_classes)
    restart = options.view_as(ResumeOptions).restart
    pending, config_sha256 = pending_inputs(reader.files, output, config, restart=restart)
    steps = [*before_extraction, ("extract", _extraction(options).step_fn()), *after_extraction]
    pipeline | "ProcessInputs" >> ProcessInputs(reader, pending, steps, output, config_sha256)


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
