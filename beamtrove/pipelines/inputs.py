"""Options and reader construction shared by pipelines that read dataset files."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile, read_input_ranges
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.transforms.readers import FileReader, ReadWarc, reader_for

__all__ = ["RowInputOptions", "document_reader", "input_files"]


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


def input_files(options: PipelineOptions) -> list[str | InputFile]:
    """What the pipeline reads: the ``--input`` patterns, or the files ``--input_ranges`` lists.

    Empty when neither is given.

    Raises:
        ValueError: Both are given, or the ranges file is malformed.
        FileNotFoundError: The ranges file does not exist.
    """
    common = options.view_as(BeamtroveOptions)
    if not common.input_ranges:
        return list(common.input or [])
    if common.input:
        raise ValueError("--input_ranges replaces --input: pass one of them.")
    return read_input_ranges(common.input_ranges)


def document_reader(options: PipelineOptions, *, allow_warc: bool = True) -> FileReader:
    """The reader the input options ask for, with the input already matched.

    Raises:
        ValueError: Unknown or contradictory input options.
        FileNotFoundError: The input matches no file.
    """
    common = options.view_as(BeamtroveOptions)
    rows = options.view_as(RowInputOptions)
    inputs = input_files(options)
    reader_class = reader_for(rows.input_format, [getattr(path, "url", path) for path in inputs])
    row_options = {k: v for k, v in (("text_key", rows.text_key), ("id_key", rows.id_key)) if v is not None}
    if reader_class is ReadWarc:
        if not allow_warc:
            raise ValueError("This pipeline reads extracted text (JSONL, Parquet or CSV), not WARC files.")
        if row_options:
            raise ValueError("--text_key and --id_key apply to JSONL, Parquet and CSV input, not WARC.")
    return reader_class(
        inputs, skip=common.skip, limit=common.limit, progress_interval=common.progress_interval, **row_options
    )
