"""The template's launcher: template parameters in, the pipeline built and handed to Dataflow."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.execution.dataflow import launch
from beamtrove.execution.dataflow.launch import LaunchError, pipeline_argv
from beamtrove.execution.dataflow.template import flex_template_spec
from beamtrove.pipelines import PIPELINES
from tests.conftest import DATA, require

LAUNCH_PY = pathlib.Path(launch.__file__)
WARC = DATA / "warc" / "cc-main-2024-22_whirlwind.warc.gz"
# What Dataflow's launcher adds to the template parameters; none of it is contacted in a dry run.
DATAFLOW_ARGS = [
    "--project=beamtrove-offline",
    "--region=us-central1",
    "--temp_location=gs://beamtrove-offline/tmp",
    "--dry_run=True",
]


# Values of the parameters whose options take neither 0.5 nor 3 nor a path: ranges beyond what a regex says.
_SAMPLES = {
    "unigram_threshold": "-8.5",
    "classifier_labels": "hq:0.5",
    "classifier_remove_labels": "lq:0.75",
    "cc_range": "0:3",
    # A splitter's name or a language key: text, not a choice.
    "word_splitter": "tha_Thai",
}


def _sample(parameter: dict) -> str:
    """A value the parameter's spec accepts and its option takes."""
    if parameter["name"] in _SAMPLES:
        return _SAMPLES[parameter["name"]]
    if parameter["paramType"] == "ENUM":
        return parameter["enumOptions"][0]["value"]
    if parameter["paramType"] == "BOOLEAN":
        return "true"
    if parameter["paramType"] == "NUMBER":
        return "0.5" if re.fullmatch(parameter["regexes"][0], "0.5") else "3"
    return f"gs://beamtrove-test/{parameter['name']}"


def test_booleans_and_runner():
    name, argv = pipeline_argv(
        ["--input=gs://b/in/*.jsonl", "--pipeline=dedup", "--cluster_map=true", "--output=gs://b/out", "--dedup=exact"]
    )

    assert name == "dedup"
    assert argv == [
        "--runner=DataflowRunner",
        "--input=gs://b/in/*.jsonl",
        "--cluster_map",
        "--output=gs://b/out",
        "--dedup=exact",
    ]
    assert pipeline_argv(["--pipeline", "dedup", "--cluster-map=FALSE", "--runner=DirectRunner"]) == (
        "dedup",
        ["--runner=DirectRunner"],
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input=x"], "--pipeline is missing: name one of convert, decont_index, dedup"),
        (["--pipeline=finweb"], "Unknown pipeline 'finweb'"),
        (["--pipeline=dedup", "--pipeline=convert"], "more than once, with different values: dedup, convert"),
        (["--pipeline=dedup", "--cluster_map=yes"], "--cluster_map takes true or false, not 'yes'"),
        (["--pipeline=dedup", "--minhash_bukets=3"], "unknown options --minhash_bukets=3"),
        # An option of another pipeline is no option of this one.
        (
            ["--pipeline=convert", "--cluster_map=true"],
            "--cluster_map is an option of the dedup and dedup_index pipeline, not of convert",
        ),
        (
            ["--pipeline=extract", "--input-ranges=ranges.json"],
            "--input-ranges is no parameter of the extract template",
        ),
    ],
)
def test_bad_parameters(argv, message):
    with pytest.raises(LaunchError, match=re.escape(message)):
        pipeline_argv(argv)


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_every_spec_parameter_reaches_the_pipeline_options(pipeline):
    # What the spec accepts, the launcher turns into the options the pipeline reads.
    parameters = flex_template_spec(pipeline, "image")["metadata"]["parameters"]
    values = {parameter["name"]: _sample(parameter) for parameter in parameters}
    assert values["pipeline"] == pipeline

    name, argv = pipeline_argv([f"--{key}={value}" for key, value in values.items()])

    assert name == pipeline
    parsed = PipelineOptions(argv).get_all_options()
    assert parsed["runner"] == "DataflowRunner"
    for parameter in parameters[1:]:
        key, value = parameter["name"], parsed[parameter["name"]]
        if parameter["paramType"] == "BOOLEAN":
            assert value is True, key
        elif key == "input":
            assert value == [values[key]]
        else:
            assert str(value) == values[key], key


def test_a_false_boolean_leaves_the_default():
    _, argv = pipeline_argv(["--pipeline=tokenize", "--overwrite=false", "--loss_mask=true"])

    parsed = PipelineOptions(argv).get_all_options()
    assert (parsed["overwrite"], parsed["loss_mask"]) == (False, True)


def test_main_refuses_bad_parameters(capsys):
    assert launch.main(["--pipeline=extract", "--extract_timout=3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: unknown options --extract_timout=3: did you mean --extract_timeout? "
        "(see beamtrove run extract --help)."
    )
    # As `beamtrove run` does, a value outside an option's choices is refused with the choices.
    assert launch.main(["--pipeline=extract", "--extractor=lynx"]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: argument --extractor: invalid choice: 'lynx' "
        "(choose from 'readability', 'resiliparse', 'trafilatura')"
    )


def test_main_reports_what_the_pipeline_refuses(capsys):
    assert launch.main(["--pipeline=extract", "--input=/nonexistent/*.warc.gz", *DATAFLOW_ARGS]) == 2
    assert capsys.readouterr().err.strip() == "beamtrove: error: extract needs --output."


def test_launch_py_as_the_template_launcher_runs_it(tmp_path):
    # The launcher runs the file itself, not the module: python /template/beamtrove/dataflow/launch.py --k=v ...
    argv = ["--pipeline=extract", f"--input={require(WARC)}", "--output=gs://beamtrove-offline/out", *DATAFLOW_ARGS]

    # Beam stages the job's files into a temporary directory that it leaves behind.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, str(LAUNCH_PY), *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    assert "Submitting beamtrove extract to DataflowRunner" in run.stderr
    assert "Pipeline handed to DataflowRunner (state DONE)" in run.stderr
