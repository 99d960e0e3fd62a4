"""The per-document steps pipelines share: extraction, and any filter or formatter.

Each is a :class:`~beamtrove.pipelines.spec.DocumentStep` named after what it
runs, so its counters, its ``excluded/<name>/`` folder and its label in the
graph share that name.
"""

from __future__ import annotations

from collections.abc import Callable

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.pipelines.common import ExtractionOptions
from beamtrove.pipelines.spec import DocumentStep
from beamtrove.transforms.extractors import Extract, Extractor, Resiliparse, Trafilatura
from beamtrove.transforms.filters import DocumentFilter, Filter

__all__ = ["EXTRACTOR_CLASSES", "extraction", "filter_step", "fixed_filter"]

#: What each name of :data:`~beamtrove.pipelines.common.EXTRACTORS` makes.
EXTRACTOR_CLASSES: dict[str, type[Extractor]] = {"resiliparse": Resiliparse, "trafilatura": Trafilatura}


def extraction(options: PipelineOptions) -> DocumentStep:
    """The step that replaces each page's HTML by its main text, with the extractor the options choose."""
    own = options.view_as(ExtractionOptions)
    extract = Extract(EXTRACTOR_CLASSES[own.extractor](), timeout=own.extract_timeout or None)
    return DocumentStep("extract", extract.step_fn())


def filter_step(rule: DocumentFilter) -> DocumentStep:
    """The step applying a filter or formatter, named after it; what it drops goes to ``excluded/<name>/``."""
    return DocumentStep(rule.name, Filter(rule).step_fn(), excludes=True)


def fixed_filter(rule_class: type[DocumentFilter], **settings) -> Callable[[PipelineOptions], DocumentStep]:
    """A step factory for a filter whose settings do not depend on the run's options."""

    def make(options: PipelineOptions) -> DocumentStep:
        return filter_step(rule_class(**settings))

    return make
