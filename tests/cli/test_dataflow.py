"""``beamtrove dataflow``: writing a template spec and a job graph, and what each refuses."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from beamtrove.cli import main
from beamtrove.execution.dataflow.template import flex_template_spec
from tests.conftest import DATA, require

IMAGE = "us-central1-docker.pkg.dev/my-project/beamtrove/beamtrove:test"
WARC = DATA / "warc" / "cc-main-2024-22_whirlwind.warc.gz"


def test_build_template_writes_the_spec_with_the_workers_image(tmp_path, capsys):
    spec_path = tmp_path / "fineweb.json"
    assert main(["dataflow", "build-template", "fineweb", "--image", IMAGE, "--output", str(spec_path)]) == 0
    assert json.loads(spec_path.read_text()) == flex_template_spec("fineweb", IMAGE, sdk_container_image=IMAGE)
    parameters = len(json.loads(spec_path.read_text())["metadata"]["parameters"])
    assert (
        capsys.readouterr().out.strip()
        == f"{spec_path}: Flex Template spec of fineweb ({parameters} parameters) for {IMAGE}"
    )
    # '' leaves Dataflow's own worker image.
    own_workers = tmp_path / "default-workers.json"
    argv = ["dataflow", "build-template", "dedup", "--image", IMAGE, "--output", str(own_workers)]
    assert main([*argv, "--sdk-container-image", ""]) == 0
    assert json.loads(own_workers.read_text())["defaultEnvironment"] == {}


def test_build_template_refuses_an_unknown_pipeline_and_an_unwritable_output(tmp_path, capsys):
    spec_path = tmp_path / "spec.json"
    assert main(["dataflow", "build-template", "finweb", "--image", IMAGE, "--output", str(spec_path)]) == 2
    available = "available: convert, decont_index, dedup, dedup_index, extract, filter, fineweb,"
    assert f"Unknown pipeline 'finweb'; {available}" in capsys.readouterr().err
    assert not spec_path.exists()
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert main(["dataflow", "build-template", "extract", "--image", IMAGE, "--output", str(blocked / "s.json")]) == 2
    assert capsys.readouterr().err.startswith(f"beamtrove: error: cannot write {blocked / 's.json'}: ")
    assert main(["dataflow", "build-template", "extract", "--image", IMAGE, "--output", "x", "--", "--input", "y"]) == 2
    assert "`beamtrove dataflow build-template` takes no pipeline options after --." in capsys.readouterr().err


def test_graph_prints_the_steps_and_writes_the_job(tmp_path, capsys):
    job = tmp_path / "job.json"
    argv = ["dataflow", "graph", "extract", "--output", str(job), "--", f"--input={require(WARC)}", "--output=gs://b/x"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    graph = json.loads(job.read_text())
    assert graph["steps"][0]["name"] == "read" and len(graph["steps"]) == 7
    assert "7 steps" in printed and f"job written to {job}" in printed
    assert graph["job"]["environment"]["sdkPipelineOptions"]["options"]["output"] == "gs://b/x"


def test_build_image_says_what_is_missing_before_running_anything(tmp_path, capsys, monkeypatch):
    repo = pathlib.Path(__file__).resolve().parents[2]
    assert main(["dataflow", "build-image", "--tag", "t", "--context", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"beamtrove: error: {tmp_path} holds no Dockerfile: give --context the folder of a beamtrove clone."
    )
    for local_only in (["--base-tag", "b:1"], ["--rebuild-base"]):
        option = local_only[0]
        assert main(["dataflow", "build-image", "--tag", "t", *local_only, "--context", str(repo)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"beamtrove: error: {option} is about the local base: add --local-base, or leave {option} out."
        )
    # No docker command at all.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["dataflow", "build-image", "--tag", "t", "--context", str(repo)]) == 2
    assert capsys.readouterr().err.strip() == (
        "beamtrove: error: docker is not on PATH: building the image needs Docker (Debian: apt-get install docker.io)."
    )


def test_build_image_says_when_no_docker_daemon_answers(tmp_path, capsys, monkeypatch):
    if shutil.which("docker") is None:
        pytest.skip("no docker command here (Debian: apt-get install docker.io)")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")
    repo = pathlib.Path(__file__).resolve().parents[2]
    assert main(["dataflow", "build-image", "--tag", "t", "--local-base", "--context", str(repo)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("beamtrove: error: docker cannot reach a Docker daemon (") and error.endswith(
        "): start dockerd."
    ), error
