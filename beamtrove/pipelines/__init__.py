"""Ready-made pipelines, run with ``beamtrove run NAME``.

Each pipeline module defines ``Options`` (a ``PipelineOptions`` subclass),
``SHARED_OPTIONS`` (option classes it shares with other pipelines, shown in
its help), ``DESCRIPTION`` and ``build(pipeline, options)``, which applies its steps to
a pipeline and raises ``ValueError``/``FileNotFoundError`` for bad
configuration before anything runs.

A pipeline made of per-document steps only, whose result over a whole input
is the union of its results over parts of it, also defines
``documents_path(options)``: where under ``--output`` it writes its kept
documents as JSONL part files. ``beamtrove elastic`` runs only such
pipelines; the others define ``GLOBAL_STEPS``, saying which of their steps
need the whole input at once.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["PIPELINES", "load_pipeline"]

PIPELINES = {
    "convert": "beamtrove.pipelines.convert",
    "dedup": "beamtrove.pipelines.dedup",
    "extract": "beamtrove.pipelines.extract",
    "fineweb": "beamtrove.pipelines.fineweb",
    "merge_tokens": "beamtrove.pipelines.merge_tokens",
    "tokenize": "beamtrove.pipelines.tokenize",
}


def load_pipeline(name: str) -> ModuleType:
    """The module of pipeline ``name``.

    Raises:
        ValueError: No pipeline has that name.
    """
    if name not in PIPELINES:
        raise ValueError(f"Unknown pipeline {name!r}; available: {', '.join(sorted(PIPELINES))}.")
    return importlib.import_module(PIPELINES[name])
