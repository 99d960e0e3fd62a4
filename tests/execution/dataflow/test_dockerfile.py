"""The Flex Template image's Dockerfile, checked offline: no Docker daemon or registry is needed.

The file is parsed here (instructions, line continuations, build arguments,
stages) and, where the dockerfile-parse package is installed, by it as well.
"""

from __future__ import annotations

import io
import json
import pathlib
import re
import shlex
import sys

import apache_beam
import pytest

from beamtrove.execution.dataflow import launch

REPO = pathlib.Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"
KEYWORDS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL", "MAINTAINER",
    "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip
LAUNCHER = "/opt/google/dataflow/python_template_launcher"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` per instruction: comments dropped, continuation lines joined."""
    instructions, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), " ".join(arguments.split())))
        pending = ""
    assert not pending, "the Dockerfile ends in a line continuation"
    return instructions


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return _instructions(DOCKERFILE.read_text())


def _stages(instructions) -> list[dict]:
    """Each stage's image (build arguments resolved to their defaults), name and instructions."""
    arguments, stages = {}, []
    for keyword, value in instructions:
        if keyword == "ARG" and not stages:
            name, _, default = value.partition("=")
            arguments[name] = default
        elif keyword == "FROM":
            image, _, name = re.sub(r"\$\{?(\w+)\}?", lambda m: arguments[m.group(1)], value).partition(" AS ")
            stages.append({"image": image, "name": name or None, "instructions": []})
        else:
            stages[-1]["instructions"].append((keyword, value))
    return stages


def _env(stage: dict) -> dict[str, str]:
    return dict(value.split("=", 1) for keyword, value in stage["instructions"] if keyword == "ENV")


def _copies(stage: dict) -> list[tuple[dict, list[str], str]]:
    """``(flags, sources, destination)`` of each COPY, destinations made absolute with the WORKDIR then."""
    workdir, copies = "/", []
    for keyword, value in stage["instructions"]:
        if keyword == "WORKDIR":
            workdir = str(pathlib.PurePosixPath(workdir, value))
        elif keyword == "COPY":
            words = shlex.split(value)
            flags = dict(word[2:].split("=", 1) for word in words if word.startswith("--"))
            paths = [word for word in words if not word.startswith("--")]
            destination = str(pathlib.PurePosixPath(workdir, paths[-1]))
            copies.append((flags, paths[:-1], destination + ("/" if paths[-1].endswith("/") else "")))
    return copies


def _repo_file(stage: dict, image_path: str) -> pathlib.Path:
    """The repository file that ends up at ``image_path`` through the stage's COPY instructions."""
    for flags, sources, destination in _copies(stage):
        if flags:
            continue
        for source in sources:
            if (REPO / source).is_dir():
                image_dir = destination.rstrip("/")
                if image_path.startswith(f"{image_dir}/"):
                    return REPO / source / image_path[len(image_dir) + 1 :]
            elif image_path == (
                destination + pathlib.PurePosixPath(source).name if destination.endswith("/") else destination
            ):
                return REPO / source
    raise AssertionError(f"nothing from the repository is copied to {image_path}")


def test_only_known_instructions(instructions):
    assert instructions, "no instruction found"
    assert {keyword for keyword, _ in instructions} <= KEYWORDS
    assert instructions[-1] == ("ENTRYPOINT", '["/opt/apache/beam/boot"]')


def test_images_match_the_installed_beam_and_python(instructions):
    launcher, final = _stages(instructions)

    # Workers need Beam's image of the very Beam version that builds the job, and one Python throughout.
    assert final["image"] == f"apache/beam_python{PYTHON}_sdk:{apache_beam.version.__version__}"
    assert re.fullmatch(
        rf"gcr\.io/dataflow-templates-base/python{PYTHON.replace('.', '')}-template-launcher-base:[\w.-]+",
        launcher["image"],
    )
    assert launcher["name"] == "launcher" and launcher["instructions"] == []
    beam_pin = re.search(r'"apache-beam\[gcp\]==([^"]+)"', (REPO / "setup.py").read_text())
    assert beam_pin is not None and beam_pin.group(1) == apache_beam.version.__version__


def test_launcher_binary_comes_from_the_launcher_stage(instructions):
    launcher, final = _stages(instructions)

    launcher_dir = str(pathlib.PurePosixPath(LAUNCHER).parent) + "/"
    assert ({"from": launcher["name"]}, [launcher_dir], launcher_dir) in _copies(final)


def test_copied_sources_exist_and_are_installed(instructions):
    _, final = _stages(instructions)
    local = [(sources, destination) for flags, sources, destination in _copies(final) if not flags]

    # What setup.py needs to install the dependencies comes first, so that a change to the code reuses that layer.
    assert local == [
        (["setup.py", "README.md"], "/template/"),
        (["beamtrove/__init__.py"], "/template/beamtrove/"),
        (["beamtrove/"], "/template/beamtrove/"),
    ]
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    for sources, _ in local:
        for source in sources:
            assert (REPO / source).exists(), source
            # The build context holds only what the whitelist lets in.
            assert f"!{source.split('/')[0]}" in ignored or f"!{source.split('/')[0]}/" in ignored, source
    steps = [(keyword, value) for keyword, value in final["instructions"] if keyword in ("COPY", "RUN")]
    dependencies = next(i for i, (keyword, value) in enumerate(steps) if value.startswith("pip install"))
    assert re.fullmatch(r'pip install --no-cache-dir "\.(\[[\w,]+\])?"', steps[dependencies][1])
    assert steps[dependencies + 1 : dependencies + 3] == [
        ("COPY", "beamtrove/ beamtrove/"),
        ("RUN", "pip install --no-cache-dir --no-deps --force-reinstall ."),
    ]
    runs = [value for keyword, value in steps if keyword == "RUN"]
    # The assets land where the pipelines' defaults look for them on the launcher and the workers alike.
    assert runs.index("beamtrove assets fetch") > 0
    assert _env(final)["BEAMTROVE_ASSETS"] == "/opt/beamtrove/assets"


def test_template_files_are_the_launcher_module_and_setup_py(instructions):
    _, final = _stages(instructions)
    env = _env(final)

    launcher_file = _repo_file(final, env["FLEX_TEMPLATE_PYTHON_PY_FILE"])
    assert launcher_file == REPO / "beamtrove" / "execution" / "dataflow" / "launch.py"
    # Run as a file, the module must start the launch itself.
    assert 'if __name__ == "__main__":\n' in launcher_file.read_text()
    assert launch.main.__module__ == "beamtrove.execution.dataflow.launch"
    assert _repo_file(final, env["FLEX_TEMPLATE_PYTHON_SETUP_FILE"]) == REPO / "setup.py"


def test_entrypoint_is_the_beam_worker_boot(instructions):
    entrypoints = [json.loads(value) for keyword, value in instructions if keyword == "ENTRYPOINT"]

    assert entrypoints == [["/opt/apache/beam/boot"]]


def test_dockerfile_parse_reads_it_the_same():
    dockerfile_parse = pytest.importorskip("dockerfile_parse")
    text = DOCKERFILE.read_text()
    parser = dockerfile_parse.DockerfileParser(fileobj=io.BytesIO(text.encode()))

    theirs = [(item["instruction"], " ".join(item["value"].split())) for item in parser.structure]
    assert [entry for entry in theirs if entry[0] != "COMMENT"] == _instructions(text)
    assert parser.parent_images == [stage["image"] for stage in _stages(_instructions(text))]
    assert parser.baseimage == f"apache/beam_python{PYTHON}_sdk:{apache_beam.version.__version__}"
    assert parser.envs["FLEX_TEMPLATE_PYTHON_PY_FILE"] == "/template/beamtrove/execution/dataflow/launch.py"
