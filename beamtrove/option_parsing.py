"""The one step from a command line to pipeline options, and the parser that checks them.

:func:`parse` is the only place beamtrove turns arguments into Beam
``PipelineOptions``: it checks them against the chosen pipeline's own option
classes, :class:`~beamtrove.options.BeamtroveOptions` and Beam's options,
and refuses anything else, naming the pipeline an option belongs to when it
belongs to another, which is why it asks the registry for every pipeline. The
options are declared in :mod:`beamtrove.options`, below the pipelines.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    WorkerOptions,
)

from beamtrove.configuration import ConfigurationError, did_you_mean, options_named
from beamtrove.execution.direct_workers import DEFAULT_DIRECT_WORKERS, direct_workers_given
from beamtrove.execution.runner_parts import runner_kind
from beamtrove.options import CheckingParser
from beamtrove.pipelines import all_pipeline_specs

if TYPE_CHECKING:
    from beamtrove.pipelines.spec import PipelineSpec

__all__ = [
    "format_help",
    "option_actions",
    "parse",
    "split_beam_options",
]

# A Beam worker process parses the job's options again, without the option classes of beamtrove's pipelines
# (and Beam's DirectRunner passes it --direct_runner_use_stacked_bundle, a spelling its own parser lacks), so every
# worker would warn that it discards options the user gave: read as if they were ignored, though they were checked
# here and reach the pipeline. Those re-parsing warnings are all that module logs on a worker.
_WORKER_LOG_LEVELS = {"apache_beam.options.pipeline_options": "ERROR"}


def _parser(option_classes: Iterable[type]) -> CheckingParser:
    parser = CheckingParser(allow_abbrev=False, add_help=False)
    for options_class in option_classes:
        options_class._add_argparse_args(parser)
    return parser


def option_actions(option_classes: Iterable[type]) -> list[argparse.Action]:
    """The argparse actions the option classes define, in order: one per option, with its flags and help."""
    return [action for action in _parser(option_classes)._actions if action.dest != "help"]


def _beam_option_classes() -> list[type[PipelineOptions]]:
    # Beam's own classes (runners, I/O, ...), without the option classes of pipelines that happen to be imported.
    classes = {str(c): c for c in PipelineOptions.__subclasses__() if c.__module__.startswith("apache_beam.")}
    return list(classes.values())


def _owners_elsewhere(spec: PipelineSpec) -> dict[str, list[str]]:
    """Every flag of the other registered pipelines, with the names of the pipelines that take it."""
    own = set(_parser(spec.option_classes)._option_string_actions)
    owners: dict[str, list[str]] = {}
    for other in all_pipeline_specs():
        for flag in _parser(other.option_classes)._option_string_actions:
            if flag not in own:
                owners.setdefault(flag, []).append(other.name)
    return owners


def parse(spec: PipelineSpec, argv: Sequence[str]) -> PipelineOptions:
    """The pipeline options ``argv`` sets for the pipeline ``spec``, after checking every argument.

    On the DirectRunner, arguments that name neither its running mode nor
    its worker count run the pipeline in worker processes, as many as the
    machine and the input allow (:mod:`beamtrove.execution.direct_workers`).

    Args:
        spec: The pipeline the options are for.
        argv: Its arguments, as ``beamtrove run NAME`` takes them: the
            pipeline's options, beamtrove's common ones and any Beam option.

    Raises:
        ConfigurationError: An argument no option of the pipeline, of
            beamtrove or of Beam takes (an option of another pipeline is
            named as such), or a value an option refuses.
    """
    _refuse_unused(spec, argv)
    argv = [*_own_defaults(spec, argv), *argv]
    parser = _parser([*spec.option_classes, *_beam_option_classes()])
    _, unknown = parser.parse_known_args(argv)
    if unknown:
        owners = _owners_elsewhere(spec)
        flags = [argument.split("=", 1)[0] for argument in unknown if argument.startswith("-")]
        for flag in flags:
            if flag in owners:
                raise ConfigurationError(
                    f"{flag} is an option of the {' and '.join(owners[flag])} pipeline, not of {spec.name} "
                    f"(see beamtrove run {spec.name} --help)."
                )
        raise ConfigurationError(
            f"unknown options {' '.join(unknown)}{_suggestions(flags, parser._option_string_actions)} "
            f"(see beamtrove run {spec.name} --help)."
        )
    options = PipelineOptions(argv)
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if isinstance(runner, str) and runner_kind(runner) == "direct" and not direct_workers_given(argv):
        direct = options.view_as(DirectOptions)
        direct.direct_running_mode, direct.direct_num_workers = "multi_processing", DEFAULT_DIRECT_WORKERS
    if spec.output_formats:
        spec.output_format(options)
    worker = options.view_as(WorkerOptions)
    worker.sdk_harness_log_level_overrides = {**_WORKER_LOG_LEVELS, **(worker.sdk_harness_log_level_overrides or {})}
    return options


def _own_defaults(spec: PipelineSpec, argv: Sequence[str]) -> list[str]:
    """``--name=value`` for each of the pipeline's own defaults (:attr:`PipelineSpec.defaults`) ``argv`` leaves out."""
    given = options_named(argv)
    return [f"--{name}={value}" for name, value in spec.defaults.items() if name not in given]


def _refuse_unused(spec: PipelineSpec, argv: Sequence[str]) -> None:
    """Refuses an option of the pipeline's classes that it has no use for (:attr:`PipelineSpec.refuses`).

    Raises:
        ConfigurationError: One is given; the message says why it does not apply.
    """
    refused = sorted(options_named(argv) & set(spec.refuses))
    if refused:
        raise ConfigurationError(f"--{refused[0]} does not apply to {spec.name}: {spec.refuses[refused[0]]}")


def _suggestions(flags: Sequence[str], known: Iterable[str]) -> str:
    """``": did you mean --input?"`` for the misspelled ``flags`` that resemble a known one; "" when none does."""
    known = list(known)
    matches = {flag: match for flag in flags if (match := did_you_mean(flag, known))}
    if not matches:
        return ""
    if len(flags) == 1:
        return f": did you mean {matches[flags[0]]}?"
    return f": did you mean {', '.join(f'{match} for {flag}' for flag, match in matches.items())}?"


def split_beam_options(spec: PipelineSpec, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Splits valid arguments into the pipeline's own (its and beamtrove's options) and Beam's, each in order.

    Raises:
        ConfigurationError: As :func:`parse`.
    """
    parse(spec, argv)
    own = _parser(spec.option_classes)._option_string_actions
    pipeline_argv: list[str] = []
    beam_argv: list[str] = []
    flag = ""
    for argument in argv:
        if argument.startswith("--"):
            flag = argument.split("=", 1)[0]
        (pipeline_argv if flag in own else beam_argv).append(argument)
    return pipeline_argv, beam_argv


def format_help(spec: PipelineSpec) -> str:
    """What ``beamtrove run NAME --help`` prints: the pipeline's options by group, then the runner's."""
    parser = argparse.ArgumentParser(
        prog=f"beamtrove run {spec.name}",
        description=spec.description,
        epilog="Every other Beam pipeline option is passed to Beam as well: for example "
        "--runner=FlinkRunner --flink_master=HOST:PORT, or Dataflow's --project, --region and --temp_location.",
    )
    groups = [(c.__doc__.strip().splitlines()[0].rstrip("."), c) for c in spec.option_classes]
    for title, options_class in (*groups, ("Runner", StandardOptions), ("DirectRunner", DirectOptions)):
        options_class._add_argparse_args(parser.add_argument_group(title))
    for action in parser._actions:
        if action.dest in spec.refuses:
            action.help = argparse.SUPPRESS  # refused by this pipeline: not one of its options
    return parser.format_help()
