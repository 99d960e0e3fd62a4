"""What pipelines share: their input options and readers, and the writers of their outputs.

The writers put each kind of output where :mod:`beamtrove.layout` says: kept
documents in ``documents/``, what a step excluded in ``excluded/<step>/`` and
dead letters in ``dead_letters/``. The per-document steps pipelines share
are in :mod:`beamtrove.pipelines.steps`. Every command imports this module,
so it leaves extraction libraries (trafilatura, Resiliparse) and model
libraries (fastText, spaCy) to the steps that load them; it imports Hugging
Face ``tokenizers``, which the token writers' package loads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import Range
from beamtrove.fs import InputFile, join
from beamtrove.input_ranges import read_input_ranges
from beamtrove.layout import (
    DEAD_LETTERS_DIR,
    DOCUMENTS_DIR,
    EXCLUDED_DIR,
    PART_FILES,
    WRITE_DOCUMENTS,
)
from beamtrove.network import RetryPolicy
from beamtrove.options import BeamtroveOptions, Option, declared
from beamtrove.pipelines.spec import Sink
from beamtrove.run_output import documents_of_run
from beamtrove.transforms.readers import FileReader, ReadHuggingFace, ReadWarc, reader_for
from beamtrove.transforms.tokens import ChunkShuffle, WriteTokenShards
from beamtrove.transforms.writers import WriteDeadLetters, WriteJsonl

__all__ = [
    "EXTRACTORS",
    "ExtractionOptions",
    "RowInputOptions",
    "ShardOptions",
    "dead_letters_writer",
    "document_reader",
    "documents_sink",
    "excluded_writer",
    "input_files",
    "reader_settings",
    "required_inputs",
    "row_reader",
    "token_shards_sink",
    "warc_reader",
]

_LOGGER = logging.getLogger(__name__)

#: The extractors ``--extractor`` chooses from (see :mod:`beamtrove.pipelines.steps`).
EXTRACTORS = ("readability", "resiliparse", "trafilatura")


class RowInputOptions(PipelineOptions):
    """Input format and the fields of table rows."""

    _add_argparse_args = declared(
        Option(
            "input_format",
            "Input format; 'auto' tells it from the file names. Default: auto.",
            default="auto",
            choices=("auto", "warc", "jsonl", "parquet", "csv", "ipc", "hf"),
        ),
        Option("text_key", "Field holding the text in JSONL/Parquet/CSV/IPC/hf input. Default: text."),
        Option("id_key", "Field holding the id in JSONL/Parquet/CSV/IPC/hf input. Default: id."),
        Option(
            "hf_split",
            "Split of the Hugging Face dataset to read (--input_format hf); may be left out when it has one.",
        ),
        Option(
            "hf_config",
            "Configuration of the Hugging Face dataset named by --input (owner/name, found in the local datasets "
            "cache); may be left out when the cache holds one.",
        ),
    )


class ExtractionOptions(PipelineOptions):
    """How pages are read and their text extracted."""

    _add_argparse_args = declared(
        Option(
            "extractor",
            "Main-text extractor: trafilatura (DataTrove's and FineWeb's), resiliparse (much faster) or "
            "readability (DataTrove's ReadabilityInscriptis: readability-lxml and inscriptis). Default: trafilatura.",
            default="trafilatura",
            choices=EXTRACTORS,
        ),
        Option(
            "extract_timeout",
            "CPU seconds one page may take to extract before it becomes a dead letter (errors.timeout); "
            "CPU time does not grow with the machine's load, so neither does what is kept. A page still "
            "unfinished after max(30, 30 x this) wall-clock seconds (a hang) is a timeout too. 0 runs the "
            "extractor in the worker with no limit. Default: 1.",
            float,
            1.0,
            range=Range(0),
        ),
        Option("max_payload_bytes", "Skip WARC payloads larger than this (skipped.too_large).", int, range=Range(1)),
        Option(
            "no_include_tables",
            "Leave the text of HTML tables out (trafilatura). By default tables are kept, as trafilatura, "
            "DataTrove and FineWeb keep them.",
            flag=True,
        ),
    )


class ShardOptions(PipelineOptions):
    """How token shards are laid out."""

    _add_argparse_args = declared(
        Option(
            "num_shards", "Shards to spread documents over; one worker writes each. Default: 1.", int, 1, range=Range(1)
        ),
        Option(
            "shuffle_seed",
            "Shuffle documents with this seed (the same seed gives the same files). "
            "Default: no shuffle; documents stay in id order, which is input order for files read without an id field.",
            int,
            # numpy's default_rng takes no negative seed.
            range=Range(0),
        ),
        Option(
            "max_tokens_per_file",
            "Split shards so that no file holds more tokens (unless one document does). Default: no limit.",
            int,
            range=Range(1),
        ),
        Option("file_prefix", "Start of the shard file names. Default: tokens.", default="tokens"),
    )


def input_files(options: PipelineOptions) -> list[str | InputFile]:
    """What the pipeline reads: the ``--input`` patterns, or the files ``--input_ranges`` lists.

    The output folder of a beamtrove run stands for its ``documents/``.
    Empty when neither is given.

    Raises:
        ValueError: Both are given, or the ranges file is malformed.
        FileNotFoundError: The ranges file does not exist.
    """
    common = options.view_as(BeamtroveOptions)
    if not common.input_ranges:
        return [documents_of_run(pattern) for pattern in common.input or []]
    if common.input:
        raise ValueError("--input_ranges replaces --input: pass one of them.")
    return read_input_ranges(common.input_ranges)


def required_inputs(options: PipelineOptions) -> list[str | InputFile]:
    """:func:`input_files`, which must not be empty.

    Raises:
        ValueError: No input is given, or as :func:`input_files`.
        FileNotFoundError: As :func:`input_files`.
    """
    inputs = input_files(options)
    if not inputs:
        raise ValueError("No input given: pass --input (files, directories or glob patterns).")
    return inputs


def reader_settings(options: PipelineOptions) -> dict:
    """The keyword arguments every reader takes from the common options: skip, limit, progress interval, retries."""
    common = options.view_as(BeamtroveOptions)
    retries = RetryPolicy(attempts=common.read_attempts, first_wait=common.retry_wait, read_timeout=common.read_timeout)
    return {
        "skip": common.skip,
        "limit": common.limit,
        "progress_interval": common.progress_interval,
        "retries": retries,
    }


def document_reader(options: PipelineOptions, *, allow_warc: bool = True) -> FileReader:
    """The reader the input options ask for, with the input already matched.

    Raises:
        ValueError: No input, or unknown or contradictory input options.
        FileNotFoundError: The input matches no file.
    """
    rows = options.view_as(RowInputOptions)
    inputs = required_inputs(options)
    reader_class = reader_for(rows.input_format, [getattr(path, "url", path) for path in inputs])
    row_options = {k: v for k, v in (("text_key", rows.text_key), ("id_key", rows.id_key)) if v is not None}
    if reader_class is ReadWarc:
        if not allow_warc:
            raise ValueError("This pipeline reads extracted text (JSONL, Parquet or CSV), not WARC files.")
        if row_options:
            raise ValueError("--text_key and --id_key apply to JSONL, Parquet and CSV input, not WARC.")
    if reader_class is ReadHuggingFace:
        row_options.update(split=rows.hf_split, config=rows.hf_config)
    elif rows.hf_split is not None or rows.hf_config is not None:
        raise ValueError("--hf_split and --hf_config apply to Hugging Face datasets (--input_format hf) only.")
    return reader_class(inputs, **reader_settings(options), **row_options)


def row_reader(options: PipelineOptions) -> FileReader:
    """The reader of extracted documents (JSONL, Parquet or CSV) the input options ask for."""
    return document_reader(options, allow_warc=False)


def warc_reader(options: PipelineOptions, inputs: Sequence[str | InputFile] | None = None) -> ReadWarc:
    """The reader of the HTML pages of WARC files: ``inputs``, else the input options'.

    Raises:
        ValueError: No input.
        FileNotFoundError: The input matches no file.
    """
    max_payload_bytes = options.view_as(ExtractionOptions).max_payload_bytes
    return ReadWarc(inputs or required_inputs(options), max_payload_bytes=max_payload_bytes, **reader_settings(options))


def _part_files(directory: str, options: PipelineOptions) -> WriteJsonl:
    """Documents as JSONL part files in ``directory``, each file up to ``--max_file_size``."""
    return WriteJsonl(directory, PART_FILES, max_file_size=options.view_as(BeamtroveOptions).max_file_size)


def documents_sink(options: PipelineOptions, output: str, files: Sequence[InputFile] = ()) -> Sink:
    """Kept documents as JSONL part files in ``<output>/documents/``."""
    directory = join(output, DOCUMENTS_DIR)
    return Sink(WRITE_DOCUMENTS, _part_files(directory, options), directory)


def excluded_writer(output: str, step: str, options: PipelineOptions) -> WriteJsonl:
    """Writes what ``step`` excluded to ``<output>/excluded/<step>/``."""
    return _part_files(join(output, EXCLUDED_DIR, step), options)


def dead_letters_writer(output: str) -> WriteDeadLetters:
    """Writes dead letters to ``<output>/dead_letters/``."""
    return WriteDeadLetters(join(output, DEAD_LETTERS_DIR))


def token_shards_sink(
    options: PipelineOptions,
    output: str,
    tokenizer: str,
    *,
    file_format: str = "ds",
    chunks: ChunkShuffle | None = None,
) -> Sink:
    """Token files (``.ds`` shards, or Megatron datasets) laid out as the shard options ask, directly in ``output``.

    ``chunks`` shuffles chunks of tokens instead of documents (see
    :class:`~beamtrove.transforms.tokens.ChunkShuffle`).

    Raises:
        ValueError: Bad shard options.
    """
    shards = options.view_as(ShardOptions)
    writer = WriteTokenShards(
        output,
        tokenizer=tokenizer,
        file_format=file_format,
        num_shards=shards.num_shards,
        seed=shards.shuffle_seed,
        chunks=chunks,
        max_tokens_per_file=shards.max_tokens_per_file,
        prefix=shards.file_prefix,
    )
    return Sink("write_tokens", writer, whole_input=True)
