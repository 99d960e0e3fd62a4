"""The options pipelines share, and how an option is declared (:class:`Option`, :func:`declared`).

The option classes are Beam ``PipelineOptions`` subclasses, so they travel
with the job to every runner and Dataflow templates can set them like any
Beam option. Multi-word options accept both ``--input_format`` (Beam's
spelling) and ``--input-format``.
:func:`~beamtrove.option_parsing.parse` is the only step from a command line
to them.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from beamtrove.assets import default_lid_model, default_word_tokenizers
from beamtrove.configuration import ConfigurationError, Range, SuggestingParser, did_you_mean
from beamtrove.text import WORD_SPLITTERS
from beamtrove.transforms.summary import DEFAULT_GROUPS, DEFAULT_TOP_K, GROUPS

__all__ = [
    "BLOCKS",
    "STATS_PIPELINE_BLOCKS",
    "BeamtroveOptions",
    "CheckingParser",
    "ConfigurationError",
    "Option",
    "OptionValue",
    "OutputFormatOptions",
    "ResumeOptions",
    "StagedOptions",
    "SuggestingParser",
    "SummaryStatsOptions",
    "WordSplitterOptions",
    "byte_size",
    "declared",
    "did_you_mean",
    "format_bytes",
    "paths_read",
    "value_type",
    "word_splitting",
]


class CheckingParser(SuggestingParser, _BeamArgumentParser):
    """Reports a bad value as a :class:`ConfigurationError` instead of exiting."""

    def error(self, message):
        raise ConfigurationError(message)


# K, M, G and T alone are binary, as in Slurm's --mem and Docker's --memory; with B, decimal; with iB, binary.
_BYTE_UNITS = {
    **{unit: 1024**power for power, unit in enumerate("bkmgt")},
    **{f"{unit}b": 1000**power for power, unit in enumerate("kmgt", 1)},
    **{f"{unit}ib": 1024**power for power, unit in enumerate("kmgt", 1)},
}
_BYTE_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)")


def byte_size(text: str) -> int:
    """A number of bytes from ``1073741824``, ``1GiB``, ``512MiB``, ``1.5GB`` or ``2G`` (case ignored).

    ``KiB``, ``MiB``, ``GiB``, ``TiB`` and ``K``, ``M``, ``G``, ``T`` alone
    are powers of 1024 (as Slurm's ``--mem`` reads them); ``KB``, ``MB``,
    ``GB``, ``TB`` powers of 1000.

    Raises:
        ValueError: ``text`` is no such size.
    """
    match = _BYTE_SIZE.fullmatch(text.strip().lower())
    if match is None or match["unit"] not in ("", *_BYTE_UNITS):
        raise ValueError(f"{text!r} is not a number of bytes such as 1073741824, 512MiB or 1GiB")
    return int(float(match["number"]) * _BYTE_UNITS.get(match["unit"], 1))


#: How :class:`OptionValue` names what an option of this type takes.
byte_size.noun = "a number of bytes (such as 1073741824, 512MiB or 1GiB)"


def format_bytes(count: int) -> str:
    """A number of bytes as :func:`byte_size` reads it, to 3 figures: ``1GiB``, ``512MiB``, ``3.21MiB``, ``900B``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return f"{count}B"


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: ``--name``, and ``--name-with-dashes`` when the name has underscores.

    Attributes:
        name: The option's name, which is also its attribute on the options.
        help: What it does, and its default when it has one.
        type: The type its value is read as (``int``, ``float``); text by default.
        default: Its value when it is not given.
        choices: The values it accepts, when they are few.
        flag: A switch that takes no value and is True when given.
        repeatable: It may be given several times; its value is the list of them.
        const: Its value when it is given without one (``--name`` alone); it then takes a value optionally.
        range: The numbers a numeric option takes; every ``int`` or ``float``
            option without ``choices`` has one, so NaN, infinities and
            nonsense are refused when the options are parsed.
        check: For a text option holding numbers (``label:minimum`` pairs):
            called with its value and the option's flag when the options are
            parsed, it raises ValueError saying what is wrong, naming the flag.
        reads: ``"path"`` when its value names a file or folder the run reads
            (a model, a list, an index), ``"paths"`` when it names several,
            comma-separated: none may overlap the run's output (:func:`paths_read`).
    """

    name: str
    help: str
    type: type | None = None
    default: Any = None
    choices: tuple | None = None
    flag: bool = False
    repeatable: bool = False
    const: Any = None
    range: Range | None = None
    check: Callable[[str, str], Any] | None = None
    reads: str | None = None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Adds the option to an argparse parser (or argument group).

        Its range and check apply in the parser of :func:`parse`; Beam's own
        parsers (a worker reading the job's options again, ``PipelineOptions``
        in library code) read the value as its ``type`` only.
        """
        flags = [f"--{self.name}", *([f"--{self.name.replace('_', '-')}"] if "_" in self.name else [])]
        if self.flag:
            parser.add_argument(*flags, dest=self.name, action="store_true", help=self.help)
            return
        checked = isinstance(parser, CheckingParser) and (self.range is not None or self.check is not None)
        value_reader = OptionValue(self) if checked else self.type
        settings = {"type": value_reader, "default": self.default, "choices": self.choices, "const": self.const}
        if self.const is not None:
            settings["nargs"] = "?"
        action = "append" if self.repeatable else "store"
        given = {key: value for key, value in settings.items() if value is not None}
        parser.add_argument(*flags, dest=self.name, action=action, help=self.help, **given)


class OptionValue:
    """The argparse ``type`` of an option with a range or a check: reads its value, refusing what they refuse.

    A refusal is one line naming the option and what it takes, such as
    ``--language_threshold must be a number from 0 to 1 (got 'nan').``

    Attributes:
        option: The option.
    """

    def __init__(self, option: Option):
        self.option = option

    def __call__(self, text: str) -> Any:
        option, flag = self.option, f"--{self.option.name}"
        if option.check is not None:
            try:
                option.check(text, flag)
            except ValueError as exc:
                raise argparse.ArgumentError(None, str(exc)) from None
            return text
        try:
            value = option.type(text)
        except ValueError:
            value = None
        if value is None or value not in option.range:
            noun = getattr(option.type, "noun", "an integer" if option.type is int else "a number")
            taken = option.range.describe(noun)
            # An error for no argument is the message alone, with no "argument --x/--y:" before it.
            raise argparse.ArgumentError(None, f"{flag} must be {taken} (got {text!r}).")
        return value


def value_type(action: argparse.Action) -> Any:
    """The type an option's values are read as (``int``, ``float``; None for text), even behind its range."""
    return action.type.option.type if isinstance(action.type, OptionValue) else action.type


def declared(*options: Option) -> classmethod:
    """The ``_add_argparse_args`` of an option class that takes ``options``, in this order.

    Beam finds an option class's options through that class method, and only
    on classes that define it themselves (direct subclasses of
    ``PipelineOptions``), so each class sets it to this::

        class MyOptions(PipelineOptions):
            _add_argparse_args = declared(Option("threshold", "Minimum score. Default: 0.5.", float, 0.5))
    """

    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        for option in options:
            option.add_to(parser)

    # The declarations themselves, for what the options name beyond their values (paths_read).
    add_arguments.options = options
    return classmethod(add_arguments)


def paths_read(options: PipelineOptions, option_classes: Iterable[type]) -> list[tuple[str, str]]:
    """``(--name, path)`` for every file or folder the options name for a run to read (:attr:`Option.reads`)."""
    found = []
    for options_class in option_classes:
        values = options.view_as(options_class)
        for option in getattr(options_class._add_argparse_args, "options", ()):
            value = getattr(values, option.name, None) if option.reads else None
            paths = (value.split(",") if option.reads == "paths" else [value]) if value else []
            found += [(f"--{option.name}", path.strip()) for path in paths if path.strip()]
    return found


class BeamtroveOptions(PipelineOptions):
    """Input, output and progress options every beamtrove pipeline takes."""

    _add_argparse_args = declared(
        Option(
            "input",
            "Input files, directories or glob patterns (local paths or fsspec URLs such as gs://...). "
            "Repeat the option for several inputs.",
            repeatable=True,
        ),
        Option(
            "input_ranges",
            "A JSON file listing input files, and byte ranges of plain JSONL files, to read instead of --input "
            "(what `beamtrove elastic worker` passes each shard).",
            reads="path",
        ),
        Option(
            "output",
            "Output directory (local path or fsspec URL); stats.json is written here. It must be empty or "
            "missing, unless --overwrite or --resumable.",
        ),
        Option(
            "overwrite",
            "Replace what --output holds once this run succeeds; a run that fails or is interrupted leaves it "
            "as it was.",
            flag=True,
        ),
        Option(
            "progress_interval",
            "Seconds between progress lines (inputs and documents done, ETA) when stderr is not a terminal; a "
            "terminal gets one line updated every second. 0 shows no progress. Default: 10.",
            float,
            10.0,
            range=Range(0),
        ),
        Option(
            "read_attempts",
            "Attempts in a row without progress to read an input file over a network or from an object store "
            "(answers 429 or 5xx, connections reset, bodies cut short, silent connections) before the file is "
            "given up as a dead letter and the run goes on; a read continues from the byte reached. Default: 8.",
            int,
            8,
            range=Range(1),
        ),
        Option(
            "retry_wait",
            "Seconds before an input file's second attempt; each further one waits twice as long, up to 60 s, or "
            "as long as the server's Retry-After asks (up to 60 s). Default: 1.",
            float,
            1.0,
            range=Range(0),
        ),
        Option(
            "read_timeout",
            "Seconds a connection reading an input file over HTTP(S) may stay silent before it is reopened "
            "(gs:// and s3:// keep their clients' own timeouts). Default: 60.",
            float,
            60.0,
            range=Range(0, exclusive_minimum=True),
        ),
        Option("skip", "Documents to skip at the start of the input.", int, 0, range=Range(0)),
        Option("limit", "Read at most this many documents.", int, range=Range(0)),
        Option("max_file_size", "Start a new output file past this many bytes.", int, range=Range(1)),
    )


class ResumeOptions(PipelineOptions):
    """Resumable runs."""

    _add_argparse_args = declared(
        Option(
            "resumable",
            "Write each input file's outputs under names derived from it, with a completion marker, so that "
            "rerunning into the same output skips the inputs already completed. The configuration must stay the "
            "same between reruns.",
            flag=True,
        ),
        Option(
            "restart",
            "With --resumable: start the output over, deleting what it holds, when it was made with another "
            "configuration or by a run that was not resumable, instead of refusing it.",
            flag=True,
        ),
    )


class StagedOptions(PipelineOptions):
    """Staged runs."""

    _add_argparse_args = declared(
        Option(
            "staged",
            "Run the steps that compare documents across the input (dedup) as file-backed tasks on local worker "
            "processes, each holding one partition of the data (see --memory) rather than the whole input, with "
            "the same output. Rerunning the same command after a kill goes on from the tasks already done.",
            flag=True,
        ),
        Option(
            "workers",
            "Worker processes of a --staged run, at most as many as the machine's cores and memory (--memory and "
            "what a worker needs besides, each) and the job's tasks take: those are the default.",
            int,
            range=Range(1),
        ),
        Option(
            "memory",
            "Data one task of a --staged run holds at most, in bytes or as 512MiB, 4GiB, ...: the input is cut "
            "into as many partitions as that takes. Default: 1GiB.",
            byte_size,
            range=Range(1 << 20),
        ),
    )


# A language key of the word tokenizer table: ISO 639-1 or 639-3, maybe with an ISO 15924 script (tha_Thai).
_LANGUAGE_KEY = re.compile(r"[a-z]{2,3}(?:_[A-Z][a-z]{3})?")


def _check_word_splitter_name(value: str, flag: str) -> str:
    """``value``, unless it is neither a splitter's name nor shaped as a language key."""
    if value not in WORD_SPLITTERS and not _LANGUAGE_KEY.fullmatch(value):
        raise ValueError(
            f"{flag} is one of {', '.join(WORD_SPLITTERS)} or a language of the word tokenizer table "
            f"(tha_Thai, th, ...), not {value!r}."
        )
    return value


class WordSplitterOptions(PipelineOptions):
    """What splits words."""

    _add_argparse_args = declared(
        Option(
            "word_splitter",
            "What splits words, for every step that counts them (the Gopher repetition, Gopher quality, FineWeb "
            "quality and unigram rules, bloom's n-grams, decont_index's n-grams, the word statistics): beamtrove "
            "(spaCy's English rules without spaCy; text without spaces counts a word per character), spacy "
            "(spaCy's English tokenizer, as DataTrove: its decisions on text in any language, the same hashes as "
            "its indexes; needs pip install 'beamtrove[spacy]'), language (each document split by the tokenizer "
            "DataTrove assigns to its language, read from its language metadata: Thai by PyThaiNLP, Chinese by "
            "jieba, ...; a document without a language, or in one --word_tokenizers does not list, by spaCy's "
            "multi-language tokenizer; MinHash then shingles these words too; needs pip install "
            "'beamtrove[multilingual]'), or a language key of that table (tha_Thai, th: that language's "
            "tokenizer for every document, as DataTrove's language= argument). Default: beamtrove.",
            default="beamtrove",
            check=_check_word_splitter_name,
        ),
        Option(
            "word_tokenizers",
            "DataTrove's table of each language's word tokenizer (tokenizer_assignment.csv), path or fsspec URL, "
            "read by --word_splitter language or a language key. Default: the one `beamtrove assets fetch` "
            "stores in the asset cache.",
            default=default_word_tokenizers(),
            reads="path",
        ),
    )


def word_splitting(options: PipelineOptions) -> dict[str, str | None]:
    """The ``word_splitter`` and ``word_tokenizers`` settings of the steps that count words, as given."""
    own = options.view_as(WordSplitterOptions)
    return {"word_splitter": own.word_splitter, "word_tokenizers": own.word_tokenizers}


#: The blocks ``--summary_stats`` chooses from.
BLOCKS = ("doc", "word", "line", "paragraph", "sentence", "token", "lang")
#: What ``beamtrove run stats`` computes when ``--summary_stats`` is not given.
STATS_PIPELINE_BLOCKS = "doc,word,line"


class SummaryStatsOptions(PipelineOptions):
    """Which of DataTrove's summary statistics to compute, and how to group them."""

    _add_argparse_args = declared(
        Option(
            "summary_stats",
            f"Comma-separated summary statistics blocks among {', '.join(BLOCKS)}, written to "
            "<output>/summary_stats/ in DataTrove's layout. Default: none (the stats pipeline: "
            f"{STATS_PIPELINE_BLOCKS}).",
        ),
        Option(
            "summary_groups",
            f"Comma-separated groups among {', '.join(GROUPS)}. Default: {','.join(DEFAULT_GROUPS)}.",
            default=",".join(DEFAULT_GROUPS),
        ),
        Option(
            "summary_histogram_digits",
            "Decimal digits histogram values are rounded to. Default: 3.",
            int,
            3,
            range=Range(0),
        ),
        Option(
            "summary_top_k",
            f"Keys (hosts, suffixes) kept in the fqdn and suffix groups. Default: {DEFAULT_TOP_K}.",
            int,
            DEFAULT_TOP_K,
            range=Range(1),
        ),
        Option(
            "summary_lid_model",
            "fastText lid.176 model of the lang statistics (path or URL). Default: the asset cache's.",
            default=default_lid_model(),
            reads="path",
        ),
        Option("summary_language", "Language the lang statistics score. Default: en.", default="en"),
        Option(
            "summary_tokenizer",
            "tokenizer.json counting the tokens of documents without token_count metadata (token statistics).",
            reads="path",
        ),
    )


class OutputFormatOptions(PipelineOptions):
    """The format of the files a run writes."""

    # One option for every pipeline that writes several formats: Beam parses every options class it has imported
    # together, so two classes cannot both declare --output_format. Each pipeline's declaration names its own
    # formats (PipelineSpec.output_formats), and a value is checked against those alone.
    _add_argparse_args = declared(
        Option(
            "output_format",
            "What the output files are. convert: jsonl (the default) or parquet. tokenize: ds (DataTrove's .ds "
            "shards, the default) or megatron (Megatron-LM's .bin + .idx datasets, as DataTrove's "
            "MegatronDocumentTokenizer writes them; every shard option applies, --loss_mask and "
            "--shuffle_chunk_size do not).",
        ),
    )
