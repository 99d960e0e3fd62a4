"""Ready-made pipelines, run with ``beamtrove run NAME``.

Each pipeline module defines ``Options`` (a ``PipelineOptions`` subclass),
``SHARED_OPTIONS`` (option classes it shares with other pipelines, shown in
its help), ``DESCRIPTION`` and ``build(pipeline, options)``, which applies its steps to
a pipeline and raises ``ValueError``/``FileNotFoundError`` for bad
configuration before anything runs.
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
