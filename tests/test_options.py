"""The one step from arguments to pipeline options: what it accepts, what it refuses and how it says so."""

from __future__ import annotations

import argparse
import math

import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, WorkerOptions

from beamtrove.cli import main
from beamtrove.configuration import FRACTION, Range
from beamtrove.execution.dataflow.launch import LaunchError, pipeline_argv
from beamtrove.execution.dataflow.template import template_options
from beamtrove.option_parsing import format_help, option_actions, parse, split_beam_options
from beamtrove.options import (
    BeamtroveOptions,
    ConfigurationError,
    Option,
    OptionValue,
    declared,
    did_you_mean,
    value_type,
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
    shared = (
        "--input_format is an option of the convert and dedup and dedup_index and filter and fineweb2 and stats and "
        "tokenize"
    )
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
    with pytest.raises(ConfigurationError, match=r"^--language_threshold must be a number from 0 to 1 \(got 'hi"):
        parse(fineweb, ["--language_threshold", "high"])
    with pytest.raises(ConfigurationError, match=r"^--language_screen must be a number above 0 and at most 1"):
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
    with pytest.raises(ConfigurationError, match="--dump is an option of the fineweb and fineweb2 pipeline"):
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


def test_a_range_holds_finite_numbers_between_its_bounds():
    assert [value in FRACTION for value in (0, 0.5, 1, -0.0001, 1.0001)] == [True, True, True, False, False]
    # NaN, the infinities and what is no number are in no range, even an unbounded one.
    assert [value in Range() for value in (math.nan, math.inf, -math.inf, True, "1", None, -7, 1e308)] == [
        False, False, False, False, False, False, True, True,
    ]  # fmt: skip
    half_open = Range(0, 1, exclusive_maximum=True)
    assert (0 in half_open, 1 in half_open, 0 in Range(0, exclusive_minimum=True)) == (True, False, False)
    assert [r.describe() for r in (FRACTION, half_open, Range(0, 1, exclusive_minimum=True))] == [
        "a number from 0 to 1",
        "a number of at least 0 and below 1",
        "a number above 0 and at most 1",
    ]
    assert [r.describe("an integer") for r in (Range(1), Range(), Range(1, 65535))] == [
        "an integer of at least 1",
        "an integer",
        "an integer from 1 to 65535",
    ]
    assert [r.describe() for r in (Range(0), Range(maximum=0, exclusive_maximum=True))] == [
        "a finite number of at least 0",
        "a finite number below 0",
    ]
    assert FRACTION.check(0.25, "rate") == 0.25
    with pytest.raises(ValueError, match=r"^rate must be a number from 0 to 1 \(got nan\)\.$"):
        FRACTION.check(math.nan, "rate")


#: Values out of every numeric option's range: not finite, too large for a float, or no number at all.
_NEVER_NUMBERS = ("nan", "inf", "-inf", "1e309", "", "0x10")


@pytest.mark.parametrize(
    ("pipeline", "flag", "takes", "out_of_range"),
    [
        ("fineweb", "--language_threshold", "a number from 0 to 1", ("2", "-1", "1.0001")),
        ("fineweb", "--language_screen", "a number above 0 and at most 1", ("0", "2", "-1")),
        ("fineweb", "--extract_timeout", "a finite number of at least 0", ("-1",)),
        ("extract", "--max_payload_bytes", "an integer of at least 1", ("0", "-1", "1.5")),
        ("filter", "--unigram_threshold", "a finite number below 0", ("0", "2")),
        ("filter", "--language_threshold", "a number from 0 to 1", ("2", "-1")),
        ("filter", "--keep_top_pairs_threshold", "a number from 0 to 1", ("2", "-1")),
        ("fineweb", "--keep_top_pairs_threshold", "a number from 0 to 1", ("1.5", "-0.01")),
        ("dedup", "--bloom_fpr", "a number of at least 0 and below 1", ("1", "2", "-1")),
        ("dedup", "--bloom_threshold", "a number from 0 to 1", ("2", "-1")),
        ("dedup", "--minhash_threshold", "a number above 0 and at most 1", ("0", "2")),
        ("dedup", "--minhash_buckets", "an integer from 1 to 65535", ("0", "65536", "-1", "2.5")),
        ("dedup", "--minhash_seed", "an integer from 0 to 4294967295", ("-1", "4294967296", "1.0")),
        ("dedup", "--min_doc_words", "an integer of at least 0", ("-1",)),
        ("dedup_index", "--index_shards", "an integer of at least 1", ("0", "-1")),
        ("decont_index", "--decont_ngrams", "an integer of at least 1", ("0", "-1")),
        ("tokenize", "--num_shards", "an integer of at least 1", ("0", "-1", "2.0")),
        ("tokenize", "--shuffle_seed", "an integer of at least 0", ("-1",)),
        ("tokenize", "--tokenize_batch_size", "an integer of at least 1", ("0",)),
        ("merge_tokens", "--context_shuffle", "an integer of at least 1", ("0", "-1")),
        ("stats", "--summary_top_k", "an integer of at least 1", ("0", "-1")),
        ("convert", "--progress_interval", "a finite number of at least 0", ("-1",)),
        ("convert", "--skip", "an integer of at least 0", ("-1",)),
        ("convert", "--max_file_size", "an integer of at least 1", ("0", "-1")),
    ],
)
def test_run_refuses_a_number_out_of_range_in_one_line_naming_the_option_and_range(
    pipeline, flag, takes, out_of_range, tmp_path, capsys
):
    output = tmp_path / "out"
    argv = ["run", pipeline, "--input", str(tmp_path / "in.jsonl"), "--output", str(output)]
    for value in (*_NEVER_NUMBERS, *out_of_range):
        assert main([*argv, f"{flag}={value}"]) == 2
        assert capsys.readouterr().err == f"beamtrove: error: {flag} must be {takes} (got {value!r}).\n"
    assert not output.exists()


@pytest.mark.parametrize("flag", ["--classifier_labels", "--classifier_remove_labels"])
def test_run_refuses_label_minimums_out_of_range(flag, tmp_path, capsys):
    for value, pair in [
        ("en:nan", "en:nan"),
        ("en:2", "en:2"),
        ("en:inf", "en:inf"),
        ("hq:0.5,en:-0.1", "en:-0.1"),
        ("hq:0.5,lq:1e309", "lq:1e309"),
        ("en:", "en:"),
        (":0.5", ":0.5"),
        ("en", "en"),
    ]:
        argv = ["run", "filter", "--steps", "classifier", "--input", str(tmp_path), "--output", str(tmp_path / "out")]
        assert main([*argv, flag, value]) == 2
        assert capsys.readouterr().err == (
            f"beamtrove: error: {flag} takes label:minimum pairs such as hq:0.5, each minimum a number from 0 to 1 "
            f"(got {pair!r}).\n"
        )
    # Bounds are minimums like any other; the value stays the text given.
    options = parse(pipeline_spec("filter"), [flag, "hq:1, lq:0"]).get_all_options()
    assert options[flag.removeprefix("--")] == "hq:1, lq:0"


def test_the_issues_command_is_refused_before_anything_runs(tmp_path, capsys):
    # The user's spelling: a value after a space, as in `beamtrove run fineweb --language_threshold nan ...`.
    output = tmp_path / "out"
    argv = ["run", "fineweb", "--input", str(tmp_path), "--output", str(output)]
    assert main([*argv, "--language_threshold", "nan"]) == 2
    assert capsys.readouterr().err == (
        "beamtrove: error: --language_threshold must be a number from 0 to 1 (got 'nan').\n"
    )
    assert main([*argv, "--extract_timeout", "nan"]) == 2
    assert "--extract_timeout must be a finite number of at least 0 (got 'nan')." in capsys.readouterr().err
    assert not output.exists()


def test_elastic_jobs_and_dataflow_templates_refuse_the_same_values(review_jsonl, tmp_path, capsys):
    job = tmp_path / "job"
    argv = ["elastic", "prepare", "--pipeline", "convert", "--input", str(review_jsonl), "--job-dir", str(job),
            "--num-shards", "2", "--", "--max_file_size", "0"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err == "beamtrove: error: --max_file_size must be an integer of at least 1 (got '0').\n"
    assert not job.exists()
    with pytest.raises(LaunchError, match=r"^--language_threshold must be a number from 0 to 1 \(got 'nan'\)\.$"):
        pipeline_argv(["--pipeline=fineweb", "--output=gs://b/x", "--language_threshold=nan"])


def test_values_in_range_reach_the_pipeline_and_its_workers_unchanged():
    dedup = pipeline_spec("dedup")
    argv = ["--bloom_fpr=0", "--minhash_threshold=1", "--minhash_seed=4294967295", "--min_doc_words=0",
            "--progress_interval=0.5", "--limit", "0"]  # fmt: skip
    options = parse(dedup, argv)
    chosen = options.get_all_options(drop_default=True)
    expected = {"bloom_fpr": 0.0, "minhash_threshold": 1.0, "minhash_seed": 2**32 - 1, "min_doc_words": 0,
                "progress_interval": 0.5, "limit": 0}  # fmt: skip
    assert {name: chosen[name] for name in expected} == expected
    # A worker parses the job's options again with Beam's parser, which reads them as their types.
    again = PipelineOptions.from_dictionary(chosen).get_all_options()
    assert {name: again[name] for name in expected} == expected
    # A negative number given after a space is a value, as argparse reads one.
    negative = parse(pipeline_spec("filter"), ["--unigram_threshold", "-8.5"])
    assert negative.get_all_options()["unigram_threshold"] == -8.5


def _unranged(option_classes) -> list[str]:
    """The numeric options of ``option_classes`` that declare neither a range nor choices."""
    actions = option_actions(option_classes)
    numeric = [action for action in actions if value_type(action) in (int, float) and action.choices is None]
    return [action.dest for action in numeric if not isinstance(action.type, OptionValue)]


def test_every_numeric_option_of_every_pipeline_declares_its_range():
    classes = {options_class for spec in all_pipeline_specs() for options_class in spec.option_classes}
    assert _unranged(classes) == []
    # The check catches an option declared without one, like those of this test.
    assert _unranged([_ThresholdOptions]) == ["score_threshold", "score_floor"]
    ranged = [action.type.option for action in option_actions(classes) if isinstance(action.type, OptionValue)]
    assert {"language_threshold", "extract_timeout", "unigram_threshold", "classifier_labels", "minhash_seed"} <= {
        option.name for option in ranged
    }
    for option in ranged:
        # A default or a value given alone that its own range or check refuses would be a declaration's mistake.
        for value in (option.default, option.const):
            if value is not None:
                assert value in option.range if option.check is None else option.check(value, option.name)
    # Dataflow templates still see numbers as numbers.
    kinds = {option.name: option.kind for name in ("dedup", "filter") for option in template_options(name)}
    assert [kinds[name] for name in ("minhash_seed", "bloom_fpr", "unigram_threshold", "classifier_labels")] == [
        "integer",
        "number",
        "number",
        "text",
    ]
