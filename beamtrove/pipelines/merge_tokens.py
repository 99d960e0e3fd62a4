"""``beamtrove run merge_tokens``: re-shard and shuffle ``.ds`` token shards.

Reads shards written by beamtrove or DataTrove and writes them into
``--num_shards`` shards (split by ``--max_tokens_per_file``), shuffled across
all inputs with ``--shuffle_seed``: what DataTrove's DocumentTokenizerMerger
does, without funnelling every document through one process.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.dead_letter import DEAD_LETTER_DIR
from beamtrove.fs import join
from beamtrove.options import BeamtroveOptions, add_option
from beamtrove.pipelines.inputs import input_files
from beamtrove.pipelines.tokenize import ShardOptions, shard_writer
from beamtrove.transforms.tokens import ReadTokenShards, shard_tokenizer
from beamtrove.transforms.writers import WriteDeadLetters

__all__ = ["DESCRIPTION", "GLOBAL_STEPS", "SHARED_OPTIONS", "Options", "build"]

DESCRIPTION = "Merge .ds token shards (beamtrove's or DataTrove's) into a chosen number of shuffled shards."
SHARED_OPTIONS = (ShardOptions,)


GLOBAL_STEPS = "merging rewrites token shards across the whole input"


class Options(PipelineOptions):
    """Options of the merge_tokens pipeline."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "token_size",
            type=int,
            default=2,
            choices=(2, 4),
            help="Bytes per token of input shards without a .ds.metadata file. Default: 2.",
        )


def _input_tokenizer(shard_urls: list[str]) -> str:
    """The tokenizer named by the inputs' metadata; inputs that disagree are refused."""
    described = {shard_tokenizer(url) for url in shard_urls} - {None}
    if len(described) > 1:
        raise ValueError(
            f"The input shards come from different tokenizers or token sizes ({sorted(described)}); "
            "merge shards of one tokenizer at a time."
        )
    if not described:
        return "Unknown Tokenizer"
    ((tokenizer, _),) = described
    return tokenizer


def build(pipeline: beam.Pipeline, options: PipelineOptions) -> None:
    """Applies the merge steps to ``pipeline``.

    Raises:
        ValueError: Missing options, or inputs from different tokenizers.
        FileNotFoundError: The input matches no ``.ds`` file.
        FileExistsError: ``--output`` holds token files and ``--overwrite`` is off.
    """
    common = options.view_as(BeamtroveOptions)
    own = options.view_as(Options)
    inputs = input_files(options)
    if not inputs or not common.output:
        raise ValueError("merge_tokens needs --input (.ds files or directories) and --output.")
    reader = ReadTokenShards(
        inputs,
        token_size=own.token_size,
        skip=common.skip,
        limit=common.limit,
        progress_interval=common.progress_interval,
    )
    writer = shard_writer(options, _input_tokenizer([file.url for file in reader.files]))
    tokenized, dead_letters = pipeline | "Read" >> reader.with_dead_letters()
    tokenized | "WriteTokens" >> writer
    dead_letters | "WriteDeadLetters" >> WriteDeadLetters(join(common.output, DEAD_LETTER_DIR))
