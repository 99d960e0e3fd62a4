"""``beamtrove run tokenize``: JSONL/Parquet/CSV documents into ``.ds`` token shards.

The shards (``<prefix>_<shard>_<part>.ds`` with ``.index``, ``.metadata`` and,
with ``--loss_mask``, ``.loss``) land directly in ``--output``, where
DataTrove's merger and readers find them; dead letters go to
``<output>/dead_letters/`` and the stats (tokens, documents) to
``stats.json``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.dead_letter import DEAD_LETTER_DIR
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.pipelines.inputs import RowInputOptions, document_reader, input_files
from beamtrove.transforms.tokens import DEFAULT_EOS_TOKEN, Tokenize, WriteTokenShards
from beamtrove.transforms.writers import WriteDeadLetters

__all__ = ["DESCRIPTION", "GLOBAL_STEPS", "SHARED_OPTIONS", "Options", "ShardOptions", "build", "shard_writer"]

DESCRIPTION = "Tokenize JSONL/Parquet/CSV documents into DataTrove-compatible .ds token shards."


GLOBAL_STEPS = "token shards are cut, and optionally shuffled, across the whole input"


class ShardOptions(PipelineOptions):
    """How token shards are laid out."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "num_shards",
            type=int,
            default=1,
            help="Shards to spread documents over; one worker writes each. Default: 1.",
        )
        add_option(
            parser,
            "shuffle_seed",
            type=int,
            help="Shuffle documents with this seed (the same seed gives the same files). "
            "Default: no shuffle; documents stay in id order, which is input order for files read without an id field.",
        )
        add_option(
            parser,
            "max_tokens_per_file",
            type=int,
            help="Split shards so that no file holds more tokens (unless one document does). Default: no limit.",
        )
        add_option(parser, "file_prefix", default="tokens", help="Start of the shard file names. Default: tokens.")
        add_option(
            parser,
            "overwrite",
            action="store_true",
            help="Replace token files of an earlier run in --output (removed once the new ones are complete).",
        )


SHARED_OPTIONS = (ShardOptions, RowInputOptions)


class Options(PipelineOptions):
    """Options of the tokenize pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(parser, "tokenizer", help="Path or URL of a HuggingFace tokenizer.json (required).")
        add_option(
            parser,
            "eos_token",
            default=DEFAULT_EOS_TOKEN,
            help=f"Token appended to every document; '' for none. Default: {DEFAULT_EOS_TOKEN}.",
        )
        add_option(parser, "bos_token", default="", help="Token prepended to every document. Default: none.")
        add_option(
            parser,
            "loss_mask",
            action="store_true",
            help="Write .ds.loss files, masking the character ranges in each document's no_loss_ranges metadata.",
        )
        add_option(
            parser, "tokenize_batch_size", type=int, default=1000, help="Documents encoded together. Default: 1000."
        )


def shard_writer(options: PipelineOptions, tokenizer: str) -> WriteTokenShards:
    """The shard sink the shard options ask for, writing into ``--output``.

    Raises:
        ValueError: Bad shard options.
        FileExistsError: ``--output`` holds token files and ``--overwrite`` is off.
    """
    shards = options.view_as(ShardOptions)
    return WriteTokenShards(
        options.view_as(BeamtroveOptions).output,
        tokenizer=tokenizer,
        num_shards=shards.num_shards,
        seed=shards.shuffle_seed,
        max_tokens_per_file=shards.max_tokens_per_file,
        prefix=shards.file_prefix,
        overwrite=shards.overwrite,
    )


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the tokenize steps to ``pipeline``.

    Raises:
        ValueError: Missing or contradictory options.
        FileNotFoundError: The input or the tokenizer does not exist.
        FileExistsError: ``--output`` holds token files and ``--overwrite`` is off.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    if not input_files(options) or not common.output or not own.tokenizer:
        raise ValueError("tokenize needs --input, --output and --tokenizer.")
    reader = document_reader(options, allow_warc=False)
    tokenize = Tokenize(
        own.tokenizer,
        eos_token=own.eos_token,
        bos_token=own.bos_token,
        loss_mask=own.loss_mask,
        batch_size=own.tokenize_batch_size,
    ).with_dead_letters()
    writer = shard_writer(options, own.tokenizer)
    documents, read_errors = pipeline | "Read" >> reader.with_dead_letters()
    tokenized, tokenize_errors = documents | "Tokenize" >> tokenize
    tokenized | "WriteTokens" >> writer
    (
        (read_errors, tokenize_errors)
        | "MergeDeadLetters" >> beam.Flatten()
        | "WriteDeadLetters" >> WriteDeadLetters(join(common.output, DEAD_LETTER_DIR))
    )
