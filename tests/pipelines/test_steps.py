"""The per-document steps pipelines share: named after what they run."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.pipelines.common import EXTRACTORS
from beamtrove.pipelines.steps import EXTRACTOR_CLASSES, extraction, filter_step, fixed_filter
from beamtrove.transforms.filters import GopherQualityFilter, LengthFilter


def test_steps_take_their_names_from_what_they_run():
    quality = filter_step(GopherQualityFilter())
    assert (quality.name, quality.excludes, quality.per_document) == ("gopher_quality", True, True)
    made = fixed_filter(LengthFilter, min_chars=500)(PipelineOptions([]))
    assert made.name == "length_filter" and made.fn._rule.min_chars == 500
    resiliparse = extraction(PipelineOptions(["--extractor", "resiliparse", "--extract_timeout", "0"]))
    assert (resiliparse.name, resiliparse.excludes) == ("extract", False)
    assert resiliparse.fn._timeout is None and type(resiliparse.fn._extractor).__name__ == "Resiliparse"
    assert extraction(PipelineOptions([])).fn._timeout == 1.0
    assert extraction(PipelineOptions([])).fn._extractor.options["include_tables"] is True
    assert extraction(PipelineOptions(["--no_include_tables"])).fn._extractor.options["include_tables"] is False
    with pytest.raises(ValueError, match="--no_include_tables applies to --extractor trafilatura, not resiliparse"):
        extraction(PipelineOptions(["--extractor", "resiliparse", "--no_include_tables"]))
    # --extractor offers exactly the extractors a step can be made of.
    assert tuple(EXTRACTOR_CLASSES) == EXTRACTORS
