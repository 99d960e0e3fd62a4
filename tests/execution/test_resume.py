"""What a resumable run skips, and what it refuses, over the real WARC files."""

from __future__ import annotations

import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.execution.resume import configuration, pending_inputs
from beamtrove.fs import match_inputs
from beamtrove.layout import COMPLETED_DIR, RESUME_CONFIG_FILE, RESUME_TEMP_DIR, input_stem
from beamtrove.pipelines.fineweb import SPEC


@pytest.fixture
def warcs(data_dir):
    return match_inputs(str(data_dir / "warc" / "*.warc.gz"), (".warc.gz",))


def _config(*args: str) -> dict:
    options = PipelineOptions(["--input", "in", "--output", "out", "--runner", "DirectRunner", *args])
    return configuration("fineweb", options, SPEC.options)


def test_configuration_holds_the_results_options_only():
    config = _config("--language_threshold", "0.5")
    assert config["pipeline"] == "fineweb"
    assert config["options"]["language_threshold"] == 0.5
    assert config["options"]["extractor"] == "trafilatura"
    assert {"input", "output", "runner"}.isdisjoint(config["options"])
    assert _config() != config


def test_inputs_with_a_marker_are_skipped_and_leftovers_removed(warcs, tmp_path):
    config = _config()
    pending, sha = pending_inputs(warcs, str(tmp_path), config)
    assert pending == warcs and len(warcs) == 5
    assert json.loads((tmp_path / RESUME_CONFIG_FILE).read_text()) == config
    (tmp_path / COMPLETED_DIR).mkdir()
    done = warcs[1]
    marker = {"input": done.url, "name": done.name, "size": done.size, "config_sha256": sha}
    (tmp_path / COMPLETED_DIR / f"{input_stem(done)}.json").write_text(json.dumps(marker))
    (tmp_path / RESUME_TEMP_DIR / "killed").mkdir(parents=True)
    (tmp_path / RESUME_TEMP_DIR / "killed" / "half.jsonl.gz").write_bytes(b"\x1f\x8b")
    assert pending_inputs(warcs, str(tmp_path), config) == ([w for w in warcs if w != done], sha)
    assert not (tmp_path / RESUME_TEMP_DIR).exists()


def test_an_input_that_changed_since_its_completion_is_refused(warcs, tmp_path):
    config = _config()
    _, sha = pending_inputs(warcs, str(tmp_path), config)
    (tmp_path / COMPLETED_DIR).mkdir()
    done = warcs[0]
    marker = {"input": done.url, "name": done.name, "size": done.size + 1, "config_sha256": sha}
    (tmp_path / COMPLETED_DIR / f"{input_stem(done)}.json").write_text(json.dumps(marker))
    with pytest.raises(ValueError, match=f"{done.size} bytes.*is not the input completed.*--restart"):
        pending_inputs(warcs, str(tmp_path), config)
