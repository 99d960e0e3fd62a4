"""One summary statistic's running figures, mergeable in any order, and DataTrove's JSON form of them.

DataTrove keeps, for every statistic and key, a ``MetricStats``: the total,
the count, the mean, the running variance (merged with Chan's parallel
formula), the minimum and the maximum, written as JSON by ``to_dict`` and read
back by ``from_dict``. :class:`MetricStats` keeps the same figures as exact
power sums: the count, the sum and the sum of squares, as integers or
fractions. Adding two of them is Chan's formula carried out without rounding,
so the figures a Beam combiner produces do not depend on how a runner splits
and merges the work, and a file's bytes are the same on any runner.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import apache_beam as beam

__all__ = ["MetricStats", "MetricStatsCombineFn", "metric_dict_from_json", "metric_dict_to_json"]

Exact = int | Fraction
Number = int | float

#: The unit DataTrove's stats blocks record: each value is added as a "task".
_UNIT = "task"


def _exact(value: Number) -> Exact:
    return value if isinstance(value, int) else Fraction(value)


@dataclasses.dataclass(frozen=True)
class MetricStats:
    """Count, sum, sum of squares, minimum and maximum of the values of one statistic for one key.

    Integer values keep an integer total, as in DataTrove, whose JSON then
    holds ``"total": 12`` rather than ``12.0``.
    """

    n: int
    total: Exact
    squares: Exact
    min: Number
    max: Number

    @classmethod
    def of(cls, value: Number) -> MetricStats:
        """The figures of one value."""
        exact = _exact(value)
        return cls(1, exact, exact * exact, value, value)

    def __add__(self, other: MetricStats) -> MetricStats:
        return MetricStats(
            self.n + other.n,
            self.total + other.total,
            self.squares + other.squares,
            min(self.min, other.min),
            max(self.max, other.max),
        )

    @property
    def mean(self) -> float:
        return float(Fraction(self.total) / self.n)

    @property
    def variance(self) -> float:
        """The sample variance (``n - 1`` in the denominator), 0 for one value, as DataTrove's."""
        if self.n < 2:
            return 0.0
        running = self.squares - Fraction(self.total) ** 2 / self.n
        return float(running / (self.n - 1))

    def to_json(self) -> dict[str, Any] | int:
        """DataTrove's ``MetricStats.to_dict``: the figures that say something, or ``0`` when the total is 0.

        ``n`` is left out when it equals the total (every value was 1), ``mean``
        when it is 1, the spread when every value was the same.
        """
        total = self.total if isinstance(self.total, int) else float(self.total)
        if total == 0:
            return 0
        mean = self.mean
        data: dict[str, Any] = {"total": total}
        if self.n > 1 and self.n != total:
            data["n"] = self.n
        if mean != 1:
            data["mean"] = mean
        if mean != self.max or mean != self.min:
            variance = self.variance
            data.update(mean=mean, variance=variance, std_dev=math.sqrt(variance), min=self.min, max=self.max)
        data["unit"] = _UNIT
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | Number) -> MetricStats:
        """Reads what :meth:`to_json` (or DataTrove) wrote, with DataTrove's ``from_dict`` rules.

        A missing ``mean`` is 1; a missing ``n`` is the total when the mean
        is 1, else 1; a plain number is one value.
        """
        if not isinstance(data, Mapping):
            return cls.of(data)
        total = data["total"]
        mean = data.get("mean", 1)
        n = int(data.get("n", total if mean == 1 else 1))
        exact_total = _exact(total)
        running = Fraction(data.get("variance", 0.0)) * (n - 1)
        squares = running + Fraction(exact_total) ** 2 / n
        return cls(n, exact_total, squares, data.get("min", mean), data.get("max", mean))


def metric_dict_to_json(stats: Mapping[str, MetricStats]) -> dict[str, Any]:
    """``{key: figures}`` as DataTrove's ``MetricStatsDict.to_dict`` writes it."""
    return {key: value.to_json() for key, value in stats.items()}


def metric_dict_from_json(data: Mapping[str, Any]) -> dict[str, MetricStats]:
    """Reads a ``metric.json`` (or one of DataTrove's per-rank files)."""
    return {key: MetricStats.from_json(value) for key, value in data.items()}


def _add_into(target: dict[str, MetricStats], key: str, stats: MetricStats) -> None:
    previous = target.get(key)
    target[key] = stats if previous is None else previous + stats


class MetricStatsCombineFn(beam.CombineFn):
    """Combines ``(key, value)`` pairs of one statistic into ``{key: MetricStats}``.

    The key is ``"summary"``, a histogram bucket, a host name or a suffix.
    """

    def create_accumulator(self) -> dict[str, MetricStats]:
        return {}

    def add_input(self, accumulator: dict[str, MetricStats], element: tuple[str, Number]) -> dict[str, MetricStats]:
        key, value = element
        _add_into(accumulator, key, MetricStats.of(value))
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[dict[str, MetricStats]]) -> dict[str, MetricStats]:
        merged: dict[str, MetricStats] = {}
        for accumulator in accumulators:
            for key, stats in accumulator.items():
                _add_into(merged, key, stats)
        return merged

    def extract_output(self, accumulator: dict[str, MetricStats]) -> dict[str, MetricStats]:
        return accumulator
