"""Pipeline options shared by beamtrove's pipelines.

They are Beam ``PipelineOptions`` subclasses, so they travel with the job to
every runner and Dataflow templates can set them like any Beam option.
Multi-word options accept both ``--input_format`` (Beam's spelling) and
``--input-format``.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

__all__ = ["BeamtroveOptions", "add_option", "option_owners", "unknown_options"]


def add_option(parser: argparse.ArgumentParser, name: str, **kwargs) -> None:
    """Adds ``--name`` (and ``--name-with-dashes`` when it differs) to ``parser``."""
    flags = [f"--{name}"]
    if "_" in name:
        flags.append(f"--{name.replace('_', '-')}")
    parser.add_argument(*flags, dest=name, **kwargs)


class BeamtroveOptions(PipelineOptions):
    """Input, output and progress options every beamtrove pipeline takes."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(
            parser,
            "input",
            action="append",
            help="Input files, directories or glob patterns (local paths or fsspec URLs such as gs://...). "
            "Repeat the option for several inputs.",
        )
        add_option(
            parser,
            "input_ranges",
            help="A JSON file listing input files, and byte ranges of plain JSONL files, to read instead of --input "
            "(what `beamtrove elastic worker` passes each shard).",
        )
        add_option(parser, "output", help="Output directory (local path or fsspec URL); stats.json is written here.")
        add_option(
            parser,
            "progress_interval",
            type=float,
            default=10.0,
            help="Seconds between each worker's 'records read' log lines; 0 turns them off. Default: 10.",
        )
        add_option(parser, "skip", type=int, default=0, help="Documents to skip at the start of the input.")
        add_option(parser, "limit", type=int, help="Read at most this many documents.")
        add_option(parser, "max_file_size", type=int, help="Start a new output file past this many bytes.")


def _option_classes() -> list[type[PipelineOptions]]:
    # Subclasses defined twice (re-imported modules) count once.
    return list({str(c): c for c in PipelineOptions.__subclasses__()}.values())


def unknown_options(argv: list[str]) -> list[str]:
    """The arguments of ``argv`` that no imported ``PipelineOptions`` class takes."""
    parser = _BeamArgumentParser(allow_abbrev=False)
    for options_class in _option_classes():
        options_class._add_argparse_args(parser)
    return parser.parse_known_args(argv)[1]


def option_owners() -> dict[str, type[PipelineOptions]]:
    """Maps every flag (``--input``, ``--input-format``, ...) of the imported option classes to its class."""
    owners = {}
    for options_class in _option_classes():
        parser = argparse.ArgumentParser(add_help=False)
        options_class._add_argparse_args(parser)
        for action in parser._actions:
            for flag in action.option_strings:
                owners.setdefault(flag, options_class)
    return owners
