"""The one step from arguments to pipeline options: what it accepts, what it refuses and how it says so."""

from __future__ import annotations

import argparse

import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, WorkerOptions

from beamtrove.options import (
    BeamtroveOptions,
    ConfigurationError,
    Option,
    declared,
    did_you_mean,
    format_help,
    option_actions,
    parse,
    split_beam_options,
)
from beamtrove.pipelines import all_pipeline_specs, pipeline_spec
from beamtrove.pipelines.steps import LanguageOptions, LanguageScreenOptions
from beamtrove.transforms.filters import DEFAULT_SCREEN_THRESHOLD


class _ThresholdOptions(PipelineOptions):
    """Options declared the way beamtrove's pipelines declare theirs."""

    _add_argparse_args = declared(
        Option("score_threshold", "Minimum score. Default: 0.5.", float, 0.5),
        Option("score_mode", "How to score.", default="strict", choices=("strict", "lenient")),
        Option("verbose_scores", "Log every score.", flag=True),
        Option("score_label", "A label; repeatable.", repeatable=True),
        Option("score_floor", "Drop what scores below this; given alone: 0.1.", float, const=0.1),
    )


def test_declared_options_are_beam_options_with_both_spellings():
    options = PipelineOptions(["--score_threshold", "0.7", "--verbose-scores", "--score-label", "a", "--score_label=b"])
    own = options.view_as(_ThresholdOptions)
    assert (own.score_threshold, own.score_mode, own.verbose_scores, own.score_label) == (
        0.7,
        "strict",
        True,
        ["a", "b"],
    )
    assert PipelineOptions([]).view_as(_ThresholdOptions).score_threshold == 0.5
    actions = {action.dest: action for action in option_actions([_ThresholdOptions])}
    assert actions["verbose_scores"].option_strings == ["--verbose_scores", "--verbose-scores"]
    assert actions["score_mode"].choices == ("strict", "lenient") and actions["score_threshold"].type is float
    assert isinstance(actions["score_label"], argparse._AppendAction)
    # Beam parses every option class it knows with one parser: the test's options leave Beam's intact.
    assert PipelineOptions(["--score_threshold", "0.2"]).get_all_options()["score_threshold"] == 0.2


def test_an_option_with_a_const_takes_its_value_optionally():
    def floor(*argv: str) -> float | None:
        return PipelineOptions(list(argv)).view_as(_ThresholdOptions).score_floor

    assert (floor(), floor("--score_floor"), floor("--score-floor", "0.3"), floor("--score_floor=0.2")) == (
        None,
        0.1,
        0.3,
        0.2,
    )
    # Given alone before another option, it does not take that option for its value.
    assert floor("--score_floor", "--verbose_scores") == 0.1
    # What a worker process reads: the job's options as a dictionary, the value written out.
    job = PipelineOptions(["--score_floor"]).get_all_options(drop_default=True)
    assert PipelineOptions.from_dictionary(job).view_as(_ThresholdOptions).score_floor == 0.1


def test_parse_takes_the_pipelines_options_beamtroves_and_beams():
    fineweb = pipeline_spec("fineweb")
    options = parse(fineweb, ["--input", "a", "--input=b", "--languages", "fr,de", "--direct_num_workers", "2",
                              "--runner=DirectRunner", "--resumable", "--max-file-size", "1000"])  # fmt: skip
    assert options.view_as(BeamtroveOptions).input == ["a", "b"]
    assert options.view_as(BeamtroveOptions).max_file_size == 1000
    assert options.view_as(LanguageOptions).languages == "fr,de"
    assert options.view_as(DirectOptions).direct_num_workers == 2
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    screen = parse(fineweb, ["--language_screen", "--languages", "en"]).view_as(LanguageScreenOptions)
    assert screen.language_screen == DEFAULT_SCREEN_THRESHOLD == 0.1
    assert parse(fineweb, ["--language-screen=0.3"]).view_as(LanguageScreenOptions).language_screen == 0.3
    assert parse(fineweb, []).view_as(LanguageScreenOptions).language_screen is None


def test_workers_do_not_warn_about_the_options_they_cannot_parse_again():
    convert = pipeline_spec("convert")
    overrides = parse(convert, ["--input", "a"]).view_as(WorkerOptions).sdk_harness_log_level_overrides
    assert overrides == {"apache_beam.options.pipeline_options": "ERROR"}
    # The user's own levels are kept, and win.
    given = '{"beamtrove": "DEBUG", "apache_beam.options.pipeline_options": "INFO"}'
    options = parse(convert, ["--sdk_harness_log_level_overrides", given])
    assert options.view_as(WorkerOptions).sdk_harness_log_level_overrides == {
        "apache_beam.options.pipeline_options": "INFO",
        "beamtrove": "DEBUG",
    }
    # What a worker process reads: the job's options as a dictionary.
    assert options.get_all_options(drop_default=True)["sdk_harness_log_level_overrides"]["beamtrove"] == "DEBUG"


def test_did_you_mean_names_only_a_close_candidate():
    assert did_you_mean("--inptu", ["--input", "--output"]) == "--input"
    assert did_you_mean("--no_such_option", ["--dataflow_service_option", "--input"]) is None


def test_parse_refuses_other_pipelines_options_unknown_ones_and_bad_values():
    fineweb, convert = pipeline_spec("fineweb"), pipeline_spec("convert")
    with pytest.raises(ConfigurationError) as refused:
        parse(fineweb, ["--output", "o", "--tokenizer", "gpt2.json"])
    assert str(refused.value) == (
        "--tokenizer is an option of the tokenize pipeline, not of fineweb (see beamtrove run fineweb --help)."
    )
    # An option several other pipelines share names them all; --name=value is recognised too.
    shared = "--input_format is an option of the convert and dedup and dedup_index and filter and stats and tokenize"
    with pytest.raises(ConfigurationError, match=shared):
        parse(fineweb, ["--input_format=jsonl"])
    with pytest.raises(ConfigurationError, match="--resumable is an option of the extract and filter and fineweb"):
        parse(convert, ["--resumable"])
    with pytest.raises(
        ConfigurationError,
        match=r"^unknown options --inptu x: did you mean --input\? \(see beamtrove run convert --help\)\.$",
    ):
        parse(convert, ["--inptu", "x"])
    with pytest.raises(
        ConfigurationError, match=r"^unknown options --no_such_option \(see beamtrove run convert --help\)"
    ):
        parse(convert, ["--no_such_option"])
    # No abbreviation is taken for the option it starts.
    with pytest.raises(ConfigurationError, match="unknown options --out o"):
        parse(convert, ["--out", "o"])
    with pytest.raises(ConfigurationError, match="argument --language_threshold/--language-threshold: invalid float"):
        parse(fineweb, ["--language_threshold", "high"])
    with pytest.raises(ConfigurationError, match="argument --language_screen/--language-screen: invalid float"):
        parse(fineweb, ["--language_screen", "high"])
    with pytest.raises(ConfigurationError, match="--language_screen is an option of the fineweb pipeline"):
        parse(pipeline_spec("filter"), ["--language_screen"])


def test_split_keeps_the_pipelines_own_arguments_apart_from_beams():
    convert = pipeline_spec("convert")
    argv = ["--id_key", "review", "--direct_num_workers", "2", "--output_format=parquet", "--runner", "DirectRunner"]
    assert split_beam_options(convert, argv) == (
        ["--id_key", "review", "--output_format=parquet"],
        ["--direct_num_workers", "2", "--runner", "DirectRunner"],
    )
    with pytest.raises(ConfigurationError, match="--dump is an option of the fineweb pipeline"):
        split_beam_options(convert, ["--dump", "CC-MAIN-2024-22"])


def test_help_groups_the_options_by_class():
    text = format_help(pipeline_spec("tokenize"))
    assert text.startswith("usage: beamtrove run tokenize")
    positions = [
        text.index(title)
        for title in (
            "Options of the tokenize pipeline:",
            "How token shards are laid out:",
            "Input format and the fields of table rows:",
            "Input, output and progress options every beamtrove pipeline takes:",
            "Runner:",
            "DirectRunner:",
        )
    ]
    assert positions == sorted(positions)
    assert "--tokenizer TOKENIZER" in text and "--direct_running_mode" in text


def test_no_flag_is_defined_twice_among_the_pipelines_and_beam():
    # Beam parses every option class it has imported with one parser: a flag defined twice would break them all.
    classes = {options_class for spec in all_pipeline_specs() for options_class in spec.option_classes}
    flags = [flag for action in option_actions(classes) for flag in action.option_strings]
    assert len(flags) == len(set(flags))
    assert {"--input", "--tokenizer", "--dedup", "--dump", "--num_shards", "--resumable"} <= set(flags)
    beam_classes = [c for c in PipelineOptions.__subclasses__() if c.__module__.startswith("apache_beam.")]
    beam_flags = {flag for action in option_actions(beam_classes) for flag in action.option_strings}
    assert "--runner" in beam_flags and not beam_flags & set(flags)
