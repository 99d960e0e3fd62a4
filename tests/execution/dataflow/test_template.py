"""Flex Template specs: their format, and parameters that follow the pipelines' argparse options."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from google.cloud.dataflow_v1beta3 import types as dataflow_types

from beamtrove import __version__
from beamtrove.execution.dataflow.template import NOT_PARAMETERS, REQUIRED_OPTIONS, flex_template_spec, template_options
from beamtrove.option_parsing import option_actions
from beamtrove.pipelines import PIPELINES, pipeline_spec

IMAGE = "us-central1-docker.pkg.dev/my-project/beamtrove/beamtrove:0.5.0"


def _parameters(spec: dict) -> dict[str, dict]:
    return {parameter["name"]: parameter for parameter in spec["metadata"]["parameters"]}


def _argparse_dests(pipeline: str) -> list[str]:
    """The options ``beamtrove run PIPELINE --help`` lists under the pipeline's and beamtrove's own groups."""
    return [action.dest for action in option_actions(pipeline_spec(pipeline).option_classes)]


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_every_spec_is_a_dataflow_container_spec(pipeline):
    spec = json.loads(json.dumps(flex_template_spec(pipeline, IMAGE, sdk_container_image=IMAGE)))

    assert set(spec) == {"image", "sdkInfo", "metadata", "defaultEnvironment"}
    assert spec["image"] == IMAGE
    assert spec["sdkInfo"] == {"language": "PYTHON"}
    assert spec["defaultEnvironment"] == {"sdkContainerImage": IMAGE}
    assert spec["metadata"]["name"] == f"beamtrove {pipeline}"
    assert spec["metadata"]["description"] == f"{pipeline_spec(pipeline).description} (beamtrove {__version__})"
    # Dataflow's own message parser rejects unknown fields and wrong types.
    parsed = dataflow_types.ContainerSpec.from_json(json.dumps(spec))
    assert parsed.sdk_info.language == dataflow_types.SDKInfo.Language.PYTHON
    assert parsed.default_environment.sdk_container_image == IMAGE
    assert [parameter.name for parameter in parsed.metadata.parameters] == [
        parameter["name"] for parameter in spec["metadata"]["parameters"]
    ]
    for parameter in spec["metadata"]["parameters"]:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", parameter["name"])
        assert parameter["label"] and parameter["helpText"]
        for regex in parameter.get("regexes", []):
            re.compile(regex)


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_parameters_are_the_pipelines_argparse_options(pipeline):
    parameters = _parameters(flex_template_spec(pipeline, IMAGE))

    # Those the pipeline refuses (fineweb2's --language_threshold) would only fail its launches.
    refused = pipeline_spec(pipeline).refuses
    expected = [dest for dest in _argparse_dests(pipeline) if dest not in NOT_PARAMETERS and dest not in refused]
    assert list(parameters) == ["pipeline", *expected]
    assert parameters["pipeline"]["regexes"] == [f"^{pipeline}$"]
    assert parameters["pipeline"]["isOptional"] is False
    assert {name for name, parameter in parameters.items() if not parameter["isOptional"]} == {"pipeline", "output"}
    # Runner options have no business in a Dataflow template: Dataflow's settings come from the launch itself.
    assert not {"runner", "direct_num_workers", "direct_running_mode", "project", "region"} & set(parameters)


def test_fineweb_parameters():
    parameters = _parameters(flex_template_spec("fineweb", IMAGE))

    for name in ("dump", "cc_base", "lid_model", "url_blocklist", "languages", "input", "output", "extractor"):
        assert name in parameters
    assert "input_ranges" not in parameters
    assert parameters["dump"]["helpText"].startswith(
        "A Common Crawl dump such as CC-MAIN-2024-22: reads the WARC files its paths file lists"
    )
    assert parameters["dump"]["paramType"] == "TEXT"
    assert "regexes" not in parameters["dump"]
    assert parameters["output"]["isOptional"] is False
    assert parameters["input"]["helpText"].endswith(
        "One value per launch: use a glob or a directory to name several files."
    )
    assert parameters["extractor"]["paramType"] == "ENUM"
    assert parameters["extractor"]["regexes"] == ["^(readability|resiliparse|trafilatura)$"]
    assert [option["value"] for option in parameters["extractor"]["enumOptions"]] == [
        "readability",
        "resiliparse",
        "trafilatura",
    ]
    assert parameters["language_threshold"]["paramType"] == "NUMBER"
    # Given alone on the command line it takes its default; a template always passes a value.
    assert (parameters["language_screen"]["paramType"], parameters["language_screen"]["isOptional"]) == ("NUMBER", True)
    assert parameters["max_payload_bytes"]["regexes"] == [r"^-?[0-9]+$"]
    assert parameters["lid_model"]["label"] == "Lid model"


def test_value_patterns():
    fineweb = _parameters(flex_template_spec("fineweb", IMAGE))
    dedup = _parameters(flex_template_spec("dedup", IMAGE))
    merge = _parameters(flex_template_spec("merge_tokens", IMAGE))
    (integer,) = fineweb["skip"]["regexes"]
    (number,) = fineweb["language_threshold"]["regexes"]
    (boolean,) = dedup["cluster_map"]["regexes"]
    (token_size,) = merge["token_size"]["regexes"]

    def matching(regex: str, values: tuple[str, ...]) -> list[str]:
        return [value for value in values if re.fullmatch(regex, value)]

    assert matching(integer, ("10", "-3", "0", "1.5", "x", "")) == ["10", "-3", "0"]
    assert matching(number, ("0.65", "1", ".5", "1e-3", "-2.", "abc", "1.2.3", "")) == [
        "0.65",
        "1",
        ".5",
        "1e-3",
        "-2.",
    ]
    assert matching(boolean, ("true", "false", "yes", "True ", "1")) == ["true", "false"]
    assert dedup["cluster_map"]["paramType"] == "BOOLEAN"
    assert matching(token_size, ("2", "4", "3", "24")) == ["2", "4"]


def test_parameters_follow_option_definitions(monkeypatch):
    # A new option appears in the spec with no other change: the spec is derived, not written by hand.
    monkeypatch.setitem(PIPELINES, "fake", "tests.execution.dataflow.fake_pipeline")
    parameters = _parameters(flex_template_spec("fake", IMAGE))

    assert list(parameters)[:4] == ["pipeline", "fake_threshold", "fake_mode", "fake_flag"]
    assert parameters["fake_threshold"]["helpText"] == "A threshold. Default: 0.5."
    assert parameters["fake_mode"]["regexes"] == ["^(a|b)$"]
    assert parameters["fake_flag"]["paramType"] == "BOOLEAN"
    assert [option.name for option in template_options("fake")][-1] == "max_file_size"

    module = importlib.import_module(PIPELINES["fake"])
    monkeypatch.setattr(module, "SPEC", dataclasses.replace(module.SPEC, options=(module.ListOptions,)))
    with pytest.raises(ValueError, match="--fake_list takes nargs='\\+'"):
        flex_template_spec("fake", IMAGE)


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_required_options_are_what_the_pipelines_refuse_to_run_without(pipeline):
    options = PipelineOptions(["--input=/nonexistent/input.jsonl"])
    for name in REQUIRED_OPTIONS:
        with pytest.raises(ValueError, match=f"--{name}"):
            pipeline_spec(pipeline).flow(options)


def test_refuses_unknown_pipeline_and_bad_image():
    with pytest.raises(ValueError, match="Unknown pipeline 'fine_web'"):
        flex_template_spec("fine_web", IMAGE)
    with pytest.raises(ValueError, match="Not a container image reference"):
        flex_template_spec("fineweb", "my image")
