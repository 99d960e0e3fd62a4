"""``beamtrove run convert``: read any supported input, write JSONL or Parquet.

WARC/ARC/WET, JSONL, Parquet or CSV in; documents out in DataTrove's layout,
with dead letters under ``<output>/dead_letters/`` and ``stats.json``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.dead_letter import DEAD_LETTER_DIR
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.pipelines.inputs import RowInputOptions, document_reader, input_files
from beamtrove.transforms.writers import WriteDeadLetters, WriteJsonl, WriteParquet

__all__ = ["DESCRIPTION", "SHARED_OPTIONS", "Options", "build", "documents_path"]

DESCRIPTION = "Read WARC/JSONL/Parquet/CSV files and write the documents as JSONL or Parquet."
SHARED_OPTIONS = (RowInputOptions,)


class Options(PipelineOptions):
    """Options of the convert pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(parser, "output_format", default="jsonl", choices=("jsonl", "parquet"), help="Default: jsonl.")
        add_option(
            parser,
            "filename_template",
            help="Output file names relative to --output, with ${shard} and any ${metadata_key}. "
            "Default: part-${shard}.jsonl.gz or part-${shard}.parquet.",
        )


def documents_path(options: PipelineOptions) -> str:
    """Where the documents land: JSONL part files directly under ``--output``.

    Raises:
        ValueError: The output is Parquet or uses a file name template, which
            shard workers cannot merge.
    """
    own = options.view_as(Options)
    if own.output_format != "jsonl" or own.filename_template:
        raise ValueError("Shard outputs are merged as JSONL part files: drop --output_format and --filename_template.")
    return options.view_as(BeamtroveOptions).output


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the convert steps to ``pipeline``.

    Raises:
        ValueError: Missing or contradictory options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    if not input_files(options) or not common.output:
        raise ValueError("convert needs --input and --output.")
    reader = document_reader(options)
    if own.output_format == "parquet":
        writer = WriteParquet(
            common.output, own.filename_template or "part-${shard}.parquet", max_file_size=common.max_file_size
        )
    else:
        writer = WriteJsonl(
            common.output, own.filename_template or "part-${shard}.jsonl.gz", max_file_size=common.max_file_size
        )
    documents, dead_letters = pipeline | "Read" >> reader.with_dead_letters()
    documents | "Write" >> writer
    dead_letters | "WriteDeadLetters" >> WriteDeadLetters(join(common.output, DEAD_LETTER_DIR))
