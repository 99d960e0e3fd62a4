"""``beamtrove run tokenize``: JSONL/Parquet/CSV documents into ``.ds`` token shards or Megatron datasets.

The shards (``<prefix>_<shard>_<part>.ds`` with ``.index``, ``.metadata`` and,
with ``--loss_mask``, ``.loss``) land directly in ``--output``, where
DataTrove's merger and readers find them. With ``--output_format megatron`` each
shard is a Megatron-LM dataset instead, ``<prefix>_<shard>_<part>.bin`` and
``.idx``, which Megatron-LM reads by that prefix. Dead letters go to
``<output>/dead_letters/`` and the stats (tokens, documents) to
``stats.json``.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import Range
from beamtrove.fs import InputFile
from beamtrove.options import Option, declared
from beamtrove.pipelines.common import RowInputOptions, ShardOptions, row_reader, token_shards_sink
from beamtrove.pipelines.spec import DocumentStep, PipelineSpec, Sink
from beamtrove.transforms.tokens import (
    DEFAULT_EOS_TOKEN,
    TOKEN_FILE_FORMATS,
    ChunkShuffle,
    Tokenize,
    TokenizedDocument,
)

__all__ = ["SPEC", "TokenizeOptions"]


class TokenizeOptions(PipelineOptions):
    """Options of the tokenize pipeline."""

    _add_argparse_args = declared(
        Option("tokenizer", "Path or URL of a HuggingFace tokenizer.json (required).", reads="path"),
        Option(
            "eos_token",
            f"Token appended to every document; '' for none. Default: {DEFAULT_EOS_TOKEN}.",
            default=DEFAULT_EOS_TOKEN,
        ),
        Option("bos_token", "Token prepended to every document. Default: none.", default=""),
        Option(
            "loss_mask",
            "Write .ds.loss files, masking the character ranges in each document's no_loss_ranges metadata.",
            flag=True,
        ),
        Option("tokenize_batch_size", "Documents encoded together. Default: 1000.", int, 1000, range=Range(1)),
        Option(
            "shuffle_chunk_size",
            "Shuffle chunks of this many tokens instead of whole documents, as DataTrove's shuffle_chunk_size: "
            "each shard's documents are shuffled, cut into chunks (the last, shorter one is dropped) and the "
            "chunks shuffled, both with --shuffle_seed, which it needs. Default: shuffle whole documents.",
            int,
            range=Range(1),
        ),
    )


def _tokenizer(options: PipelineOptions) -> str:
    tokenizer = options.view_as(TokenizeOptions).tokenizer
    if not tokenizer:
        raise ValueError("tokenize needs --tokenizer (the path or URL of a HuggingFace tokenizer.json).")
    return tokenizer


def _tokenize(options: PipelineOptions) -> DocumentStep:
    own = options.view_as(TokenizeOptions)
    tokenize = Tokenize(
        _tokenizer(options),
        eos_token=own.eos_token,
        bos_token=own.bos_token,
        loss_mask=own.loss_mask,
        batch_size=own.tokenize_batch_size,
    )
    return DocumentStep("tokenize", tokenize.step_fn(), output_type=TokenizedDocument)


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    """The token files ``--output_format`` asks for.

    Raises:
        ValueError: An option the format cannot honour.
    """
    own = options.view_as(TokenizeOptions)
    file_format = SPEC.output_format(options)
    if file_format == "megatron":
        for given, option in ((own.loss_mask, "--loss_mask"), (own.shuffle_chunk_size, "--shuffle_chunk_size")):
            if given:
                raise ValueError(
                    "Megatron datasets hold whole documents without loss masks: "
                    f"drop {option} or write --output_format ds."
                )
    chunks = None if own.shuffle_chunk_size is None else ChunkShuffle(own.shuffle_chunk_size)
    return token_shards_sink(options, output, _tokenizer(options), file_format=file_format, chunks=chunks)


SPEC = PipelineSpec(
    name="tokenize",
    description="Tokenize JSONL/Parquet/CSV documents into DataTrove-compatible .ds token shards or Megatron datasets.",
    options=(TokenizeOptions, ShardOptions, RowInputOptions),
    reader=row_reader,
    steps=(_tokenize,),
    sink=_sink,
    global_steps="token shards are cut, and optionally shuffled, across the whole input",
    runs_staged=True,
    compares_documents=True,
    output_formats=TOKEN_FILE_FORMATS,
)
