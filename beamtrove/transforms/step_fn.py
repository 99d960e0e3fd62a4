"""The one protocol of a per-document step's DoFn, which every way of running the step keeps to.

A :class:`~beamtrove.pipelines.spec.DocumentStep` runs its DoFn in two
engines: as a ``ParDo`` in the Beam graph, and, in resumable runs, driven by
:class:`~beamtrove.transforms.per_input.ProcessInputs` inside the DoFn that
processes one input file. Both engines call only what this protocol allows,
so a step's outputs and counters are the same in both:

* ``setup()`` and ``teardown()``;
* ``process(document)``, taking the document alone (no timestamp, window or
  side-input parameters), yielding what it keeps and tagged ``excluded`` or
  ``dead_letters`` outputs; or, for a :class:`~beamtrove.transforms.batching.BatchDoFn`,
  ``begin_batch(documents)`` and ``transform_batch(documents, begun)``;
* no bundle hooks (``start_bundle``, ``finish_bundle``) of its own, which a
  per-input run never calls;
* its counters under the step's name, through a :class:`~beamtrove.metrics.StepMetrics`.

:func:`check_step_fn` enforces this when a step is declared; :func:`run_step_fn`
is how a per-input run calls a step.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam

from beamtrove.metrics import StepMetrics
from beamtrove.transforms.batching import BatchDoFn

__all__ = ["check_step_fn", "run_step_fn"]

_BUNDLE_HOOKS = ("start_bundle", "finish_bundle")


def _overrides(fn: beam.DoFn, name: str, base: type) -> bool:
    return getattr(type(fn), name) is not getattr(base, name)


def check_step_fn(step: str, fn: Any) -> None:
    """Checks that ``fn`` keeps to the step protocol (see the module's docstring) as step ``step``.

    Raises:
        TypeError: It does not, with what to change.
    """
    where = f"Step {step!r}: its DoFn {type(fn).__name__}"
    if not isinstance(fn, beam.DoFn):
        raise TypeError(f"{where} is not a beam.DoFn.")
    base = BatchDoFn if isinstance(fn, BatchDoFn) else beam.DoFn
    hooks = [
        name for name in (*_BUNDLE_HOOKS, *(("process",) if base is BatchDoFn else ())) if _overrides(fn, name, base)
    ]
    if hooks:
        raise TypeError(f"{where} overrides {', '.join(hooks)}, which a per-input (--resumable) run never calls.")
    if base is beam.DoFn:
        parameters = list(inspect.signature(fn.process).parameters.values())
        if len(parameters) != 1 or parameters[0].kind not in (
            parameters[0].POSITIONAL_ONLY,
            parameters[0].POSITIONAL_OR_KEYWORD,
        ):
            raise TypeError(f"{where}: process must take the document alone (it takes {[p.name for p in parameters]}).")
    if not any(isinstance(value, StepMetrics) and value.step == step for value in vars(fn).values()):
        raise TypeError(f"{where} counts nothing under the step's name: give it a StepMetrics({step!r}).")


def run_step_fn(fn: beam.DoFn, documents: Sequence[Any]) -> Iterator[Any]:
    """The outputs of a set-up step DoFn over ``documents``, in order, as its ``ParDo`` would emit them."""
    if isinstance(fn, BatchDoFn):
        for start in range(0, len(documents), fn.batch_size):
            batch = list(documents[start : start + fn.batch_size])
            yield from fn.transform_batch(batch, fn.begin_batch(batch))
        return
    for document in documents:
        yield from fn.process(document) or ()
