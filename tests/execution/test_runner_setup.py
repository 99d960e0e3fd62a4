"""Obtaining the runner parts from package registries: Prism, the Flink job-server jar, a Flink distribution."""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from beamtrove.execution.runner_parts import (
    JOB_SERVER_MAIN_CLASS,
    beam_version,
    default_flink_minor,
    job_server_main_class,
    part_path,
    part_present,
)
from beamtrove.execution.runner_setup import _unpack_flink, setup_runners
from beamtrove.options import ConfigurationError
from tests.execution.conftest import job_server_like_jar, local_parts, read_documents, runners_command


def test_setup_refuses_unknown_parts_and_versions(tmp_path):
    with pytest.raises(ValueError, match="Unknown runner part"):
        setup_runners(["spark"], tmp_path)
    with pytest.raises(ValueError, match="Unknown Flink version"):
        setup_runners(["flink-dist"], tmp_path, flink_minor="1.8")
    result = runners_command("setup", "--runner", "prism", "--job-server-jar", "x.jar", "--dir", str(tmp_path))
    assert result.returncode == 2 and "--job-server-jar needs --runner flink" in result.stderr


def test_a_missing_go_or_maven_is_reported_with_what_to_install(tmp_path):
    # PATH holds this Python and nothing else: no go, no mvn.
    env = {**os.environ, "PATH": str(pathlib.Path(sys.executable).parent)}
    assert shutil.which("go", path=env["PATH"]) is None and shutil.which("mvn", path=env["PATH"]) is None
    result = runners_command(
        "setup", "--runner", "prism", "--runner", "flink-job-server", "--dir", str(tmp_path), env=env, timeout=120
    )
    assert result.returncode == 1
    assert re.search(r"^prism\s+failed\s+go not found", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^flink-job-server\s+failed\s+mvn not found", result.stdout, re.MULTILINE)
    assert "what to do: install Go (https://go.dev/dl) and put go on PATH" in result.stderr
    assert "what to do: install Maven and put mvn on PATH; or build the jar from Beam's source tree" in result.stderr
    parts = json.loads((tmp_path / "runners.json").read_text())["parts"]
    assert parts["prism"]["status"] == parts["flink-job-server"]["status"] == "failed"
    assert parts["prism"]["command"] == [
        "go",
        "install",
        f"github.com/apache/beam/sdks/v2/go/cmd/prism@v{beam_version()}",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".setup.lock", "runners.json"]


def test_unpacking_takes_only_the_distribution_and_nothing_outside_it(tmp_path):
    sdist = tmp_path / "apache_flink_libraries-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, data in {
            "apache_flink_libraries-9.9.9/setup.py": b"print('not taken')",
            "apache_flink_libraries-9.9.9/NOTICE": b"notice",
            "apache_flink_libraries-9.9.9/deps/lib/flink-dist-9.9.9.jar": b"PK",
            "apache_flink_libraries-9.9.9/deps/bin/bash-java-utils.jar": b"PK",
        }.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    home = tmp_path / "home"
    home.mkdir()
    _unpack_flink(sdist, home)
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == [
        "NOTICE", "bin/bash-java-utils.jar", "lib/flink-dist-9.9.9.jar",
    ]  # fmt: skip

    escaping = tmp_path / "apache_flink_libraries-6.6.6.tar.gz"
    with tarfile.open(escaping, "w:gz") as archive:
        member = tarfile.TarInfo("apache_flink_libraries-6.6.6/deps/../../../escaped.txt")
        member.size = 1
        archive.addfile(member, io.BytesIO(b"x"))
    target = tmp_path / "home2"
    target.mkdir()
    with pytest.raises(tarfile.TarError):
        _unpack_flink(escaping, target)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()


@pytest.mark.network
def test_job_server_setup_gets_the_jar_or_records_what_maven_said(tmp_path):
    minor = default_flink_minor()
    coordinates = f"org.apache.beam:beam-runners-flink-{minor}-job-server:{beam_version()}"
    jar = part_path("flink-job-server", tmp_path)
    result = runners_command("setup", "--runner", "flink-job-server", "--dir", str(tmp_path), timeout=600)
    record = json.loads((tmp_path / "runners.json").read_text())["parts"]["flink-job-server"]
    if result.returncode == 0:
        # Maven serves the jar: it is there, it is Beam's job server, and runs are pointed at it.
        assert jar.is_file() and job_server_main_class(jar) == JOB_SERVER_MAIN_CLASS
        assert record["status"] == "present" and record["path"] == str(jar) and record["coordinates"] == coordinates
        assert local_parts(["--runner", "FlinkRunner"], tmp_path) == {"flink_job_server_jar": str(jar)}
        return
    # What this machine's Maven does: no Beam Flink job-server artifact is served.
    assert result.returncode == 1, result.stderr
    assert re.search(r"^flink-job-server\s+failed\s+Maven could not provide", result.stdout, re.MULTILINE)
    assert "beamtrove: error: flink-job-server could not be obtained" in result.stderr
    assert "tried: mvn -B -ntp -U org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy" in result.stderr
    assert f"-Dartifact={coordinates}:jar" in result.stderr
    assert f"./gradlew :runners:flink:{minor}:job-server:shadowJar" in result.stderr
    assert "--job-server-jar JAR" in result.stderr and "--flink_job_server_jar JAR" in result.stderr
    assert record["status"] == "failed" and record["coordinates"] == coordinates
    assert record["command"][0] == "mvn" and f"-Dartifact={coordinates}:jar" in record["command"]
    assert coordinates in record["error"]
    assert not jar.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".flink-job-server")]
    listing = runners_command("path", "--dir", str(tmp_path))
    assert re.search(r"^flink-job-server\s+failed\s", listing.stdout, re.MULTILINE)
    assert "last attempt: Maven could not provide" in listing.stdout
    with pytest.raises(ConfigurationError, match=r"could not obtain it\): build the jar from Beam's source tree"):
        local_parts(["--runner", "FlinkRunner"], tmp_path)


@pytest.mark.network
def test_a_job_server_jar_built_elsewhere_is_registered_and_anything_else_refused(tmp_path, flink_home):
    runners = tmp_path / "runners"
    # Flink's own Python jar is a real jar, but not Beam's job server.
    not_a_job_server = next((flink_home / "opt").glob("flink-python-*.jar"))
    refused = runners_command("setup", "--runner", "flink-job-server", "--job-server-jar", str(not_a_job_server),
                              "--dir", str(runners))  # fmt: skip
    assert refused.returncode == 1
    assert f"{not_a_job_server} is not a Beam Flink job-server jar: it has Main-Class none" in refused.stderr
    assert json.loads((runners / "runners.json").read_text())["parts"]["flink-job-server"]["status"] == "failed"

    built = job_server_like_jar(tmp_path / "beam-runners-flink-job-server-local.jar")
    registered = runners_command(
        "setup", "--runner", "flink-job-server", "--job-server-jar", str(built), "--dir", str(runners)
    )
    assert registered.returncode == 0, registered.stderr
    jar = part_path("flink-job-server", runners)
    assert jar.read_bytes() == built.read_bytes()
    record = json.loads((runners / "runners.json").read_text())["parts"]["flink-job-server"]
    assert record["status"] == "present" and record["source"] == f"local file {built}"
    assert record["main_class"] == JOB_SERVER_MAIN_CLASS and len(record["sha256"]) == 64
    assert local_parts(["--runner", "FlinkRunner"], runners) == {"flink_job_server_jar": str(jar)}
    again = runners_command("setup", "--runner", "flink-job-server", "--dir", str(runners))
    assert again.returncode == 0 and re.search(r"^flink-job-server\s+reused\s", again.stdout, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.network
def test_prism_setup_then_a_pipeline_runs_on_it(tmp_path, movie_reviews):
    runners = tmp_path / "runners"
    prism = part_path("prism", runners)
    reused = part_present("prism")
    if reused:
        # $BEAMTROVE_RUNNERS holds one already: setup must check and reuse it rather than build it again.
        prism.parent.mkdir(parents=True)
        shutil.copy2(part_path("prism"), prism)
    first = runners_command("setup", "--runner", "prism", "--dir", str(runners))
    assert first.returncode == 0, first.stderr
    status = "reused" if reused else "obtained"
    assert re.search(rf"^prism\s+{status}\s+{re.escape(str(prism))}$", first.stdout, re.MULTILINE), first.stdout
    record = json.loads((runners / "runners.json").read_text())["parts"]["prism"]
    assert record["status"] == "present" and record["path"] == str(prism)
    if shutil.which("go"):
        built = subprocess.run(["go", "version", "-m", str(prism)], capture_output=True, text=True, check=True)
        assert re.search(rf"^\s+mod\s+github.com/apache/beam/sdks/v2\s+v{re.escape(beam_version())}\s", built.stdout,
                         re.MULTILINE)  # fmt: skip
    mtime = prism.stat().st_mtime_ns
    second = runners_command("setup", "--runner", "prism", "--dir", str(runners))
    assert second.returncode == 0 and re.search(r"^prism\s+reused\s", second.stdout, re.MULTILINE)
    assert prism.stat().st_mtime_ns == mtime

    reviews = tmp_path / "reviews.jsonl"
    texts = list(movie_reviews.items())[:40]
    reviews.write_text("".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in texts))
    output = tmp_path / "out"
    argv = ["--input", str(reviews), "--output", str(output), "--runner", "PrismRunner", "--environment_type",
            "LOOPBACK"]  # fmt: skip
    assert local_parts(argv, runners) == {"prism_location": str(prism)}
    # beamtrove run points the run at the runners directory's Prism by itself: nothing is downloaded.
    env = {**os.environ, "BEAMTROVE_RUNNERS": str(runners)}
    run = subprocess.run([sys.executable, "-m", "beamtrove", "run", "convert", *argv],
                         capture_output=True, text=True, timeout=600, check=False, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    documents = read_documents(output)
    assert sorted(document["id"] for document in documents) == sorted(name for name, _ in texts)
    stats = json.loads((output / "stats.json").read_text())
    assert stats["runner"] == "PrismRunner" and stats["state"] == "DONE"
