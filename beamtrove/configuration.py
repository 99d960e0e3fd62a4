"""What every command shares to refuse bad configuration: the error, the parser that suggests, the ranges.

A :class:`ConfigurationError` says what to fix; the command prints it as one
``beamtrove: error:`` line and exits with status 2. A :class:`Range` is the
numbers a setting takes, for an option and for the transform it configures
alike. This module imports no Beam, so commands that run no pipeline use it
without paying for Beam's import.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any

__all__ = ["FRACTION", "ConfigurationError", "Range", "SuggestingParser", "did_you_mean", "options_named"]


class ConfigurationError(ValueError):
    """Options, inputs or assets a pipeline cannot run with; the message says what to fix."""


def options_named(argv: Iterable[str]) -> set[str]:
    """The names of the options ``argv`` gives: ``--name value``, ``--name=value`` and ``--name-with-dashes`` alike
    (as ``name_with_dashes``)."""
    return {argument[2:].split("=", 1)[0].replace("-", "_") for argument in argv if argument.startswith("--")}


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


@dataclasses.dataclass(frozen=True)
class Range:
    """The numbers a setting takes: finite ones, between its bounds when it has them.

    NaN and the infinities are in no range: NaN compares false with every
    score, so a NaN threshold would drop (or keep) everything, silently.

    Attributes:
        minimum: The lowest number; None for no lower bound.
        maximum: The highest number; None for no upper bound.
        exclusive_minimum: The minimum itself is out of the range.
        exclusive_maximum: The maximum itself is out of the range.
    """

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            return False
        if self.minimum is not None and (value <= self.minimum if self.exclusive_minimum else value < self.minimum):
            return False
        return self.maximum is None or (value < self.maximum if self.exclusive_maximum else value <= self.maximum)

    def describe(self, noun: str = "a number") -> str:
        """The range in words: ``a number from 0 to 1``, or ``an integer of at least 1`` with ``noun="an integer"``."""
        if None not in (self.minimum, self.maximum) and not (self.exclusive_minimum or self.exclusive_maximum):
            return f"{noun} from {self.minimum} to {self.maximum}"
        low = None if self.minimum is None else f"{'above' if self.exclusive_minimum else 'of at least'} {self.minimum}"
        high = None if self.maximum is None else f"{'below' if self.exclusive_maximum else 'of at most'} {self.maximum}"
        if low and high:
            return f"{noun} {low} and {high.removeprefix('of ')}"
        # Unbounded on one side, the range still excludes the infinity there.
        return " ".join(filter(None, ("a finite number" if noun == "a number" else noun, low, high)))

    def check(self, value: float, name: str) -> float:
        """``value``, when it is in the range.

        Raises:
            ValueError: It is not; the message names ``name`` and the range.
        """
        if value not in self:
            raise ValueError(f"{name} must be {self.describe()} (got {value!r}).")
        return value


#: Thresholds, ratios and probabilities.
FRACTION = Range(0, 1)
