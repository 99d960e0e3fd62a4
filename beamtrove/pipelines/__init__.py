"""Ready-made pipelines, run with ``beamtrove run NAME``: each declared once, as a :class:`PipelineSpec`.

Each pipeline module defines ``SPEC`` (see :mod:`beamtrove.pipelines.spec`)
and its own option class. The registry maps names to modules and imports a
module only when its pipeline is asked for, so commands that run one
pipeline do not load the models and libraries of the others, and commands
that run none do not import Beam.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from beamtrove.configuration import ConfigurationError, did_you_mean

if TYPE_CHECKING:
    from beamtrove.pipelines.spec import PipelineSpec

__all__ = ["PIPELINES", "all_pipeline_specs", "pipeline_spec"]

#: Pipeline name -> the module declaring it.
PIPELINES = {
    "convert": "beamtrove.pipelines.convert",
    "decont_index": "beamtrove.pipelines.decont_index",
    "dedup": "beamtrove.pipelines.dedup",
    "dedup_index": "beamtrove.pipelines.dedup_index",
    "extract": "beamtrove.pipelines.extract",
    "filter": "beamtrove.pipelines.filter",
    "fineweb": "beamtrove.pipelines.fineweb",
    "fineweb2": "beamtrove.pipelines.fineweb2",
    "merge_tokens": "beamtrove.pipelines.merge_tokens",
    "stats": "beamtrove.pipelines.summary_stats",
    "tokenize": "beamtrove.pipelines.tokenize",
}


def pipeline_spec(name: str) -> PipelineSpec:
    """The declaration of pipeline ``name``.

    Raises:
        ConfigurationError: No pipeline has that name.
    """
    # Commands are often typed with dashes (dedup-index); the registry's names have underscores.
    name = name.replace("-", "_")
    if name not in PIPELINES:
        hint = did_you_mean(name, PIPELINES)
        suggestion = f" Did you mean {hint!r}?" if hint else ""
        raise ConfigurationError(f"Unknown pipeline {name!r}; available: {', '.join(sorted(PIPELINES))}.{suggestion}")
    return importlib.import_module(PIPELINES[name]).SPEC


def all_pipeline_specs() -> list[PipelineSpec]:
    """Every registered pipeline's declaration, by name."""
    return [pipeline_spec(name) for name in sorted(PIPELINES)]
