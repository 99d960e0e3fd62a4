"""Runner options Beam accepts but that would spoil a run are refused before anything is built."""

from __future__ import annotations

import json
import re

import pytest

from beamtrove.cli import main
from beamtrove.execution.build import build
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import pipeline_spec
from tests.conftest import jsonl_rows


def test_multi_threading_is_refused_with_the_modes_to_use_instead(review_jsonl, tmp_path, capsys):
    # Issue 16, case 12: --direct_running_mode=multi_threading, which drops elements on Beam 2.77, was accepted.
    convert = pipeline_spec("convert")
    argv = ["--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(tmp_path / "out")]
    refusal = re.escape("multi_threading silently drops elements on Beam 2.77: use in_memory")
    with pytest.raises(ConfigurationError, match=refusal):
        build(convert, parse(convert, [*argv, "--direct_running_mode=multi_threading"]))
    assert main(["run", "convert", *argv, "--direct_running_mode", "multi_threading"]) == 2
    assert "multi_processing (with --direct_num_workers)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_the_other_running_modes_run(review_jsonl, tmp_path, mode):
    out = tmp_path / mode
    argv = ["run", "convert", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(out)]
    assert main([*argv, "--direct_running_mode", mode]) == 0
    # 600 reviews, and one malformed row that is a dead letter.
    assert json.loads((out / "stats.json").read_text())["steps"]["write"]["counters"]["out"] == 600
    assert len(jsonl_rows(out)) == 600
