"""The ``beamtrove`` command: one argparse tree for every subcommand, each handler a few lines.

``run`` builds and runs a pipeline (:mod:`beamtrove.execution.run`),
``stats`` prints a run's ``stats.json``, ``assets`` fetches the language
model and URL blocklist (:mod:`beamtrove.cli.pipelines`); ``report`` writes
a run's HTML report (:mod:`beamtrove.cli.report`); ``inspect`` shows the
documents of an output in the terminal (:mod:`beamtrove.cli.inspect`); ``train-classifier``
trains a fastText quality classifier (:mod:`beamtrove.cli.train_classifier`); ``elastic`` runs
shard-safe pipelines as independent workers (:mod:`beamtrove.cli.elastic`);
``runners`` obtains Prism and Flink and ``slurm`` runs a pipeline on a Flink
cluster inside a Slurm job (:mod:`beamtrove.cli.runners`); ``dataflow``
writes Flex Template specs and offline job graphs
(:mod:`beamtrove.cli.dataflow`). Each of those modules adds its subcommands
to the one tree :func:`main` parses, with their handlers beside them.

Pipeline options become Beam options in :func:`beamtrove.option_parsing.parse`
alone; ``elastic prepare``, ``slurm submit`` and ``dataflow graph`` take them
after ``--``. A refused request exits with status 2 and one
``beamtrove: error:`` line saying what to fix.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import logging
import os
import re
import select
import signal
import sys
from collections.abc import Sequence

from beamtrove import __version__
from beamtrove.cli.parsing import INTERRUPTED
from beamtrove.configuration import ConfigurationError, SuggestingParser, did_you_mean
from beamtrove.execution.jobs.jobdir import ElasticError
from beamtrove.processes import forget_interrupts_handled, interrupt_on_sigterm
from beamtrove.resources import missing_on_worker

__all__ = ["INTERRUPTED", "main"]

_LOGGER = logging.getLogger("beamtrove")
# The status of a command whose output's reader closed the pipe: a GNU tool's, which SIGPIPE ends.
_READER_CLOSED = 128 + signal.SIGPIPE
_SEPARATOR = "--"
# Where Beam starts and stops local job services (Prism's), and where Prism relays its own log.
_LOCAL_JOB_SERVICES = "apache_beam.utils.subprocess_server"
_PRISM_RELAY = "PrismRunner"
_SERVICE_STARTS_AND_STOPS = ("Really starting service", "Really destroying service")
# Where Beam's local runners relay the log entries of their worker processes.
_RELAYED_WORKER_LOGS = "apache_beam.runners.portability.local_job_service"
_RELAYED_ENTRY = re.compile(r'message: "(?P<message>(?:[^"\\]|\\.)*)".*? log_location: "(?P<location>[^"]*)"')


# What each worker the local runners start warns: without a semi-persistent directory, schemas and logical types
# a user registered may not reach it. beamtrove registers none, so the warning says nothing about its runs.
_UNUSED_SEMI_PERSISTENT_DIRECTORY = "No semi_persistent_directory found"


class _PrismChatter(logging.Filter):
    """Leaves out what a Prism run says that is no news: its job service starting and stopping, and its own lines
    below warnings (Beam names them and sets their level only as they are emitted).

    Other job services still say they start, with the command: what to look at when one fails to.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == _PRISM_RELAY:
            return record.levelno >= logging.WARNING
        if record.name == _LOCAL_JOB_SERVICES and record.levelno < logging.ERROR:
            message = record.getMessage()
            return not (message.startswith(_SERVICE_STARTS_AND_STOPS) and "prism" in message)
        return True


class _WorkerLogs(logging.Filter):
    """Lets through relayed worker warnings and beamtrove's own lines, as plain messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        entry = _RELAYED_ENTRY.search(str(record.args[0])) if record.args else None
        if entry is None:
            return record.levelno >= logging.WARNING
        if record.levelno < logging.WARNING and "beamtrove" not in entry.group("location"):
            return False
        if entry.group("message").startswith(_UNUSED_SEMI_PERSISTENT_DIRECTORY):
            return False
        record.msg, record.args = "worker: %s", (entry.group("message").replace('\\"', '"'),)
        return True


class _PrintedErrors(logging.Filter):
    """Leaves out a runner's log of a failure that the command prints itself as one line: bad configuration
    found while the run reads a file (a damaged index), which the runner logs with its traceback first, and a
    worker's missing model or list, whose traceback a portable runner relays as text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if missing_on_worker(record.getMessage()):
            return False
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, ConfigurationError):
                return False
            error = error.__cause__ or error.__context__
        return True


class _Unheard(io.TextIOBase):
    """Where the log goes once the command has printed its result."""

    def write(self, text: str) -> int:
        return len(text)


def _say_last(line: str, *, own_process: bool) -> None:
    """Prints ``line``, the command's result, on stderr.

    In the command's own process, the log says nothing after it: a job service outlives the run it served (Prism's
    stops when the interpreter exits) and may still relay a worker's lines, which would come after the result.
    """
    if own_process:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
                handler.setStream(_Unheard())
    print(line, file=sys.stderr)


def _configure_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _LOGGER.setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        for quiet in (_PrismChatter, _PrintedErrors):
            if not any(isinstance(f, quiet) for f in handler.filters):
                handler.addFilter(quiet())
    relayed = logging.getLogger(_RELAYED_WORKER_LOGS)
    relayed.setLevel(logging.INFO)
    if not any(isinstance(f, _WorkerLogs) for f in relayed.filters):
        relayed.addFilter(_WorkerLogs())


# Each command's module (under beamtrove.cli), which adds it to the tree with its handler, in the order --help
# lists them. A command given first on the line is parsed with its module alone, so that it imports only what it
# uses: a look at a run's stats does not import the Slurm, Dataflow and classifier-training commands.
_MODULES = {
    "run": "pipelines",
    "stats": "pipelines",
    "assets": "pipelines",
    "inspect": "inspect",
    "report": "report",
    "merge-stats": "summary",
    "train-classifier": "train_classifier",
    "elastic": "elastic",
    "runners": "runners",
    "slurm": "runners",
    "dataflow": "dataflow",
}


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command tree: the command ``argv`` starts with alone (with the others of its module), or every command."""
    # Every subcommand's parser is of the class of its parent's.
    parser = SuggestingParser(prog="beamtrove", description="LLM pretraining data from web crawls, on Beam.")
    parser.add_argument("--version", action="version", version=f"beamtrove {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    first = argv[0] if argv else None
    for module in dict.fromkeys([_MODULES[first]] if first in _MODULES else _MODULES.values()):
        importlib.import_module(f"{__name__}.{module}").add_commands(commands)
    return parser


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the subcommand ``args`` are for, e.g. that of ``dataflow graph``."""
    name = "command"
    while parser._subparsers is not None:
        (subcommands,) = parser._subparsers._group_actions
        parser = subcommands.choices[getattr(args, name)]
        name = f"{getattr(args, name)}_command"
    return parser


def _suggestion(parser: argparse.ArgumentParser, unrecognized: list[str]) -> str:
    """``"; did you mean --output?"`` for the first unrecognized option that resembles one of ``parser``'s."""
    for argument in filter(lambda argument: argument.startswith("-"), unrecognized):
        match = did_you_mean(argument.split("=", 1)[0], parser._option_string_actions)
        if match:
            return f"; did you mean {match}?"
    return ""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``beamtrove`` command; returns the exit status (130 when interrupted by Ctrl-C or SIGTERM).

    With ``argv``, the command runs inside a process of the caller's, whose signal handlers it leaves alone.
    """
    if argv is None:
        # The command's process: SIGTERM stops it as Ctrl-C does (one line, status 130) from its start, not only
        # once a run has begun.
        interrupt_on_sigterm()
        # Beam's modules are a quarter of a million objects that live as long as the command: out of the cyclic
        # collector's sight, its collections during the run and the interpreter's teardown do not walk them.
        gc.freeze()
    try:
        try:
            status = _main(sys.argv[1:] if argv is None else list(argv), own_process=argv is None)
        finally:
            # Output that its reader no longer takes fails here, not in the interpreter's exit.
            sys.stdout.flush()
    except KeyboardInterrupt as interrupt:
        # A run's interrupt says what its output kept; Ctrl-C elsewhere says nothing.
        _say_last(f"beamtrove: {str(interrupt) or 'interrupted'}", own_process=argv is None)
        status = INTERRUPTED
        if argv is None:
            forget_interrupts_handled()
    except BrokenPipeError:
        if not _reader_closed(sys.stdout):
            raise  # another pipe than the command's output: a failure to report
        # The output's reader stopped reading (`| head`, `| true`): the command stops quietly, as GNU tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        status = _READER_CLOSED
    if argv is None:
        # The command is done: a Ctrl-C while the interpreter exits would only add a traceback to its result.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        gc.freeze()
    return status


def _reader_closed(stream) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed."""
    try:
        poll = select.poll()
        poll.register(stream.fileno(), 0)  # errors are reported whatever the mask
    except (OSError, ValueError, AttributeError):  # no file behind the stream
        return False
    return any(events & select.POLLERR for _, events in poll.poll(0))


def _main(argv: list[str], *, own_process: bool) -> int:
    separated: list[str] = []
    if _SEPARATOR in argv:
        at = argv.index(_SEPARATOR)
        argv, separated = argv[:at], argv[at + 1 :]
    parser = _parser(argv)
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(rest)}{_suggestion(_chosen(parser, args), rest)}")
    _configure_logging()
    try:
        if separated and not args.pipeline_options and args.command != "run":
            command = " ".join(filter(None, (args.command, getattr(args, f"{args.command}_command", None))))
            raise ConfigurationError(f"`beamtrove {command}` takes no pipeline options after --.")
        return args.handler(args, [*rest, *separated])
    except (ConfigurationError, ElasticError) as exc:
        _say_last(f"beamtrove: error: {exc}", own_process=own_process)
        return 2
