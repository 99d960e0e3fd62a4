"""Building a pipeline from its declaration: one flow, run ordinarily and one input file at a time."""

from __future__ import annotations

import dataclasses
import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.cli import main
from beamtrove.execution.build import build
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import extract, pipeline_spec
from beamtrove.pipelines.steps import filter_step
from beamtrove.transforms.filters import LengthFilter
from tests.conftest import jsonl_rows, require

MIN_CHARS = 2000


def _length_filter(options: PipelineOptions):
    return filter_step(LengthFilter(min_chars=MIN_CHARS))


def _rows(directory) -> list[dict]:
    return sorted(jsonl_rows(directory), key=lambda row: row["id"])


def test_a_step_added_to_the_declaration_runs_in_ordinary_and_resumable_runs(data_dir, tmp_path, monkeypatch):
    # The extract pipeline's declaration, with one more step after extraction: nothing else changes.
    monkeypatch.setattr(extract, "SPEC", dataclasses.replace(extract.SPEC, steps=(*extract.SPEC.steps, _length_filter)))
    warcs = require(data_dir / "warc") / "dolma_wget_sample-000*.warc.gz"
    argv = ["run", "extract", "--input", str(warcs), "--extractor", "resiliparse", "--extract_timeout", "0"]
    ordinary, resumable = tmp_path / "ordinary", tmp_path / "resumable"
    assert main([*argv, "--output", str(ordinary)]) == 0
    assert main([*argv, "--output", str(resumable), "--resumable"]) == 0

    runs = {out: json.loads((out / "stats.json").read_text())["steps"] for out in (ordinary, resumable)}
    for out, steps in runs.items():
        counters = steps["length_filter"]["counters"]
        assert counters["in"] == steps["extract"]["counters"]["out"], out
        assert counters["in"] == counters["out"] + counters["dropped.too_short"] and counters["out"] > 0, out
        assert steps["write_excluded_length_filter"]["counters"]["out"] == counters["dropped.too_short"], out
        assert steps["write_documents"]["counters"]["out"] == counters["out"], out
    assert runs[ordinary]["length_filter"]["counters"] == runs[resumable]["length_filter"]["counters"]

    kept, dropped = _rows(ordinary / "documents"), _rows(ordinary / "excluded" / "length_filter")
    assert all(len(row["text"]) >= MIN_CHARS for row in kept)
    assert {row["metadata"]["filter_reason"] for row in dropped} == {"too_short"}
    assert _rows(resumable / "documents") == kept
    assert _rows(resumable / "excluded" / "length_filter") == dropped
    markers = [json.loads(path.read_text()) for path in (resumable / "_completed").glob("*.json")]
    assert len(markers) == 2
    assert sum(marker["counts"]["excluded"]["length_filter"] for marker in markers) == len(dropped)


def test_construction_errors_are_configuration_errors_naming_what_to_fix(data_dir, tmp_path):
    fineweb = pipeline_spec("fineweb")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    refusals = {
        "--input": (["--input", str(tmp_path / "*.warc.gz")], "No files match"),
        "--lid_model": (["--input", warc, "--lid_model", str(tmp_path / "lid.bin")], "beamtrove assets fetch"),
        "--skip": (["--input", warc, "--resumable", "--skip", "3"], "do not apply to --resumable"),
        "--input_ranges": (["--input_ranges", str(tmp_path / "ranges.json")], "No such file"),
    }
    for option, (argv, message) in refusals.items():
        with pytest.raises(ConfigurationError, match=message):
            build(fineweb, parse(fineweb, [*argv, "--output", str(tmp_path / "out")]))
        assert not (tmp_path / "out").exists(), option


def test_the_graph_applies_the_declared_steps_in_order_with_their_writers(data_dir, tmp_path, request):
    fineweb = pipeline_spec("fineweb")
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    options = parse(fineweb, ["--input", warc, "--output", str(tmp_path), "--dump", "CC-MAIN-2020-34"])
    built = build(fineweb, options)
    # Built, not run: its output's lock (and the heartbeat renewing it) goes with the test.
    request.addfinalizer(built.output.abandon)
    assert built.flow.output == built.output.output == str(tmp_path / "CC-MAIN-2020-34")
    # Everything is written in the run's staging folder, and published into the dump's folder at the end.
    assert built.flow.write_to == built.output.write_to
    assert built.flow.write_to.startswith(str(tmp_path / "CC-MAIN-2020-34" / ".beamtrove-staging") + "/")
    assert built.flow.sink.documents_dir == f"{built.flow.write_to}/documents"
    steps = [step.name for step in built.flow.steps]
    assert steps == [
        "add_dump", "url_filter", "language_screen", "extract", "language_filter", "gopher_repetition",
        "gopher_quality", "c4_quality", "fineweb_quality",
    ]  # fmt: skip
    labels = [t.full_label for t in built.pipeline.transforms_stack[0].parts]
    before = ("url_filter", "language_screen")
    filters = ("language_filter", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
    with_writers = {rule: [rule, f"write_excluded_{rule}"] for rule in (*before, *filters)}
    assert labels == [
        "read", "add_dump", *(label for rule in before for label in with_writers[rule]), "extract",
        *(label for rule in filters for label in with_writers[rule]),
        "write_documents", "FlattenDeadLetters", "write_dead_letters", "FlattenWritten", "Publish",
    ]  # fmt: skip
