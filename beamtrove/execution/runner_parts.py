"""The runners beamtrove pipelines can use besides the DirectRunner: which parts they need, where they live.

``beamtrove runners setup`` (:mod:`beamtrove.execution.runner_setup`) obtains
them from package registries only, into a runners directory
(``$BEAMTROVE_RUNNERS``, else ``~/.cache/beamtrove/runners``), so that
``beamtrove run`` never downloads anything at run time:

* ``prism``: Beam's Prism runner, built by ``go install`` from the Go module
  of the installed Beam version, as ``prism-<beam>/prism``.
* ``flink-job-server``: Beam's Flink job-server jar for the installed Beam
  version, as ``flink-job-server-<beam>/beam-runners-flink-<minor>-job-server-<beam>.jar``.
* ``flink-dist``: a Flink distribution (``lib/``, ``opt/``, ``plugins/``,
  ``bin/bash-java-utils.jar``) from the PyPI package ``apache-flink-libraries``,
  as ``flink-<version>/``, with a ``conf/`` for a one-machine cluster.

``runners.json`` in the runners directory records, per part, the local path
and where it came from, or the command that failed and the registry's error.
:func:`use_local_runner_parts` points a Prism or Flink run at what is present
(``--prism_location``, ``--flink_job_server_jar``).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import zipfile
from typing import TYPE_CHECKING

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.flink import is_flink_home

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

__all__ = [
    "FLINK_RELEASES",
    "JOB_SERVER_MAIN_CLASS",
    "PARTS",
    "beam_version",
    "default_flink_minor",
    "default_runners_dir",
    "job_server_artifact",
    "job_server_hint",
    "job_server_main_class",
    "part_path",
    "part_present",
    "part_states",
    "prism_module_version",
    "read_manifest",
    "runner_kind",
    "use_local_runner_parts",
]

_LOGGER = logging.getLogger(__name__)

PARTS = ("prism", "flink-job-server", "flink-dist")
#: Flink minor version -> the apache-flink-libraries release beamtrove installs for it. Only the minors Beam
#: publishes a Flink runner for; 2.2.1 is the one exercised by the tests (on Java 17).
FLINK_RELEASES = {"1.19": "1.19.3", "1.20": "1.20.5", "2.0": "2.0.2", "2.1": "2.1.3", "2.2": "2.2.1"}
#: The Main-Class of a Beam Flink job-server jar (what ``java -jar`` runs when Beam starts it).
JOB_SERVER_MAIN_CLASS = "org.apache.beam.runners.flink.FlinkJobServerDriver"
PRISM_MODULE = "github.com/apache/beam/sdks/v2"
MANIFEST = "runners.json"


def beam_version() -> str:
    """The installed Apache Beam version, e.g. ``"2.77.0"``."""
    # Read from the installed package's metadata: where the parts are and what to fetch is told without Beam's
    # import, which only runs pay for (nor the metadata reader's, which only this needs).
    from importlib import metadata  # noqa: PLC0415

    return metadata.version("apache-beam")


def default_flink_minor() -> str:
    """The newest Flink minor version the installed Beam publishes a Flink runner for and beamtrove pins."""
    # Beam's import is paid only when the Flink version must come from it: the rest of this module needs no Beam.
    from apache_beam.options.pipeline_options import FlinkRunnerOptions  # noqa: PLC0415

    published = [minor for minor in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS if minor in FLINK_RELEASES]
    if not published:
        raise RuntimeError(f"Beam {beam_version()} publishes no Flink runner for {', '.join(FLINK_RELEASES)}.")
    return max(published, key=lambda minor: tuple(int(part) for part in minor.split(".")))


def default_runners_dir() -> pathlib.Path:
    """Returns ``$BEAMTROVE_RUNNERS`` if set, else ``~/.cache/beamtrove/runners``."""
    configured = os.environ.get("BEAMTROVE_RUNNERS")
    return pathlib.Path(configured) if configured else pathlib.Path.home() / ".cache" / "beamtrove" / "runners"


def job_server_artifact(flink_minor: str) -> str:
    """The Maven artifact id of Beam's Flink job server for a Flink minor version."""
    return f"beam-runners-flink-{flink_minor}-job-server"


def part_path(part: str, runners_dir: str | os.PathLike | None = None, flink_minor: str | None = None) -> pathlib.Path:
    """Where ``part`` lives in the runners directory, whether or not it is there.

    Args:
        part: One of :data:`PARTS`.
        runners_dir: The runners directory; defaults to :func:`default_runners_dir`.
        flink_minor: The Flink minor version (``"2.2"``) of the job server or
            distribution; defaults to :func:`default_flink_minor`.

    Returns:
        The Prism binary, the job-server jar, or the Flink home directory.
    """
    root = pathlib.Path(runners_dir) if runners_dir else default_runners_dir()
    minor = flink_minor or default_flink_minor()
    if part == "prism":
        return root / f"prism-{beam_version()}" / "prism"
    if part == "flink-job-server":
        return root / f"flink-job-server-{beam_version()}" / f"{job_server_artifact(minor)}-{beam_version()}.jar"
    if part == "flink-dist":
        return root / f"flink-{FLINK_RELEASES[minor]}"
    raise ValueError(f"Unknown runner part {part!r}: choose from {', '.join(PARTS)}.")


def part_present(part: str, runners_dir: str | os.PathLike | None = None, flink_minor: str | None = None) -> bool:
    """Tells whether ``part`` is complete in the runners directory (file checks only, no process started)."""
    path = part_path(part, runners_dir, flink_minor)
    if part == "prism":
        return path.is_file() and os.access(path, os.X_OK)
    if part == "flink-job-server":
        return path.is_file()
    return is_flink_home(path)


def read_manifest(runners_dir: str | os.PathLike | None = None) -> dict:
    """The runners directory's ``runners.json`` (``{"parts": {}}`` when there is none)."""
    path = pathlib.Path(runners_dir or default_runners_dir()) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"parts": {}}
    manifest.setdefault("parts", {})
    return manifest


def job_server_main_class(jar: str | os.PathLike) -> str | None:
    """The ``Main-Class`` of ``jar``'s manifest; None when it has none or is no readable jar."""
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    # Manifest lines are folded at 72 bytes: a continuation line starts with one space.
    unfolded = re.sub(r"\r?\n ", "", manifest)
    match = re.search(r"^Main-Class:\s*(\S+)", unfolded, re.MULTILINE)
    return match.group(1) if match else None


def job_server_hint(flink_minor: str) -> str:
    """What to do when no Beam Flink job-server jar can be had from a registry."""
    return (
        f"build the jar from Beam's source tree at tag v{beam_version()} "
        f"(./gradlew :runners:flink:{flink_minor}:job-server:shadowJar; the jar lands in "
        f"runners/flink/{flink_minor}/job-server/build/libs/), then register it with "
        f"`beamtrove runners setup --runner flink-job-server --job-server-jar JAR`, "
        f"or pass --flink_job_server_jar JAR to beamtrove run (--job-server-jar JAR to beamtrove slurm submit)"
    )


def prism_module_version(binary: pathlib.Path) -> str | None:
    """The Beam Go module version ``binary`` was built from, per ``go version -m``; None when Go cannot tell."""
    go = shutil.which("go")
    if go is None:
        return None
    result = subprocess.run([go, "version", "-m", str(binary)], capture_output=True, text=True, check=False)
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "mod" and fields[1] == PRISM_MODULE:
            return fields[2]
    return None


def runner_kind(runner: str) -> str:
    """The runner a ``--runner`` value names, as Beam matches names: ``direct`` for DirectRunner,
    ``apache_beam.runners.DirectRunner`` or ``direct``; ``prism``, ``flink``, ``dataflow``..."""
    return runner.rsplit(".", 1)[-1].lower().removesuffix("runner")


def use_local_runner_parts(options: PipelineOptions, runners_dir: str | os.PathLike | None = None) -> None:
    """Points a Prism or Flink run at the runner parts in the runners directory, so Beam downloads nothing.

    Sets ``prism_location`` for the Prism runner and ``flink_job_server_jar``
    for the Flink runner, unless the options set them already. An absent Prism
    is logged (Beam downloads it); an absent job-server jar is refused, unless
    ``--job_endpoint`` names a running job server. Other runners are left alone
    (the DirectRunner, which may try Prism on its own, falls back when it
    cannot download it).

    Args:
        options: The run's options; changed in place.
        runners_dir: The runners directory; defaults to :func:`default_runners_dir`.

    Raises:
        ConfigurationError: A Flink run without a job-server jar; the message
            says how to obtain one.
    """
    # Only a run points its options at the parts: the commands that use the rest of this module start without Beam.
    from apache_beam.options.pipeline_options import (  # noqa: PLC0415
        FlinkRunnerOptions,
        PortableOptions,
        PrismRunnerOptions,
        StandardOptions,
    )

    name = runner_kind(options.view_as(StandardOptions).runner or "")
    prism = options.view_as(PrismRunnerOptions)
    if name == "prism" and not prism.prism_location:
        if part_present("prism", runners_dir):
            prism.prism_location = str(part_path("prism", runners_dir))
        else:
            _LOGGER.warning(
                "no local Prism: Beam will try to download it (`beamtrove runners setup --runner prism` avoids that)"
            )
    flink = options.view_as(FlinkRunnerOptions)
    if name == "flink" and not flink.flink_job_server_jar and not options.view_as(PortableOptions).job_endpoint:
        if flink.flink_version in FLINK_RELEASES and part_present("flink-job-server", runners_dir, flink.flink_version):
            flink.flink_job_server_jar = str(part_path("flink-job-server", runners_dir, flink.flink_version))
        else:
            # Beam would look for the jar in a Maven repository, which publishes none for most Flink versions of a
            # Beam release: a 160-line traceback ending in a 404 after a minute.
            raise ConfigurationError(_no_job_server(flink.flink_version, runners_dir))


def _no_job_server(flink_minor: str, runners_dir: str | os.PathLike | None) -> str:
    """What to do when a Flink run has no job-server jar."""
    root = pathlib.Path(runners_dir) if runners_dir else default_runners_dir()
    missing = f"The FlinkRunner needs Beam's Flink {flink_minor} job-server jar, and {root} has none"
    if read_manifest(root)["parts"].get("flink-job-server", {}).get("status") == "failed":
        return f"{missing} (`beamtrove runners setup` could not obtain it): {job_server_hint(flink_minor)}."
    return (
        f"{missing}: run `beamtrove runners setup --runner flink-job-server`, or pass --flink_job_server_jar JAR "
        "(or --job_endpoint of a running job server)."
    )


def part_states(runners_dir: str | os.PathLike | None = None, flink_minor: str | None = None) -> dict:
    """Where each part is and whether it is present (or failed, with its last error), as ``runners path`` shows it."""
    root = pathlib.Path(runners_dir) if runners_dir else default_runners_dir()
    manifest = read_manifest(root)
    rows = {}
    for part in PARTS:
        record = manifest["parts"].get(part, {})
        present = part_present(part, root, flink_minor)
        status = "present" if present else ("failed" if record.get("status") == "failed" else "missing")
        rows[part] = {"status": status, "path": str(part_path(part, root, flink_minor))}
        if status == "failed":
            rows[part]["error"] = record.get("error")
    return {"runners_dir": str(root), "beam_version": beam_version(), "parts": rows}
