"""``beamtrove run stats``: DataTrove's summary statistics of JSONL/Parquet/CSV documents.

Reads documents (or a beamtrove run's output folder, meaning its
``documents/``) and writes ``<output>/summary_stats/<group>/<stat>/metric.json``
in DataTrove's merged layout, with dead letters and ``stats.json`` beside it.
:func:`summary_stats_transform` lets any pipeline compute the same
statistics of what it keeps, as its
:class:`~beamtrove.options.SummaryStatsOptions` ask.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile, join
from beamtrove.layout import SUMMARY_STATS_DIR
from beamtrove.options import (
    BLOCKS,
    STATS_PIPELINE_BLOCKS,
    SummaryStatsOptions,
    WordSplitterOptions,
    word_splitting,
)
from beamtrove.pipelines.common import RowInputOptions, row_reader
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.summary import (
    GROUPS,
    DocStats,
    LangStats,
    LineStats,
    ParagraphStats,
    SentenceStats,
    StatsBlock,
    SummaryStats,
    TokenStats,
    WordStats,
)

__all__ = [
    "SPEC",
    "SUMMARY_STATS_STEP",
    "summary_stats_transform",
]

#: The step (and stats name) that computes and writes the statistics.
SUMMARY_STATS_STEP = "summary_stats"


def _names(value: str, allowed: Sequence[str], option: str) -> list[str]:
    """The comma-separated names of ``value``, each checked against ``allowed``, in the order given.

    Raises:
        ValueError: An unknown or repeated name, or none.
    """
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if not names or unknown or len(set(names)) != len(names):
        problem = f"unknown {', '.join(unknown)}" if unknown else "each once, at least one"
        raise ValueError(f"--{option} takes a comma-separated list of {', '.join(allowed)} ({problem}; got {value!r}).")
    return names


def _block(name: str, options: PipelineOptions) -> StatsBlock:
    own = options.view_as(SummaryStatsOptions)
    if name == "lang":
        return LangStats(own.summary_lid_model, own.summary_language)
    if name == "token":
        return TokenStats(own.summary_tokenizer)
    if name == "word":
        return WordStats(**word_splitting(options))
    return {
        "doc": DocStats,
        "line": LineStats,
        "paragraph": ParagraphStats,
        "sentence": SentenceStats,
    }[name]()


def summary_stats_transform(
    options: PipelineOptions, output_dir: str, default_blocks: str | None = None
) -> SummaryStats | None:
    """The :class:`SummaryStats` the options ask for, writing to ``output_dir``; None when they ask for none.

    Args:
        options: The run's options (:class:`SummaryStatsOptions`).
        output_dir: Where the groups' folders go, usually ``<output>/summary_stats``.
        default_blocks: The blocks when ``--summary_stats`` is not given.

    Raises:
        ValueError: An unknown block or group, a bad number.
        FileNotFoundError: The language model or tokenizer is missing.
    """
    own = options.view_as(SummaryStatsOptions)
    chosen = own.summary_stats if own.summary_stats is not None else default_blocks
    if not chosen:
        return None
    blocks = [_block(name, options) for name in _names(chosen, BLOCKS, "summary_stats")]
    groups = _names(own.summary_groups, GROUPS, "summary_groups")
    return SummaryStats(
        output_dir, blocks, groups, own.summary_histogram_digits, own.summary_top_k, step=SUMMARY_STATS_STEP
    )


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    return Sink(
        SUMMARY_STATS_STEP,
        summary_stats_transform(options, join(output, SUMMARY_STATS_DIR), default_blocks=STATS_PIPELINE_BLOCKS),
    )


SPEC = PipelineSpec(
    name="stats",
    description="Compute DataTrove's summary statistics (doc, word, line, ...) of JSONL/Parquet/CSV documents.",
    options=(SummaryStatsOptions, WordSplitterOptions, RowInputOptions),
    reader=row_reader,
    steps=(),
    sink=_sink,
    global_steps="the statistics are combined across the whole input",
)
