"""``beamtrove run convert``: read any supported input, write JSONL or Parquet.

WARC/ARC/WET, JSONL, Parquet or CSV in; documents out in DataTrove's layout,
directly under ``--output``, with dead letters under ``<output>/dead_letters/``
and ``stats.json``.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile
from beamtrove.layout import PART_FILES, WRITE
from beamtrove.options import BeamtroveOptions, Option, declared
from beamtrove.pipelines.common import RowInputOptions, document_reader
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.writers import WriteJsonl, WriteParquet

__all__ = ["SPEC", "ConvertOptions"]


class ConvertOptions(PipelineOptions):
    """Options of the convert pipeline."""

    _add_argparse_args = declared(
        Option(
            "filename_template",
            "Output file names relative to --output, with ${shard} and any ${metadata_key}. "
            "Default: part-${shard}.jsonl.gz or part-${shard}.parquet.",
        ),
    )


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    """JSONL or Parquet files under ``--output``; only JSONL part files are a documents folder shards can merge."""
    own = options.view_as(ConvertOptions)
    max_file_size = options.view_as(BeamtroveOptions).max_file_size
    if SPEC.output_format(options) == "parquet":
        template = own.filename_template or "part-${shard}.parquet"
        return Sink(WRITE, WriteParquet(output, template, max_file_size=max_file_size))
    writer = WriteJsonl(output, own.filename_template or PART_FILES, max_file_size=max_file_size)
    return Sink(WRITE, writer, None if own.filename_template else output)


SPEC = PipelineSpec(
    name="convert",
    description="Read WARC/JSONL/Parquet/CSV files and write the documents as JSONL or Parquet.",
    options=(ConvertOptions, RowInputOptions),
    reader=document_reader,
    steps=(),
    sink=_sink,
    summary_stats=True,
    output_formats=("jsonl", "parquet"),
)
