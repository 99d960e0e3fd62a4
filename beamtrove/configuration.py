"""What every command shares to refuse bad configuration: the error it raises and the parser that suggests.

A :class:`ConfigurationError` says what to fix; the command prints it as one
``beamtrove: error:`` line and exits with status 2. This module imports no
Beam, so commands that run no pipeline use it without paying for Beam's import.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import Any

__all__ = ["ConfigurationError", "SuggestingParser", "did_you_mean"]


class ConfigurationError(ValueError):
    """Options, inputs or assets a pipeline cannot run with; the message says what to fix."""


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, a likely misspelling of it; None when none is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.75)
    return close[0] if close else None


class SuggestingParser(argparse.ArgumentParser):
    """An argparse parser that names the closest choice when it refuses a value (a subcommand, an option's value).

    A multi-word option takes both spellings, as pipeline options do: ``--num-shards`` and ``--num_shards`` name one
    option in every command, so no user has to remember which style a command chose.
    """

    def add_argument(self, *flags, **settings):
        spellings = list(flags)
        for flag in flags:
            if flag.startswith("--"):
                other = "--" + (flag[2:].replace("_", "-") if "_" in flag else flag[2:].replace("-", "_"))
                if other not in spellings:
                    spellings.append(other)
        return super().add_argument(*spellings, **settings)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            suggestion = did_you_mean(str(value), map(str, action.choices))
            raise argparse.ArgumentError(
                action, exc.message + (f"; did you mean {suggestion!r}?" if suggestion else "")
            ) from None
