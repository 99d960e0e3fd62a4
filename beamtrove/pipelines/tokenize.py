"""``beamtrove run tokenize``: JSONL/Parquet/CSV documents into ``.ds`` token shards.

The shards (``<prefix>_<shard>_<part>.ds`` with ``.index``, ``.metadata`` and,
with ``--loss_mask``, ``.loss``) land directly in ``--output``, where
DataTrove's merger and readers find them; dead letters go to
``<output>/dead_letters/`` and the stats (tokens, documents) to
``stats.json``.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile
from beamtrove.options import Option, declared
from beamtrove.pipelines.common import RowInputOptions, ShardOptions, row_reader, token_shards_sink
from beamtrove.pipelines.spec import DocumentStep, PipelineSpec, Sink
from beamtrove.transforms.tokens import DEFAULT_EOS_TOKEN, Tokenize, TokenizedDocument

__all__ = ["SPEC", "TokenizeOptions"]


class TokenizeOptions(PipelineOptions):
    """Options of the tokenize pipeline."""

    _add_argparse_args = declared(
        Option("tokenizer", "Path or URL of a HuggingFace tokenizer.json (required)."),
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
        Option("tokenize_batch_size", "Documents encoded together. Default: 1000.", int, 1000),
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
    return token_shards_sink(options, output, _tokenizer(options))


SPEC = PipelineSpec(
    name="tokenize",
    description="Tokenize JSONL/Parquet/CSV documents into DataTrove-compatible .ds token shards.",
    options=(TokenizeOptions, ShardOptions, RowInputOptions),
    reader=row_reader,
    steps=(_tokenize,),
    sink=_sink,
    global_steps="token shards are cut, and optionally shuffled, across the whole input",
)
