"""Where the runner parts live, and how runs are pointed at them."""

from __future__ import annotations

import pathlib
import re
import stat

import pytest

from beamtrove.execution.runner_parts import (
    FLINK_RELEASES,
    beam_version,
    default_flink_minor,
    job_server_hint,
    part_path,
    part_states,
)
from beamtrove.options import ConfigurationError
from tests.execution.conftest import job_server_like_jar, local_parts


def _executable(path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_prism_and_flink_runs_are_pointed_at_the_parts_present(tmp_path, monkeypatch):
    runners = tmp_path / "runners"
    monkeypatch.setenv("BEAMTROVE_RUNNERS", str(runners))
    for argv in (["--runner", "PrismRunner"], [], ["--runner", "DirectRunner"]):
        assert local_parts(argv) == {}
    # Beam would look for an absent job-server jar in a Maven repository, which has none for most Flink versions.
    with pytest.raises(ConfigurationError, match=r"run `beamtrove runners setup --runner flink-job-server`"):
        local_parts(["--runner", "FlinkRunner"])
    assert local_parts(["--runner", "FlinkRunner", "--job_endpoint", "localhost:8099"]) == {}
    prism = _executable(runners / f"prism-{beam_version()}" / "prism")
    jar = part_path("flink-job-server", runners)
    jar.parent.mkdir(parents=True)
    job_server_like_jar(jar)
    assert jar.name == f"beam-runners-flink-{default_flink_minor()}-job-server-{beam_version()}.jar"

    for spelling in ("PrismRunner", "prism", "Prism", "apache_beam.runners.portability.prism_runner.PrismRunner"):
        assert local_parts(["--input", "x", "--runner", spelling]) == {"prism_location": str(prism)}
    assert local_parts(["--runner=PrismRunner"]) == {"prism_location": str(prism)}
    assert local_parts(["--runner", "PrismRunner", "--prism_location", "/opt/prism"]) == {}
    for spelling in ("FlinkRunner", "flink", "--runner=FlinkRunner"):
        argv = [spelling] if spelling.startswith("--") else ["--runner", spelling]
        assert local_parts(argv) == {"flink_job_server_jar": str(jar)}
    assert local_parts(["--runner", "FlinkRunner", "--flink_job_server_jar", "/opt/js.jar"]) == {}
    # A jar for another Flink version is not passed to a run that asks for that version.
    other = next(minor for minor in FLINK_RELEASES if minor != default_flink_minor())
    with pytest.raises(ConfigurationError, match=re.escape(f"Beam's Flink {other} job-server jar")):
        local_parts(["--runner", "FlinkRunner", "--flink_version", other])
    # The DirectRunner tries Prism on its own and falls back when it cannot; it is left alone.
    assert local_parts([]) == {}
    assert local_parts(["--runner", "DirectRunner"]) == {}
    assert local_parts(["--runner", "DataflowRunner"]) == {}

    # An explicit directory wins over the environment.
    assert local_parts(["--runner", "PrismRunner"], tmp_path / "elsewhere") == {}


def test_a_flink_run_after_a_failed_setup_is_told_how_to_build_the_jar(tmp_path):
    (tmp_path / "runners.json").write_text('{"parts": {"flink-job-server": {"status": "failed"}}}')
    with pytest.raises(ConfigurationError) as refused:
        local_parts(["--runner", "FlinkRunner"], tmp_path)
    assert str(refused.value) == (
        f"The FlinkRunner needs Beam's Flink {default_flink_minor()} job-server jar, and {tmp_path} has none "
        f"(`beamtrove runners setup` could not obtain it): {job_server_hint(default_flink_minor())}."
    )


def test_part_states_say_what_is_present_missing_or_failed(tmp_path):
    runners = tmp_path / "runners"
    _executable(part_path("prism", runners))
    runners.joinpath("runners.json").write_text(
        '{"parts": {"flink-dist": {"status": "failed", "error": "pip download failed (exit 1): no such package"}}}'
    )
    states = part_states(runners)
    assert states["runners_dir"] == str(runners) and states["beam_version"] == beam_version()
    assert states["parts"]["prism"] == {"status": "present", "path": str(part_path("prism", runners))}
    assert states["parts"]["flink-job-server"]["status"] == "missing"
    assert states["parts"]["flink-dist"] == {
        "status": "failed",
        "path": str(part_path("flink-dist", runners)),
        "error": "pip download failed (exit 1): no such package",
    }
