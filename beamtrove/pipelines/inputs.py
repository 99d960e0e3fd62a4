"""Options and reader construction shared by pipelines that read dataset files."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.transforms.readers import FileReader, ReadWarc, reader_for

__all__ = ["RowInputOptions", "document_reader"]


class RowInputOptions(PipelineOptions):
    """Input format and the fields of table rows."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "input_format",
            default="auto",
            choices=("auto", "warc", "jsonl", "parquet", "csv"),
            help="Input format; 'auto' tells it from the file names. Default: auto.",
        )
        add_option(parser, "text_key", help="Field holding the text in JSONL/Parquet/CSV input. Default: text.")
        add_option(parser, "id_key", help="Field holding the id in JSONL/Parquet/CSV input. Default: id.")


def document_reader(options: PipelineOptions, *, allow_warc: bool = True) -> FileReader:
    """The reader the input options ask for, with the input already matched.

    Raises:
        ValueError: Unknown or contradictory input options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    rows = options.view_as(RowInputOptions)
    reader_class = reader_for(rows.input_format, common.input)
    row_options = {k: v for k, v in (("text_key", rows.text_key), ("id_key", rows.id_key)) if v is not None}
    if reader_class is ReadWarc:
        if not allow_warc:
            raise ValueError("This pipeline reads extracted text (JSONL, Parquet or CSV), not WARC files.")
        if row_options:
            raise ValueError("--text_key and --id_key apply to JSONL, Parquet and CSV input, not WARC.")
    return reader_class(
        common.input, skip=common.skip, limit=common.limit, progress_interval=common.progress_interval, **row_options
    )
