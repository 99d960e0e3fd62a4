"""``beamtrove run merge_tokens``: re-shard and shuffle ``.ds`` token shards.

Reads shards written by beamtrove or DataTrove and writes them into
``--num_shards`` shards (split by ``--max_tokens_per_file``), shuffled across
all inputs with ``--shuffle_seed``: what DataTrove's DocumentTokenizerMerger
does, without funnelling every document through one process.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile
from beamtrove.options import Option, declared
from beamtrove.pipelines.common import ShardOptions, reader_settings, required_inputs, token_shards_sink
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.tokens import ReadTokenShards, shard_tokenizer

__all__ = ["SPEC", "MergeTokensOptions"]


class MergeTokensOptions(PipelineOptions):
    """Options of the merge_tokens pipeline."""

    _add_argparse_args = declared(
        Option(
            "token_size",
            "Bytes per token of input shards without a .ds.metadata file. Default: 2.",
            int,
            2,
            choices=(2, 4),
        ),
    )


def _reader(options: PipelineOptions) -> ReadTokenShards:
    token_size = options.view_as(MergeTokensOptions).token_size
    return ReadTokenShards(required_inputs(options), token_size=token_size, **reader_settings(options))


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    """Shards named after the tokenizer of the inputs' metadata; inputs that disagree are refused."""
    described = {shard_tokenizer(file.url) for file in files} - {None}
    if len(described) > 1:
        raise ValueError(
            f"The input shards come from different tokenizers or token sizes ({sorted(described)}); "
            "merge shards of one tokenizer at a time."
        )
    tokenizer = next(iter(described))[0] if described else "Unknown Tokenizer"
    return token_shards_sink(options, output, tokenizer)


SPEC = PipelineSpec(
    name="merge_tokens",
    description="Merge .ds token shards (beamtrove's or DataTrove's) into a chosen number of shuffled shards.",
    options=(MergeTokensOptions, ShardOptions),
    reader=_reader,
    steps=(),
    sink=_sink,
    global_steps="merging rewrites token shards across the whole input",
)
