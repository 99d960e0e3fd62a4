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
from beamtrove.transforms.readers import ReadWarc, reader_for
from beamtrove.transforms.writers import WriteDeadLetters, WriteJsonl, WriteParquet

__all__ = ["DESCRIPTION", "SHARED_OPTIONS", "Options", "build"]

DESCRIPTION = "Read WARC/JSONL/Parquet/CSV files and write the documents as JSONL or Parquet."
SHARED_OPTIONS = ()


class Options(PipelineOptions):
    """Options of the convert pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "input_format",
            default="auto",
            choices=("auto", "warc", "jsonl", "parquet", "csv"),
            help="Input format; 'auto' tells it from the file names. Default: auto.",
        )
        add_option(parser, "output_format", default="jsonl", choices=("jsonl", "parquet"), help="Default: jsonl.")
        add_option(
            parser,
            "filename_template",
            help="Output file names relative to --output, with ${shard} and any ${metadata_key}. "
            "Default: part-${shard}.jsonl.gz or part-${shard}.parquet.",
        )
        add_option(parser, "text_key", help="Field holding the text in JSONL/Parquet/CSV input. Default: text.")
        add_option(parser, "id_key", help="Field holding the id in JSONL/Parquet/CSV input. Default: id.")


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the convert steps to ``pipeline``.

    Raises:
        ValueError: Missing or contradictory options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    if not common.input or not common.output:
        raise ValueError("convert needs --input and --output.")
    reader_class = reader_for(own.input_format, common.input)
    row_options = {k: v for k, v in (("text_key", own.text_key), ("id_key", own.id_key)) if v is not None}
    if row_options and reader_class is ReadWarc:
        raise ValueError("--text_key and --id_key apply to JSONL, Parquet and CSV input, not WARC.")
    reader = reader_class(
        common.input, skip=common.skip, limit=common.limit, progress_interval=common.progress_interval, **row_options
    )
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
