"""What a resumable run skips, redoes and refuses, over the real WARC files."""

from __future__ import annotations

import json
import pathlib
import shutil
import uuid

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.cli import main
from beamtrove.completion import MARKER_CHECKSUM, marker_checksum
from beamtrove.execution.resume import configuration, pending_inputs
from beamtrove.fs import match_inputs
from beamtrove.layout import COMPLETED_DIR, RESUME_CONFIG_FILE, input_stem
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


def _complete(output, file, sha: str, **fields) -> dict:
    """Writes the completion marker a finished input leaves, with ``fields`` on top."""
    marker = {"input": file.url, "name": file.name, "size": file.size, "config_sha256": sha, "outputs": {}, **fields}
    marker[MARKER_CHECKSUM] = marker_checksum(marker)
    (output / COMPLETED_DIR).mkdir(exist_ok=True)
    (output / COMPLETED_DIR / f"{input_stem(file)}.json").write_text(json.dumps(marker))
    return marker


def test_inputs_with_a_marker_are_skipped(warcs, tmp_path):
    config = _config()
    pending, sha = pending_inputs(warcs, str(tmp_path), config)
    assert pending == warcs and len(warcs) == 5
    assert json.loads((tmp_path / RESUME_CONFIG_FILE).read_text()) == config
    done = warcs[1]
    _complete(tmp_path, done, sha)
    assert pending_inputs(warcs, str(tmp_path), config) == ([w for w in warcs if w != done], sha)


def test_a_rerun_removes_what_a_killed_run_left_half_written_and_nothing_else(warcs, tmp_path):
    config = _config()
    pending_inputs(warcs, str(tmp_path), config)
    # What a SIGKILL between writing stats.json under its temporary name and moving it into place leaves.
    (tmp_path / f".stats.json.{uuid.uuid4().hex}.tmp").write_text("{")
    (tmp_path / ".keep.tmp").write_text("not a temporary name of ours")
    pending_inputs(warcs, str(tmp_path), config)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([".keep.tmp", RESUME_CONFIG_FILE])


def test_an_input_that_changed_since_its_completion_is_refused(warcs, tmp_path):
    config = _config()
    _, sha = pending_inputs(warcs, str(tmp_path), config)
    done = warcs[0]
    _complete(tmp_path, done, sha, size=done.size + 1)
    with pytest.raises(ValueError, match=f"{done.size} bytes.*is not the input completed.*--restart"):
        pending_inputs(warcs, str(tmp_path), config)


@pytest.fixture(scope="module")
def resumable_extract(data_dir, tmp_path_factory):
    """A finished resumable extraction of the five real WARC files: its argv, output and files by path."""
    output = tmp_path_factory.mktemp("resumable") / "out"
    argv = [
        "run", "extract", "--input", str(data_dir / "warc" / "*.warc.gz"), "--extractor", "resiliparse",
        "--extract_timeout", "0", "--resumable",
    ]  # fmt: skip
    assert main([*argv, "--output", str(output)]) == 0
    return argv, output, _contents(output)


def _contents(output) -> dict[str, bytes]:
    """Every file of an output but stats.json, report.html and the completion markers, which hold wall-clock times."""
    return {
        str(path.relative_to(output)): path.read_bytes()
        for path in sorted(output.rglob("*"))
        if path.is_file() and path.name not in ("stats.json", "report.html") and path.parent.name != COMPLETED_DIR
    }


def _documents_output(output) -> tuple[pathlib.Path, pathlib.Path]:
    """The largest documents file of an output, and the completion marker naming it."""
    documents = max((output / "documents").iterdir(), key=lambda path: path.stat().st_size)
    return documents, output / COMPLETED_DIR / documents.name.replace(".jsonl.gz", ".json")


def _damage_documents(how: str):
    def damage(output):
        documents, _ = _documents_output(output)
        data = documents.read_bytes()
        if how == "delete":
            documents.unlink()
        elif how == "truncate":
            documents.write_bytes(data[: len(data) // 2])
        else:
            documents.write_bytes(bytes(byte ^ 1 for byte in data[:64]) + data[64:])
        return documents.name

    return damage


def _damage_marker(contents: str):
    def damage(output):
        _, marker = _documents_output(output)
        marker.write_text(contents(json.loads(marker.read_text())))
        return marker.name

    return damage


def _fewer_documents(marker: dict) -> str:
    marker["counts"]["documents"] -= 1
    return json.dumps(marker)


@pytest.mark.parametrize(
    "damage",
    [
        _damage_documents("delete"),
        _damage_documents("truncate"),
        _damage_documents("overwrite"),
        _damage_marker(_fewer_documents),
        _damage_marker(lambda marker: "[]"),
        _damage_marker(lambda marker: json.dumps(marker)[:-20]),
    ],
    ids=["deleted", "truncated", "overwritten", "marker-edited", "marker-a-list", "marker-cut-short"],
)
def test_a_rerun_redoes_exactly_the_inputs_whose_outputs_or_marker_were_damaged(
    resumable_extract, tmp_path, caplog, damage
):
    argv, original, files = resumable_extract
    output = tmp_path / "out"
    shutil.copytree(original, output)
    stats = json.loads((original / "stats.json").read_text())
    damaged = damage(output)

    assert main([*argv, "--output", str(output)]) == 0
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1 and damaged in warnings[0] and "runs again" in warnings[0], warnings
    rerun = json.loads((output / "stats.json").read_text())
    assert rerun["run_steps"]["process_inputs"]["counters"]["completed"] == 1
    assert _contents(output) == files
    assert (rerun["steps"], rerun["inputs_completed"]) == (stats["steps"], 5)


def test_an_unreadable_configuration_record_is_named(resumable_extract, tmp_path, capsys):
    argv, original, _ = resumable_extract
    output = tmp_path / "out"
    shutil.copytree(original, output)
    (output / RESUME_CONFIG_FILE).write_text("{not json")
    assert main([*argv, "--output", str(output)]) == 2
    assert f"{output / RESUME_CONFIG_FILE} is damaged (not JSON: " in capsys.readouterr().err


def test_a_list_edited_between_runs_is_another_configuration(movie_reviews, tmp_path, capsys):
    folder = tmp_path / "reviews"
    folder.mkdir()
    for part in range(2):
        rows = [{"id": name, "text": text} for name, text in list(movie_reviews.items())[part * 20 : part * 20 + 20]]
        (folder / f"part-{part}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    words = tmp_path / "badwords"
    words.mkdir()
    (words / "en").write_text("tedious\n")
    output = tmp_path / "out"
    argv = ["run", "filter", "--input", str(folder), "--output", str(output), "--steps", "c4_badwords"]
    argv += ["--badwords_dir", str(words), "--resumable", "--progress_interval", "0"]
    assert main(argv) == 0
    # Another list under the same name: resuming would mix what two lists kept.
    (words / "en").write_text("tedious\nboring\n")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"was started with another configuration (differing: what --badwords_dir {words} holds)" in err
