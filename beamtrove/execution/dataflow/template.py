"""Dataflow Flex Template specs for beamtrove's pipelines.

A spec is the JSON file ``gcloud dataflow flex-template build`` writes (a
``google.dataflow.v1beta3.ContainerSpec``): the container image, the SDK
language and the template's parameters. The parameters are read from the
argparse definitions of the pipeline's option classes (its declaration's
``option_classes``), so the spec follows every option added to a pipeline;
:func:`template_options` is also what the launcher
(:mod:`beamtrove.execution.dataflow.launch`) reads to turn boolean parameters
back into flags.

Dataflow's own settings (project, region, workers, machine types, ...) are
not parameters: ``gcloud dataflow flex-template run`` and the launch API
take them as the job's environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from beamtrove import __version__
from beamtrove.option_parsing import option_actions
from beamtrove.options import value_type
from beamtrove.pipelines import pipeline_spec

__all__ = [
    "NOT_PARAMETERS",
    "PIPELINE_PARAMETER",
    "REQUIRED_OPTIONS",
    "TemplateOption",
    "flex_template_spec",
    "template_options",
]

#: The template parameter naming the pipeline the launcher builds.
PIPELINE_PARAMETER = "pipeline"
#: Options every pipeline's ``build`` refuses to run without.
REQUIRED_OPTIONS = frozenset({"output"})
#: beamtrove options that mean nothing to a Dataflow job, with the reason.
NOT_PARAMETERS = {
    "input_ranges": "byte ranges of files on a shared POSIX file system, written by `beamtrove elastic` for workers",
    "staged": "local worker processes holding a partition each: Dataflow runs a global step in one job",
    "workers": "the local worker processes of a --staged run",
    "memory": "what one task of a --staged run holds",
}
_INTEGER = r"^-?[0-9]+$"
_NUMBER = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$"
_BOOLEAN = r"^(true|false)$"
_PARAMETER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_OUTPUT_FORMAT = "output_format"


@dataclasses.dataclass(frozen=True)
class TemplateOption:
    """One pipeline option as a template parameter.

    Attributes:
        name: The option's destination, e.g. ``lid_model`` (passed as ``--lid_model=VALUE``).
        help: The option's help text.
        kind: ``text``, ``integer``, ``number``, ``boolean`` (a ``store_true`` flag) or ``enum``.
        choices: The allowed values of an ``enum`` option, as strings.
        repeatable: Whether the command line takes the option several times (a template passes it once).
    """

    name: str
    help: str
    kind: str
    choices: tuple[str, ...] = ()
    repeatable: bool = False

    @property
    def regexes(self) -> list[str]:
        """Patterns a value must match, for Dataflow to check before it launches anything."""
        if self.kind == "enum":
            return [f"^({'|'.join(re.escape(choice) for choice in self.choices)})$"]
        return {"integer": [_INTEGER], "number": [_NUMBER], "boolean": [_BOOLEAN]}.get(self.kind, [])


def _help_text(action: argparse.Action) -> str:
    # As argparse expands help strings: %(default)s and the like.
    params = {key: value for key, value in vars(action).items() if value is not argparse.SUPPRESS}
    return " ".join((action.help or "").split()) % params


def _template_option(action: argparse.Action) -> TemplateOption:
    name, text = action.dest, _help_text(action)
    if isinstance(action, argparse._StoreTrueAction):
        return TemplateOption(name, text, "boolean")
    # A template passes every option with a value, so an option whose value is optional is an ordinary one there.
    if action.nargs not in (None, "?"):
        raise ValueError(f"--{name} takes nargs={action.nargs!r}, which a template parameter cannot express.")
    if not isinstance(action, (argparse._StoreAction, argparse._AppendAction)):
        raise ValueError(f"--{name} uses {type(action).__name__}, which a template parameter cannot express.")
    repeatable = isinstance(action, argparse._AppendAction)
    if action.choices is not None:
        return TemplateOption(name, text, "enum", tuple(str(choice) for choice in action.choices), repeatable)
    kind = {int: "integer", float: "number"}.get(value_type(action), "text")
    return TemplateOption(name, text, kind, repeatable=repeatable)


def template_options(pipeline_name: str) -> list[TemplateOption]:
    """The options of a pipeline that a Flex Template exposes, in the order of its help.

    Raises:
        ValueError: No pipeline has that name, or an option has a form a template
            parameter cannot express.
    """
    spec = pipeline_spec(pipeline_name)
    options: dict[str, TemplateOption] = {}
    for action in option_actions(spec.option_classes):
        # An option the pipeline refuses (PipelineSpec.refuses) would only fail its launches.
        if action.dest in NOT_PARAMETERS or action.dest in options or action.dest in spec.refuses:
            continue
        if not _PARAMETER_NAME.match(action.dest) or action.dest == PIPELINE_PARAMETER:
            raise ValueError(f"--{action.dest} cannot be a template parameter name.")
        options[action.dest] = _template_option(action)
    if _OUTPUT_FORMAT in options:
        # The option several pipelines share: each one's template offers the formats that pipeline writes.
        options[_OUTPUT_FORMAT] = dataclasses.replace(options[_OUTPUT_FORMAT], kind="enum", choices=spec.output_formats)
    return list(options.values())


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _parameter(option: TemplateOption) -> dict:
    help_text = option.help
    if option.repeatable:
        help_text += " One value per launch: use a glob or a directory to name several files."
    parameter = {
        "name": option.name,
        "label": _label(option.name),
        "helpText": help_text,
        "isOptional": option.name not in REQUIRED_OPTIONS,
    }
    if option.regexes:
        parameter["regexes"] = option.regexes
    if option.kind in ("integer", "number"):
        parameter["paramType"] = "NUMBER"
    elif option.kind == "boolean":
        parameter["paramType"] = "BOOLEAN"
    elif option.kind == "enum":
        parameter["paramType"] = "ENUM"
        parameter["enumOptions"] = [{"value": choice, "label": choice} for choice in option.choices]
    else:
        parameter["paramType"] = "TEXT"
    return parameter


def flex_template_spec(pipeline_name: str, image: str, *, sdk_container_image: str | None = None) -> dict:
    """The Flex Template spec of a pipeline, as ``gcloud dataflow flex-template build`` writes it.

    Args:
        pipeline_name: A registered pipeline (:data:`beamtrove.pipelines.PIPELINES`).
        image: The launcher image (the repository's Dockerfile builds one).
        sdk_container_image: The image the workers run, recorded as the default
            environment's ``sdkContainerImage``; ``None`` leaves Dataflow's default
            (Beam's image, which installs beamtrove from the staged setup.py).

    Returns:
        The spec as a JSON-serializable dict.

    Raises:
        ValueError: Unknown pipeline, empty image or an option a template cannot express.
    """
    spec = pipeline_spec(pipeline_name)
    if not image.strip() or any(char.isspace() for char in image):
        raise ValueError(f"Not a container image reference: {image!r}.")
    pipeline_parameter = {
        "name": PIPELINE_PARAMETER,
        "label": "Pipeline",
        "helpText": f"The beamtrove pipeline to run; this template runs {pipeline_name}.",
        "isOptional": False,
        "regexes": [f"^{re.escape(pipeline_name)}$"],
        "paramType": "ENUM",
        "enumOptions": [{"value": pipeline_name, "label": pipeline_name}],
        "defaultValue": pipeline_name,
    }
    return {
        "image": image,
        "sdkInfo": {"language": "PYTHON"},
        "metadata": {
            "name": f"beamtrove {pipeline_name}",
            "description": f"{spec.description} (beamtrove {__version__})",
            "parameters": [pipeline_parameter, *(_parameter(option) for option in template_options(pipeline_name))],
        },
        "defaultEnvironment": {"sdkContainerImage": sdk_container_image} if sdk_container_image else {},
    }
