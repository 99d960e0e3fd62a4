"""What every command group uses to put its subcommands into the ``beamtrove`` tree.

A subcommand is its handler: the handler's docstring is the subcommand's help
(its first line) and description (all of it). A handler takes the parsed
arguments and the pipeline arguments (those after ``--``, or for ``run``
those after the pipeline's name) and returns the exit status. It refuses a
request by raising :class:`~beamtrove.options.ConfigurationError`, which the
command reports as one ``beamtrove: error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable

__all__ = ["INTERRUPTED", "Handler", "command", "group"]

#: A subcommand's handler: (parsed arguments, pipeline arguments) -> exit status.
Handler = Callable[[argparse.Namespace, list[str]], int]

#: The exit status of a command ended by Ctrl-C, as a shell reports it.
INTERRUPTED = 130

_PIPELINE_OPTIONS_EPILOG = (
    "Options after -- go to the pipeline, as `beamtrove run PIPELINE` takes them, with any Beam option."
)


def group(commands, name: str, help_text: str):
    """A subcommand that has subcommands of its own; returns what they are added to."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def command(commands, name: str, handler: Handler, *, pipeline_options: bool = False, **settings):
    """The subcommand ``name``, run by ``handler`` and described by its docstring.

    Args:
        commands: What the subcommand is added to.
        name: The subcommand.
        handler: Runs it.
        pipeline_options: It takes pipeline options after ``--``.
        **settings: More ``add_parser`` settings, e.g. ``add_help=False``.
    """
    description = inspect.getdoc(handler)
    parser = commands.add_parser(
        name,
        help=description.splitlines()[0].rstrip("."),
        description=description,
        epilog=_PIPELINE_OPTIONS_EPILOG if pipeline_options else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **settings,
    )
    parser.set_defaults(handler=handler, pipeline_options=pipeline_options)
    return parser
