"""The Python file of beamtrove's Flex Template: builds a pipeline and submits it to Dataflow.

Dataflow's template launcher runs this file (``FLEX_TEMPLATE_PYTHON_PY_FILE``
in the repository's Dockerfile) as ``python launch.py --name=value ...``, with
one argument per template parameter and Dataflow's own options (project,
region, staging and temp locations, job name, ...) after them. It can be run
by hand the same way, or as ``python -m beamtrove.execution.dataflow.launch``.

The pipeline comes from the ``pipeline`` parameter, which every spec written
by ``beamtrove dataflow build-template`` requires and pins to its pipeline;
one image thus serves every pipeline. The other parameters are the
pipeline's options as ``beamtrove run PIPELINE`` takes them, except that a
boolean flag is passed as ``--flag=true`` or ``--flag=false`` (what a
template parameter can hold). The runner is Dataflow unless ``--runner``
says otherwise.

Unlike ``beamtrove run``, the launcher does not wait for the job or write
``stats.json``: it returns once the job is submitted, and the steps' counters
are in the Dataflow job's metrics.
"""

from __future__ import annotations

import logging
import os
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions, TestOptions

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.build import build
from beamtrove.execution.dataflow.template import NOT_PARAMETERS, PIPELINE_PARAMETER, template_options
from beamtrove.option_parsing import parse
from beamtrove.pipelines import PIPELINES, pipeline_spec

__all__ = ["DEFAULT_RUNNER", "LaunchError", "build_pipeline", "main", "pipeline_argv"]

DEFAULT_RUNNER = "DataflowRunner"
_LOGGER = logging.getLogger(__name__)
_TRUE, _FALSE = "true", "false"


class LaunchError(ConfigurationError):
    """The template parameters cannot make a pipeline; the message says what to fix."""


def _split_pipeline(argv: list[str]) -> tuple[str, list[str]]:
    flag = f"--{PIPELINE_PARAMETER}"
    names, rest = [], []
    arguments = iter(argv)
    for argument in arguments:
        if argument.startswith(f"{flag}="):
            names.append(argument.partition("=")[2])
        elif argument == flag:
            names.append(next(arguments, ""))
        else:
            rest.append(argument)
    if not names:
        raise LaunchError(f"{flag} is missing: name one of {', '.join(sorted(PIPELINES))}.")
    if len(set(names)) > 1:
        raise LaunchError(f"{flag} is given more than once, with different values: {', '.join(names)}.")
    return names[0], rest


def _refuse_non_parameters(pipeline_name: str, argv: list[str]) -> None:
    """Refuses beamtrove options no template has (``--input_ranges``: files on a shared POSIX file system)."""
    for argument in argv:
        flag = argument.partition("=")[0]
        # beamtrove spells every option --name and --name-with-dashes, name being its destination.
        if flag.startswith("--") and flag[2:].replace("-", "_") in NOT_PARAMETERS:
            raise LaunchError(f"{flag} is no parameter of the {pipeline_name} template.")


def _flags(pipeline_name: str, argv: list[str]) -> list[str]:
    """``--flag=true`` becomes ``--flag`` and ``--flag=false`` disappears, for every boolean option."""
    booleans = {option.name for option in template_options(pipeline_name) if option.kind == "boolean"}
    spellings = {spelling: name for name in booleans for spelling in (name, name.replace("_", "-"))}
    result = []
    for argument in argv:
        key, equals, value = argument.partition("=")
        if equals and key.startswith("--") and key[2:] in spellings:
            if value.lower() == _TRUE:
                result.append(key)
            elif value.lower() != _FALSE:
                raise LaunchError(f"{key} takes true or false, not {value!r}.")
        else:
            result.append(argument)
    return result


def pipeline_argv(argv: list[str]) -> tuple[str, list[str]]:
    """Turns template arguments into a pipeline name and the arguments ``beamtrove run NAME`` would take.

    Args:
        argv: ``--name=value`` arguments, one of them ``--pipeline``.

    Returns:
        The pipeline name and its arguments, with ``--runner=DataflowRunner`` first
        unless a runner is given.

    Raises:
        LaunchError: No or an unknown pipeline, a bad boolean, a beamtrove
            option that is no template parameter, or an option the pipeline
            does not take.
    """
    name, rest = _split_pipeline(argv)
    try:
        spec = pipeline_spec(name)
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    _refuse_non_parameters(name, rest)
    rest = _flags(name, rest)
    try:
        parse(spec, rest)
    except ConfigurationError as exc:
        raise LaunchError(str(exc)) from None
    if not any(argument == "--runner" or argument.startswith("--runner=") for argument in rest):
        rest = [f"--runner={DEFAULT_RUNNER}", *rest]
    return name, rest


def build_pipeline(argv: list[str]) -> tuple[str, beam.Pipeline]:
    """Builds the pipeline the template arguments describe, without running it.

    Returns:
        The pipeline name and the built pipeline.

    Raises:
        ConfigurationError: Bad template arguments (a :class:`LaunchError`),
            or options the pipeline cannot run with.
    """
    name, pipeline_args = pipeline_argv(argv)
    spec = pipeline_spec(name)
    options = parse(spec, pipeline_args)
    # A dry run submits nothing, so it leaves the output alone.
    inspect_output = not options.view_as(TestOptions).dry_run
    return name, build(spec, options, inspect_output=inspect_output).pipeline


def main(argv: list[str] | None = None) -> int:
    """Builds the pipeline and submits it; returns the exit status (2 for bad parameters)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else argv
    try:
        name, pipeline = build_pipeline(argv)
    except ConfigurationError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    runner = pipeline.options.view_as(StandardOptions).runner
    _LOGGER.info("Submitting beamtrove %s to %s", name, runner)
    result = pipeline.run()
    job_id = getattr(result, "job_id", None)
    if getattr(result, "has_job", False) and callable(job_id):
        _LOGGER.info("Submitted Dataflow job %s", job_id())
    else:
        _LOGGER.info("Pipeline handed to %s (state %s)", runner, result.state)
    return 0


if __name__ == "__main__":
    # Run as a file, Python puts this file's folder first on sys.path, where template.py and graph.py would shadow
    # any top-level modules of those names that the pipeline's libraries import later.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    sys.exit(main())
