"""``beamtrove run merge_tokens``: re-shard and shuffle ``.ds`` token shards.

Reads shards written by beamtrove or DataTrove and writes them into
``--num_shards`` shards (split by ``--max_tokens_per_file``), shuffled across
all inputs with ``--shuffle_seed``: what DataTrove's DocumentTokenizerMerger
does, without funnelling every document through one process. With
``--context_shuffle WINDOW``, each output shard is cut into windows of WINDOW
tokens which are shuffled: DataTrove's DocumentTokenizerContextShuffler.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import Range
from beamtrove.fs import InputFile
from beamtrove.options import Option, declared
from beamtrove.pipelines.common import ShardOptions, reader_settings, required_inputs, token_shards_sink
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.tokens import ChunkShuffle, ReadTokenShards, shard_tokenizer

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
        Option(
            "context_shuffle",
            "Cut each output shard into windows of this many tokens and shuffle the windows with --shuffle_seed "
            "(which it needs), as DataTrove's DocumentTokenizerContextShuffler (which uses 2049: a 2048-token "
            "context and its next token). Documents stay in input order before they are cut; the last, shorter "
            "window is dropped; the index keeps the document ends inside windows. Default: no windows.",
            int,
            range=Range(1),
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
    window = options.view_as(MergeTokensOptions).context_shuffle
    chunks = None if window is None else ChunkShuffle(window, shuffle_documents=False)
    return token_shards_sink(options, output, tokenizer, chunks=chunks)


SPEC = PipelineSpec(
    name="merge_tokens",
    description="Merge .ds token shards (beamtrove's or DataTrove's) into a chosen number of shuffled shards.",
    options=(MergeTokensOptions, ShardOptions),
    reader=_reader,
    steps=(),
    sink=_sink,
    global_steps="merging rewrites token shards across the whole input",
    runs_staged=True,
)
