"""The per-document steps pipelines share: named after what they run."""

from __future__ import annotations

import re

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.pipelines.common import EXTRACTORS
from beamtrove.pipelines.steps import EXTRACTOR_CLASSES, extraction, filter_step, fixed_filter, language_screen
from beamtrove.transforms.filters import GopherQualityFilter, LengthFilter
from tests.conftest import require


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


def test_the_language_screen_is_on_unless_turned_off_or_left_no_languages(data_dir):
    model = ["--lid_model", str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))]
    default = language_screen(PipelineOptions(model))
    assert (default.name, default.excludes) == ("language_screen", True)
    assert (default.fn._rule.threshold, default.fn._rule.languages) == (0.1, frozenset({"en"}))
    assert language_screen(PipelineOptions([*model, "--language_screen"])).fn._rule.threshold == 0.1
    assert language_screen(PipelineOptions([*model, "--no_language_screen"])) is None
    # With any language kept there is nothing to screen for.
    assert language_screen(PipelineOptions([*model, "--languages", "all"])) is None
    explicit = language_screen(PipelineOptions([*model, "--language_screen", "0.3", "--languages", "en,de"]))
    assert (explicit.fn._rule.threshold, explicit.fn._rule.languages) == (0.3, frozenset({"en", "de"}))
    # Up to the language filter's threshold, which may be raised; by default never above it.
    at_most = language_screen(PipelineOptions([*model, "--language_screen=0.8", "--language_threshold=0.9"]))
    assert at_most.fn._rule.threshold == 0.8
    assert language_screen(PipelineOptions([*model, "--language_threshold=0.05"])).fn._rule.threshold == 0.05
    assert language_screen(PipelineOptions([*model, "--language_threshold=0"])) is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--language_screen=0"], "--language_screen 0.0 is out of range: it must be above 0 and at most "
                                  "--language_threshold (0.65), or the screen would drop pages the language filter"),
        (["--language_screen=-0.2"], "--language_screen -0.2 is out of range"),
        (["--language_screen=0.7"], "--language_screen 0.7 is out of range"),
        (["--language_screen=nan"], "--language_screen nan is out of range"),
        (["--language_screen=1.5", "--language_threshold=2"], "--language_screen 1.5 is out of range"),
        (["--language_screen", "--languages", "all"], "--language_screen screens for the languages --languages names"),
        (["--language_screen", "--no_language_screen"], "--language_screen sets the screen that --no_language_screen"),
        (["--language_screen", "--languages", "en,english"], "--languages english: not a language code of the lid"),
    ],
)  # fmt: skip
def test_the_language_screen_refuses_what_it_cannot_screen_with(data_dir, argv, message):
    model = ["--lid_model", str(require(data_dir / "models" / "lid176" / "lid.176.ftz"))]
    with pytest.raises(ValueError, match=re.escape(message)):
        language_screen(PipelineOptions([*model, *argv]))
