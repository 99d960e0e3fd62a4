"""``beamtrove run decont_index``: hash the n-grams of benchmarks given as local files into an index.

Reads benchmark items from JSONL, Parquet or CSV rows (a label field, an
optional query field and an optional task field) or plain text files (one
label per line), and writes the index folder ``beamtrove run filter --steps
decont --decont_index INDEX`` applies: the layout is described in
:mod:`beamtrove.transforms.decont.index`. DataTrove's
``NGramsDecontIndexer``, without the Hugging Face Hub.
"""

from __future__ import annotations

from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import Range
from beamtrove.fs import InputFile
from beamtrove.options import Option, WordSplitterOptions, declared, word_splitting
from beamtrove.pipelines.common import reader_settings, required_inputs
from beamtrove.pipelines.spec import PipelineSpec, Sink
from beamtrove.transforms.decont import BuildDecontIndex, DecontConfig
from beamtrove.transforms.decont.text_items import TEXT_SUFFIXES, ReadTextItems
from beamtrove.transforms.readers import FileReader, ReadWarc, reader_for

__all__ = ["SPEC", "DecontIndexOptions"]


class DecontIndexOptions(PipelineOptions):
    """Options of the decont_index pipeline."""

    _add_argparse_args = declared(
        Option(
            "decont_input_format",
            "Benchmark file format; 'auto' tells it from the file names (.txt: one label per line). Default: auto.",
            default="auto",
            choices=("auto", "jsonl", "parquet", "csv", "text"),
        ),
        Option("decont_label_key", "Field holding the label (the gold answer). Default: text.", default="text"),
        Option("decont_query_key", "Field holding the query (the prompt), if any. Default: query.", default="query"),
        Option(
            "decont_task_key",
            "Field naming the item's task; items without one belong to the task named by their file name up to "
            "its first dot. Default: task.",
            default="task",
        ),
        Option("decont_ngrams", "Words per n-gram. Default: 12.", int, 12, range=Range(1)),
        Option("decont_find_query_ngrams", "Also index n-grams of the query alone.", flag=True),
        Option(
            "decont_no_overlap_ngrams",
            "Leave out the n-grams that span the end of the query and the start of the label.",
            flag=True,
        ),
        Option(
            "decont_index_shards",
            "Hash files per task, each written by its own worker. Default: 1.",
            int,
            1,
            range=Range(1),
        ),
    )


def _reader(options: PipelineOptions) -> FileReader:
    own = options.view_as(DecontIndexOptions)
    inputs = required_inputs(options)
    urls = [getattr(path, "url", path) for path in inputs]
    input_format = own.decont_input_format
    if input_format == "text" or (input_format == "auto" and all(url.endswith(TEXT_SUFFIXES) for url in urls)):
        return ReadTextItems(inputs, **reader_settings(options))
    reader_class = reader_for(input_format, urls)
    if reader_class is ReadWarc:
        raise ValueError("decont_index reads benchmark items from JSONL, Parquet, CSV or text files, not WARC.")
    return reader_class(inputs, text_key=own.decont_label_key, **reader_settings(options))


def _sink(options: PipelineOptions, output: str, files: Sequence[InputFile]) -> Sink:
    own = options.view_as(DecontIndexOptions)
    config = DecontConfig(
        n_grams=own.decont_ngrams,
        find_query_ngrams=own.decont_find_query_ngrams,
        find_overlap_ngrams=not own.decont_no_overlap_ngrams,
        **word_splitting(options),
    )
    index = BuildDecontIndex(
        output,
        config,
        query_key=own.decont_query_key,
        task_key=own.decont_task_key,
        num_shards=own.decont_index_shards,
    )
    return Sink("write_index", index, whole_input=True)


SPEC = PipelineSpec(
    name="decont_index",
    description="Hash the n-grams of benchmark items (JSONL/Parquet/CSV/text files) into a decontamination index.",
    options=(DecontIndexOptions, WordSplitterOptions),
    reader=_reader,
    steps=(),
    sink=_sink,
    global_steps="an index holds the distinct n-grams of each task across the whole input",
)
