"""Local copies of the runners beamtrove pipelines can use besides the DirectRunner.

``beamtrove runners setup`` obtains them from package registries only, into a
runners directory (``$BEAMTROVE_RUNNERS``, else ``~/.cache/beamtrove/runners``),
so that ``beamtrove run`` never downloads anything at run time:

* ``prism``: Beam's Prism runner, built by ``go install`` from the Go module
  of the installed Beam version, as ``prism-<beam>/prism``.
* ``flink-job-server``: Beam's Flink job-server jar for the installed Beam
  version, fetched from Maven with ``mvn dependency:copy``, as
  ``flink-job-server-<beam>/beam-runners-flink-<minor>-job-server-<beam>.jar``.
  ``--job-server-jar PATH`` registers a jar built elsewhere instead.
* ``flink-dist``: a Flink distribution (``lib/``, ``opt/``, ``plugins/``,
  ``bin/bash-java-utils.jar``) from the PyPI package
  ``apache-flink-libraries``, as ``flink-<version>/``, with a ``conf/`` for a
  one-machine cluster. The package ships no launch scripts, so
  ``beamtrove runners flink jobmanager|taskmanager`` start Flink's JobManager
  and TaskManager entry points with ``java`` directly, sized by Flink's own
  ``BashJavaUtils``.

``runners.json`` in the runners directory records, per part, the local path
and where it came from, or the command that failed and the registry's error.
:func:`runner_defaults` turns what is present into the pipeline options
``beamtrove run`` adds (``--prism_location``, ``--flink_job_server_jar``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence

import apache_beam
from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    PipelineOptions,
    PrismRunnerOptions,
    StandardOptions,
)

from beamtrove.fs import file_sha256, replace_directory, staging_directory

__all__ = [
    "FLINK_RELEASES",
    "JOB_SERVER_MAIN_CLASS",
    "PARTS",
    "FlinkProcess",
    "SetupResult",
    "beam_version",
    "default_flink_minor",
    "default_runners_dir",
    "flink_process",
    "flink_taskmanagers",
    "is_flink_home",
    "job_server_main_class",
    "main",
    "part_path",
    "part_present",
    "read_manifest",
    "runner_defaults",
    "setup_runners",
    "wait_for_taskmanagers",
    "write_flink_config",
]

PARTS = ("prism", "flink-job-server", "flink-dist")
#: Flink minor version -> the apache-flink-libraries release beamtrove installs for it. Only the minors Beam
#: publishes a Flink runner for; 2.2.1 is the one exercised by the tests (on Java 17).
FLINK_RELEASES = {"1.19": "1.19.3", "1.20": "1.20.5", "2.0": "2.0.2", "2.1": "2.1.3", "2.2": "2.2.1"}
#: The Main-Class of a Beam Flink job-server jar (what ``java -jar`` runs when Beam starts it).
JOB_SERVER_MAIN_CLASS = "org.apache.beam.runners.flink.FlinkJobServerDriver"

_PRISM_PACKAGE = "github.com/apache/beam/sdks/v2/go/cmd/prism"
_PRISM_MODULE = "github.com/apache/beam/sdks/v2"
_MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_FLINK_PYPI_PACKAGE = "apache-flink-libraries"
_MANIFEST = "runners.json"
_BASH_JAVA_UTILS = "org.apache.flink.runtime.util.bash.BashJavaUtils"
_BASH_JAVA_UTILS_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:"
_ENTRY_POINTS = {
    "jobmanager": ("org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "GET_JM_RESOURCE_PARAMS"),
    "taskmanager": ("org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "GET_TM_RESOURCE_PARAMS"),
}
# JDK packages Flink and its serializers reach into by reflection; on Java 17 they must be opened explicitly.
_OPENED_PACKAGES = (
    "java.io",
    "java.lang",
    "java.lang.reflect",
    "java.math",
    "java.net",
    "java.nio",
    "java.text",
    "java.time",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.util.concurrent.locks",
    "sun.nio.ch",
)
_JAVA_MODULE_FLAGS = (
    *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in _OPENED_PACKAGES),
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
)
_ERROR_TAIL = 3000


def beam_version() -> str:
    """The installed Apache Beam version, e.g. ``"2.77.0"``."""
    return apache_beam.__version__


def default_flink_minor() -> str:
    """The newest Flink minor version the installed Beam publishes a Flink runner for and beamtrove pins."""
    published = [minor for minor in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS if minor in FLINK_RELEASES]
    if not published:
        raise RuntimeError(f"Beam {beam_version()} publishes no Flink runner for {', '.join(FLINK_RELEASES)}.")
    return max(published, key=lambda minor: tuple(int(part) for part in minor.split(".")))


def default_runners_dir() -> pathlib.Path:
    """Returns ``$BEAMTROVE_RUNNERS`` if set, else ``~/.cache/beamtrove/runners``."""
    configured = os.environ.get("BEAMTROVE_RUNNERS")
    return pathlib.Path(configured) if configured else pathlib.Path.home() / ".cache" / "beamtrove" / "runners"


def _job_server_artifact(flink_minor: str) -> str:
    return f"beam-runners-flink-{flink_minor}-job-server"


def _job_server_coordinates(flink_minor: str) -> str:
    return f"org.apache.beam:{_job_server_artifact(flink_minor)}:{beam_version()}"


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
        return root / f"flink-job-server-{beam_version()}" / f"{_job_server_artifact(minor)}-{beam_version()}.jar"
    if part == "flink-dist":
        return root / f"flink-{FLINK_RELEASES[minor]}"
    raise ValueError(f"Unknown runner part {part!r}: choose from {', '.join(PARTS)}.")


def is_flink_home(path: str | os.PathLike) -> bool:
    """Tells whether ``path`` holds what beamtrove needs to start Flink: ``lib/flink-dist-*.jar`` and BashJavaUtils."""
    home = pathlib.Path(path)
    return any((home / "lib").glob("flink-dist*.jar")) and (home / "bin" / "bash-java-utils.jar").is_file()


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
    path = pathlib.Path(runners_dir or default_runners_dir()) / _MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"parts": {}}
    manifest.setdefault("parts", {})
    return manifest


def _write_manifest(root: pathlib.Path, manifest: dict) -> pathlib.Path:
    path = root / _MANIFEST
    staging = path.with_name(f".{_MANIFEST}.{os.getpid()}")
    staging.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(path)
    return path


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _tail(text: str, limit: int = _ERROR_TAIL) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


class _PartFailed(Exception):
    """A part could not be obtained; carries what ``runners.json`` records about the attempt."""

    def __init__(self, error: str, hint: str, command: Sequence[str] | None = None, **details):
        super().__init__(error)
        self.record = {"error": error, "hint": hint, **({"command": list(command)} if command else {}), **details}


def _run_tool(
    command: list[str], missing_hint: str, env: dict[str, str] | None = None, **details
) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    except FileNotFoundError as exc:
        raise _PartFailed(f"{command[0]} not found: {exc}", missing_hint, command, **details) from exc


def _java() -> str:
    """The ``java`` of ``$JAVA_HOME``, else the one on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (pathlib.Path(java_home) / "bin" / "java").is_file():
        return str(pathlib.Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("No java found (neither $JAVA_HOME/bin/java nor java on PATH): Flink needs Java 11+.")
    return found


def _java_version(java: str) -> str:
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def _prism_module_version(binary: pathlib.Path) -> str | None:
    """The Beam Go module version ``binary`` was built from, per ``go version -m``; None when Go cannot tell."""
    go = shutil.which("go")
    if go is None:
        return None
    result = subprocess.run([go, "version", "-m", str(binary)], capture_output=True, text=True, check=False)
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "mod" and fields[1] == _PRISM_MODULE:
            return fields[2]
    return None


def _obtain_prism(root: pathlib.Path, flink_minor: str) -> dict:
    final = part_path("prism", root, flink_minor)
    tag = f"v{beam_version()}"
    with staging_directory(root, final.parent.name) as staging:
        command = ["go", "install", f"{_PRISM_PACKAGE}@{tag}"]
        env = {**os.environ, "GOBIN": str(staging)}
        _log(f"prism: GOBIN={final.parent} {' '.join(command)} (builds Prism from the Go module proxy: minutes)")
        result = _run_tool(command, "install Go (https://go.dev/dl) and put go on PATH", env=env)
        if result.returncode or not (staging / "prism").is_file():
            raise _PartFailed(
                f"`{' '.join(command)}` failed (exit {result.returncode}): {_tail(result.stderr)}",
                "install Go (https://go.dev/dl) and make the Go module proxy reachable (GOPROXY), or build Prism "
                "elsewhere and pass --prism_location PATH to beamtrove run",
                command,
                module=f"{_PRISM_PACKAGE}@{tag}",
            )
        replace_directory(staging, final.parent)
    return {
        "path": str(final),
        "version": beam_version(),
        "source": f"go install {_PRISM_PACKAGE}@{tag}",
        "command": command,
        "module_version": _prism_module_version(final),
        "bytes": final.stat().st_size,
    }


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


def _job_server_hint(flink_minor: str) -> str:
    return (
        f"build the jar from Beam's source tree at tag v{beam_version()} "
        f"(./gradlew :runners:flink:{flink_minor}:job-server:shadowJar; the jar lands in "
        f"runners/flink/{flink_minor}/job-server/build/libs/), then register it with "
        f"`beamtrove runners setup --runner flink-job-server --job-server-jar JAR`, "
        f"or pass --flink_job_server_jar JAR to beamtrove run (--job-server-jar JAR to beamtrove slurm submit)"
    )


def _obtain_job_server(root: pathlib.Path, flink_minor: str, local_jar: str | None) -> dict:
    final = part_path("flink-job-server", root, flink_minor)
    coordinates = _job_server_coordinates(flink_minor)
    with staging_directory(root, final.parent.name) as staging:
        if local_jar:
            source = pathlib.Path(local_jar).resolve()
            main_class = job_server_main_class(source) if source.is_file() else None
            if main_class != JOB_SERVER_MAIN_CLASS:
                found = "does not exist" if not source.is_file() else f"has Main-Class {main_class or 'none'}"
                raise _PartFailed(
                    f"{source} is not a Beam Flink job-server jar: it {found}, not {JOB_SERVER_MAIN_CLASS}",
                    _job_server_hint(flink_minor),
                    local_jar=str(source),
                )
            shutil.copyfile(source, staging / final.name)
            record = {"source": f"local file {source}"}
        else:
            command = [
                "mvn", "-B", "-ntp", "-U", f"{_MAVEN_DEPENDENCY_PLUGIN}:copy",
                f"-Dartifact={coordinates}:jar", f"-DoutputDirectory={staging}",
            ]  # fmt: skip
            _log(f"flink-job-server: {' '.join(command)}")
            result = _run_tool(
                command,
                f"install Maven and put mvn on PATH; or {_job_server_hint(flink_minor)}",
                coordinates=coordinates,
            )
            copied = staging / f"{_job_server_artifact(flink_minor)}-{beam_version()}.jar"
            if result.returncode or not copied.is_file():
                errors = [line for line in result.stdout.splitlines() if line.startswith("[ERROR]")]
                message = (
                    errors[0].removeprefix("[ERROR] ").removesuffix(" -> [Help 1]")
                    if errors
                    else _tail(result.stdout + result.stderr)
                )
                raise _PartFailed(
                    f"Maven could not provide {coordinates} (exit {result.returncode}): {message}",
                    _job_server_hint(flink_minor),
                    command,
                    coordinates=coordinates,
                )
            record = {"source": f"maven {coordinates}", "command": command}
        replace_directory(staging, final.parent)
    return {
        "path": str(final),
        "version": beam_version(),
        "flink_minor": flink_minor,
        "coordinates": coordinates,
        "main_class": job_server_main_class(final),
        "bytes": final.stat().st_size,
        "sha256": file_sha256(final),
        **record,
    }


def _unpack_flink(sdist: pathlib.Path, home: pathlib.Path) -> None:
    """Extracts the ``deps/`` tree (lib, opt, plugins, bin, licenses) and the notices of the sdist into ``home``.

    Members are renamed below ``home`` and extracted with tarfile's ``data``
    filter, so no member can land outside ``home`` or plant links.
    """
    wanted = []
    with tarfile.open(sdist, "r:gz") as archive:
        for member in archive:
            top, _, inside = member.name.partition("/")
            if not top.startswith("apache_flink_libraries-") or not (member.isfile() or member.isdir()):
                continue
            if inside.startswith("deps/"):
                member.name = inside.removeprefix("deps/")
            elif inside in ("LICENSE", "NOTICE"):
                member.name = inside
            else:
                continue
            if member.name:
                wanted.append(member)
        archive.extractall(home, members=wanted, filter="data")
    if not is_flink_home(home):
        raise ValueError(f"{sdist.name} holds no deps/lib/flink-dist-*.jar and deps/bin/bash-java-utils.jar")


def _obtain_flink_dist(root: pathlib.Path, flink_minor: str, downloads: pathlib.Path | None) -> dict:
    final = part_path("flink-dist", root, flink_minor)
    version = FLINK_RELEASES[flink_minor]
    requirement = f"{_FLINK_PYPI_PACKAGE}=={version}"
    with contextlib.ExitStack() as stack:
        staging = stack.enter_context(staging_directory(root, final.name))
        if downloads is None:
            downloads = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=".download-", dir=root)))
        downloads.mkdir(parents=True, exist_ok=True)
        # The package is published as an sdist only. pip reads its metadata (running its setup.py in an isolated
        # build environment) but installs nothing; the archive's jars are unpacked below.
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", requirement,
            "-d", str(downloads),
        ]  # fmt: skip
        _log(f"flink-dist: {' '.join(command[2:])} (about 300 MB)")
        result = _run_tool(command, "pip is missing from this Python", requirement=requirement)
        sdists = sorted(downloads.glob(f"{_FLINK_PYPI_PACKAGE.replace('-', '_')}-{version}.tar.gz"))
        if result.returncode or not sdists:
            raise _PartFailed(
                f"`pip download {requirement}` failed (exit {result.returncode}): {_tail(result.stderr)}",
                "make PyPI reachable for pip (or its index mirror), or pass --flink-home to beamtrove slurm submit",
                command,
                requirement=requirement,
            )
        try:
            _unpack_flink(sdists[0], staging)
        except (tarfile.TarError, ValueError, OSError) as exc:
            raise _PartFailed(
                f"{sdists[0]} is not a usable Flink distribution: {exc}",
                f"check that the index pip uses serves Apache's {requirement} (its sdist ships deps/lib and deps/bin)",
                command,
            ) from exc
        write_flink_config(staging / "conf")
        java = _check_flink_home(staging)
        replace_directory(staging, final)
        sdist = {
            "sdist": sdists[0].name,
            "sdist_bytes": sdists[0].stat().st_size,
            "sdist_sha256": file_sha256(sdists[0]),
        }
    return {
        "path": str(final),
        "version": version,
        "flink_minor": flink_minor,
        "source": f"pypi {requirement}",
        "command": command,
        **sdist,
        "java": java,
    }


def _check_flink_home(home: pathlib.Path) -> str:
    """Has Flink size a JobManager from ``home/conf``, proving the jars load on this Java; returns its version."""
    try:
        java = _java()
        flink_process("jobmanager", home, home / "conf", home / "log" / "check.log", java=java)
    except (FileNotFoundError, RuntimeError) as exc:
        raise _PartFailed(
            f"the Flink distribution does not start on this machine's Java: {exc}",
            "install Java 11 or newer (Java 17 is what the tests use) and set JAVA_HOME or put java on PATH",
        ) from exc
    return _java_version(java)


@dataclasses.dataclass
class SetupResult:
    """What :func:`setup_runners` did for one part.

    Attributes:
        part: One of :data:`PARTS`.
        status: ``"obtained"``, ``"reused"`` or ``"failed"``.
        record: The part's ``runners.json`` record.
    """

    part: str
    status: str
    record: dict

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def _log(message: str) -> None:
    print(f"beamtrove runners: {message}", file=sys.stderr, flush=True)


def _reusable(part: str, root: pathlib.Path, flink_minor: str) -> bool:
    """A present part can be reused; a Prism binary only when Go does not name another Beam version."""
    if not part_present(part, root, flink_minor):
        return False
    if part == "prism":
        return _prism_module_version(part_path(part, root, flink_minor)) in (None, f"v{beam_version()}")
    return True


@contextlib.contextmanager
def _locked(root: pathlib.Path) -> Iterator[None]:
    with (root / ".setup.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def setup_runners(
    parts: Iterable[str] = PARTS,
    runners_dir: str | os.PathLike | None = None,
    force: bool = False,
    flink_minor: str | None = None,
    job_server_jar: str | None = None,
    downloads: str | os.PathLike | None = None,
) -> list[SetupResult]:
    """Obtains the requested runner parts into the runners directory and records them in ``runners.json``.

    A part already present is reused (and its record kept) unless ``force``.
    A part that cannot be obtained does not stop the others: its record holds
    the command tried, the error and what to do instead.

    Args:
        parts: Any of :data:`PARTS`.
        runners_dir: Where to put them; defaults to :func:`default_runners_dir`.
        force: Obtain parts again even when present.
        flink_minor: Flink minor version of the job server and distribution;
            defaults to :func:`default_flink_minor`.
        job_server_jar: A Beam Flink job-server jar built elsewhere, copied in
            instead of asking Maven.
        downloads: Directory keeping downloaded archives (reused by later
            runs); by default they go to a temporary directory.

    Returns:
        One :class:`SetupResult` per requested part, in :data:`PARTS` order.
    """
    wanted = [part for part in PARTS if part in set(parts)]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"Unknown runner part(s) {', '.join(sorted(unknown))}: choose from {', '.join(PARTS)}.")
    minor = flink_minor or default_flink_minor()
    if minor not in FLINK_RELEASES:
        raise ValueError(f"Unknown Flink version {minor!r}: choose from {', '.join(FLINK_RELEASES)}.")
    root = pathlib.Path(runners_dir) if runners_dir else default_runners_dir()
    root.mkdir(parents=True, exist_ok=True)
    results = []
    with _locked(root):
        manifest = read_manifest(root)
        for part in wanted:
            local = job_server_jar if part == "flink-job-server" else None
            if not force and not local and _reusable(part, root, minor):
                record = manifest["parts"].get(part, {})
                if record.get("status") != "present" or record.get("path") != str(part_path(part, root, minor)):
                    record = {"status": "present", "path": str(part_path(part, root, minor)), "source": "found"}
                results.append(SetupResult(part, "reused", record))
                manifest["parts"][part] = record
                continue
            started = time.monotonic()
            try:
                if part == "prism":
                    record = _obtain_prism(root, minor)
                elif part == "flink-job-server":
                    record = _obtain_job_server(root, minor, local)
                else:
                    record = _obtain_flink_dist(root, minor, pathlib.Path(downloads) if downloads else None)
            except _PartFailed as failure:
                record = {"status": "failed", **failure.record, "attempted": _now()}
                results.append(SetupResult(part, "failed", record))
            else:
                record = {"status": "present", **record, "obtained": _now()}
                results.append(SetupResult(part, "obtained", record))
            record["seconds"] = round(time.monotonic() - started, 1)
            manifest["parts"][part] = record
            manifest.update(beam_version=beam_version(), updated=_now())
            _write_manifest(root, manifest)
        manifest.update(beam_version=beam_version(), updated=_now())
        _write_manifest(root, manifest)
    return results


def runner_defaults(options_argv: list[str], runners_dir: str | os.PathLike | None = None) -> list[str]:
    """The pipeline options that point Beam at the local runner parts instead of downloading them.

    ``--prism_location`` is added for the Prism runner and
    ``--flink_job_server_jar`` for the Flink runner, when the option is not
    given already and the part is present in the runners directory. Other
    runners get nothing (the DirectRunner, which may try Prism on its own and
    falls back when it cannot download it, is left to do so).

    Args:
        options_argv: The pipeline's arguments, as ``beamtrove run`` gets them.
        runners_dir: The runners directory; defaults to :func:`default_runners_dir`.

    Returns:
        Arguments to append to ``options_argv``.
    """
    options = PipelineOptions(options_argv)
    runner = options.view_as(StandardOptions).runner or ""
    name = runner.rsplit(".", 1)[-1].lower().removesuffix("runner")
    if name == "prism" and not options.view_as(PrismRunnerOptions).prism_location:
        if part_present("prism", runners_dir):
            return ["--prism_location", str(part_path("prism", runners_dir))]
        _log("no local Prism: Beam will try to download it (`beamtrove runners setup --runner prism` avoids that)")
    if name == "flink" and not options.view_as(FlinkRunnerOptions).flink_job_server_jar:
        minor = options.view_as(FlinkRunnerOptions).flink_version
        if minor in FLINK_RELEASES and part_present("flink-job-server", runners_dir, minor):
            return ["--flink_job_server_jar", str(part_path("flink-job-server", runners_dir, minor))]
        _log(
            "no local Flink job-server jar: Beam will try to download it "
            "(`beamtrove runners setup --runner flink-job-server` or --flink_job_server_jar avoid that)"
        )
    return []


def write_flink_config(
    conf_dir: str | os.PathLike,
    *,
    jobmanager: str = "localhost",
    rest_port: int = 8081,
    rpc_port: int = 6123,
    slots: int = 1,
    parallelism: int | None = None,
    tmp_dir: str | os.PathLike | None = None,
    jobmanager_memory: str = "1600m",
    taskmanager_memory: str = "1728m",
    extra: dict[str, str | int] | None = None,
) -> pathlib.Path:
    """Writes a standalone-cluster ``config.yaml`` and a ``log4j.properties`` into ``conf_dir``.

    Args:
        conf_dir: The configuration directory to create or overwrite.
        jobmanager: Host name every TaskManager and client reaches the JobManager at.
        rest_port: The JobManager's REST and web port.
        rpc_port: The JobManager's RPC port.
        slots: Task slots per TaskManager.
        parallelism: Default job parallelism; defaults to ``slots``.
        tmp_dir: Flink's temporary directories (``io.tmp.dirs``, blob and web
            uploads); Java's temporary directory when None.
        jobmanager_memory: ``jobmanager.memory.process.size``.
        taskmanager_memory: ``taskmanager.memory.process.size``.
        extra: More ``key: value`` settings, applied last.

    Returns:
        The path of ``config.yaml``.
    """
    conf = pathlib.Path(conf_dir)
    conf.mkdir(parents=True, exist_ok=True)
    settings: dict[str, str | int] = {
        "jobmanager.rpc.address": jobmanager,
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.bind-host": "0.0.0.0",
        "jobmanager.memory.process.size": jobmanager_memory,
        "rest.address": jobmanager,
        "rest.port": rest_port,
        "rest.bind-address": "0.0.0.0",
        "taskmanager.bind-host": "0.0.0.0",
        "taskmanager.numberOfTaskSlots": slots,
        "taskmanager.memory.process.size": taskmanager_memory,
        "parallelism.default": parallelism or slots,
    }
    if tmp_dir is not None:
        tmp = str(pathlib.Path(tmp_dir).resolve())
        settings.update({"io.tmp.dirs": tmp, "blob.storage.directory": tmp, "web.tmpdir": tmp})
    settings.update(extra or {})
    # Every value is written as a JSON scalar, which is valid YAML and keeps host names and paths strings.
    lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
    path = conf / "config.yaml"
    path.write_text("# Written by beamtrove.\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (conf / "log4j.properties").write_text(
        "# Written by beamtrove: each Flink process logs to the file its -Dlog.file names.\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.main.ref = MainFile\n"
        "appender.main.name = MainFile\n"
        "appender.main.type = File\n"
        "appender.main.append = true\n"
        "appender.main.fileName = ${sys:log.file}\n"
        "appender.main.layout.type = PatternLayout\n"
        "appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %c - %m%n\n",
        encoding="utf-8",
    )
    return path


@dataclasses.dataclass(frozen=True)
class FlinkProcess:
    """A Flink JobManager or TaskManager to start: its command line and environment.

    Attributes:
        command: ``java`` and its arguments.
        env: The process environment (this one plus Flink's directory variables).
    """

    command: list[str]
    env: dict[str, str]


def flink_process(
    role: str,
    flink_home: str | os.PathLike,
    conf_dir: str | os.PathLike,
    log_file: str | os.PathLike,
    properties: dict[str, str] | None = None,
    java: str | None = None,
) -> FlinkProcess:
    """Builds the ``java`` command of a standalone JobManager or TaskManager.

    Flink's ``BashJavaUtils`` derives the JVM memory flags and the memory
    settings the process must be given from ``conf_dir/config.yaml``, as
    Flink's own launch scripts have it do.

    Args:
        role: ``"jobmanager"`` or ``"taskmanager"``.
        flink_home: A Flink distribution (see :func:`is_flink_home`).
        conf_dir: Directory holding ``config.yaml`` (and ``log4j.properties``).
        log_file: The process's log file.
        properties: Settings for this process only (``-D key=value``), e.g.
            ``io.tmp.dirs`` of one node.
        java: The ``java`` executable; defaults to ``$JAVA_HOME``'s or the one on ``PATH``.

    Returns:
        The :class:`FlinkProcess`.

    Raises:
        ValueError: An unknown role or a directory that is no Flink distribution.
        FileNotFoundError: No ``java``.
        RuntimeError: Flink could not size the process from the configuration.
    """
    if role not in _ENTRY_POINTS:
        raise ValueError(f"Unknown Flink process {role!r}: choose jobmanager or taskmanager.")
    home = pathlib.Path(flink_home).resolve()
    if not is_flink_home(home):
        raise ValueError(f"{home} is no Flink distribution: it lacks lib/flink-dist-*.jar or bin/bash-java-utils.jar.")
    conf = pathlib.Path(conf_dir).resolve()
    if not (conf / "config.yaml").is_file():
        raise ValueError(f"{conf} holds no config.yaml.")
    java = java or _java()
    main_class, query = _ENTRY_POINTS[role]
    classpath = os.pathsep.join(str(jar) for jar in sorted((home / "lib").glob("*.jar")))
    dynamic = [argument for key, value in (properties or {}).items() for argument in ("-D", f"{key}={value}")]
    sizing = subprocess.run(
        [
            java, "-cp", f"{home / 'bin' / 'bash-java-utils.jar'}{os.pathsep}{classpath}", _BASH_JAVA_UTILS, query,
            "--configDir", str(conf), *dynamic,
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    prefix = len(_BASH_JAVA_UTILS_PREFIX)
    results = [line[prefix:] for line in sizing.stdout.splitlines() if line.startswith(_BASH_JAVA_UTILS_PREFIX)]
    if sizing.returncode or len(results) < 2:
        raise RuntimeError(
            f"Flink's BashJavaUtils could not size the {role} from {conf / 'config.yaml'} "
            f"(exit {sizing.returncode}): {_tail(sizing.stdout + sizing.stderr, 1500)}"
        )
    jvm_flags, memory_settings = results[-2].split(), results[-1].split()
    log = pathlib.Path(log_file).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        java, *jvm_flags, *_JAVA_MODULE_FLAGS, f"-Dlog.file={log}",
        *([f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}"] if (conf / "log4j.properties").is_file()
          else []),
        "-cp", classpath, main_class, "--configDir", str(conf), *memory_settings, *dynamic,
    ]  # fmt: skip
    env = {
        **os.environ,
        "FLINK_HOME": str(home),
        "FLINK_CONF_DIR": str(conf),
        "FLINK_LIB_DIR": str(home / "lib"),
        "FLINK_OPT_DIR": str(home / "opt"),
        "FLINK_PLUGINS_DIR": str(home / "plugins"),
        "FLINK_BIN_DIR": str(home / "bin"),
    }
    return FlinkProcess(command, env)


def flink_taskmanagers(rest_url: str, timeout: float = 5.0) -> list[dict]:
    """The TaskManagers registered with a JobManager, from its REST API (``GET /taskmanagers``)."""
    with urllib.request.urlopen(f"{rest_url.rstrip('/')}/taskmanagers", timeout=timeout) as response:
        return json.load(response)["taskmanagers"]


def _process_gone(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def wait_for_taskmanagers(
    rest_url: str,
    count: int,
    timeout: float = 300.0,
    interval: float = 1.0,
    watch_pids: Iterable[int] = (),
    on_wait: Callable[[str], None] | None = None,
) -> list[dict]:
    """Polls the JobManager's REST API until ``count`` TaskManagers are registered.

    Args:
        rest_url: ``http://host:port`` of the JobManager.
        count: How many TaskManagers to wait for.
        timeout: Seconds to wait.
        interval: Seconds between polls.
        watch_pids: Processes (JobManager, TaskManager launcher) whose exit ends the wait early.
        on_wait: Called with a progress line every 30 seconds.

    Returns:
        The registered TaskManagers (the REST API's records).

    Raises:
        TimeoutError: Fewer than ``count`` registered in time, or a watched process exited.
    """
    deadline = time.monotonic() + timeout
    next_report = time.monotonic() + 30
    registered: list[dict] = []
    last_error = "no answer yet"
    while True:
        try:
            # A TaskManager shows up before it has reported its slots; count it once it has.
            registered = [manager for manager in flink_taskmanagers(rest_url) if manager.get("slotsNumber", 0) > 0]
            last_error = f"{len(registered)} of {count} TaskManager(s) registered with their slots"
        except (OSError, ValueError, KeyError) as exc:
            last_error = f"{rest_url} does not answer: {exc}"
        if len(registered) >= count:
            return registered
        gone = [pid for pid in watch_pids if _process_gone(pid)]
        if gone:
            raise TimeoutError(
                f"process(es) {', '.join(map(str, gone))} exited before the cluster came up ({last_error})"
            )
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the Flink cluster did not come up within {timeout:.0f} s ({last_error})")
        if on_wait and time.monotonic() >= next_report:
            on_wait(last_error)
            next_report += 30
        time.sleep(interval)


def _print_table(results: list[SetupResult]) -> None:
    print(f"{'part':<17} {'status':<9} path or error")
    for result in results:
        detail = result.record.get("path") if result.ok else result.record.get("error", "")
        print(f"{result.part:<17} {result.status:<9} {detail}")


def _setup(args: argparse.Namespace) -> int:
    groups = {"prism": ("prism",), "flink": ("flink-job-server", "flink-dist"), "all": PARTS}
    parts = [part for runner in args.runner or ["all"] for part in groups.get(runner, (runner,))]
    if args.job_server_jar and "flink-job-server" not in parts:
        print("beamtrove: error: --job-server-jar needs --runner flink, flink-job-server or all", file=sys.stderr)
        return 2
    try:
        results = setup_runners(
            parts, args.dir, force=args.force, flink_minor=args.flink_version,
            job_server_jar=args.job_server_jar, downloads=args.downloads,
        )  # fmt: skip
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 1
    _print_table(results)
    root = pathlib.Path(args.dir) if args.dir else default_runners_dir()
    print(f"\nrecorded in {root / _MANIFEST}")
    failed = [result for result in results if not result.ok]
    for result in failed:
        command = result.record.get("command")
        print(f"\nbeamtrove: error: {result.part} could not be obtained: {result.record['error']}", file=sys.stderr)
        if command:
            print(f"  tried: {' '.join(command)}", file=sys.stderr)
        print(f"  what to do: {result.record['hint']}", file=sys.stderr)
    return 1 if failed else 0


def _path(args: argparse.Namespace) -> int:
    root = pathlib.Path(args.dir) if args.dir else default_runners_dir()
    manifest = read_manifest(root)
    rows = {}
    for part in PARTS:
        record = manifest["parts"].get(part, {})
        present = part_present(part, root, args.flink_version)
        status = "present" if present else ("failed" if record.get("status") == "failed" else "missing")
        rows[part] = {"status": status, "path": str(part_path(part, root, args.flink_version))}
        if status == "failed":
            rows[part]["error"] = record.get("error")
    if args.json:
        print(json.dumps({"runners_dir": str(root), "beam_version": beam_version(), "parts": rows}, indent=2))
        return 0
    print(f"runners directory {root} (Beam {beam_version()})")
    for part, row in rows.items():
        print(f"{part:<17} {row['status']:<8} {row['path']}")
        if row["status"] == "failed":
            print(f"{'':<17} {'':<8} last attempt: {row['error']}")
    return 0


def _properties(values: list[str] | None) -> dict[str, str]:
    properties = {}
    for value in values or []:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise ValueError(f"-D takes key=value, not {value!r}")
        properties[key] = setting
    return properties


def _flink(args: argparse.Namespace) -> int:
    if args.flink_command == "config":
        path = write_flink_config(
            args.conf_dir, jobmanager=args.jobmanager, rest_port=args.rest_port, rpc_port=args.rpc_port,
            slots=args.slots, parallelism=args.parallelism, tmp_dir=args.tmp_dir,
            jobmanager_memory=args.jobmanager_memory, taskmanager_memory=args.taskmanager_memory,
            extra=_properties(args.define),
        )  # fmt: skip
        print(path)
        return 0
    if args.flink_command == "wait":
        try:
            registered = wait_for_taskmanagers(
                args.rest, args.taskmanagers, timeout=args.timeout, watch_pids=args.watch_pid,
                on_wait=lambda line: print(f"waiting for the Flink cluster: {line}", file=sys.stderr, flush=True),
            )  # fmt: skip
        except TimeoutError as exc:
            print(f"beamtrove: error: {exc}", file=sys.stderr)
            return 1
        slots = sum(int(manager.get("slotsNumber", 0)) for manager in registered)
        print(f"{len(registered)} TaskManager(s) registered at {args.rest} with {slots} slot(s)", file=sys.stderr)
        print(slots)
        return 0
    home = args.flink_home or os.environ.get("FLINK_HOME") or part_path("flink-dist")
    try:
        process = flink_process(args.flink_command, home, args.conf_dir, args.log_file, _properties(args.define))
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # The JVM replaces this process, so whoever started it signals Flink itself.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execve(process.command[0], process.command, process.env)
    return 1  # not reached


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="beamtrove runners",
        description="Obtain Beam's Prism and Flink runners from package registries, so runs never download them.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    setup = commands.add_parser(
        "setup",
        help="obtain the runners into $BEAMTROVE_RUNNERS (default ~/.cache/beamtrove/runners)",
        description="Obtain Prism (go install), Beam's Flink job-server jar (mvn dependency:copy) and a Flink "
        "distribution (pip download apache-flink-libraries) into the runners directory, and record them in "
        "runners.json. Parts already present are reused unless --force. Exits 1 when a requested part failed.",
    )
    setup.add_argument(
        "--runner",
        choices=("prism", "flink", "all", *PARTS[1:]),
        action="append",
        help="prism; flink (= flink-job-server and flink-dist); flink-job-server; flink-dist; all (the default); "
        "repeatable",
    )
    setup.add_argument(
        "--dir", help="the runners directory (default: $BEAMTROVE_RUNNERS or ~/.cache/beamtrove/runners)"
    )
    setup.add_argument("--force", action="store_true", help="obtain parts again even when present")
    setup.add_argument(
        "--flink-version",
        choices=sorted(FLINK_RELEASES),
        help=f"Flink minor version of the job server and distribution (default: {default_flink_minor()})",
    )
    setup.add_argument(
        "--job-server-jar", metavar="JAR", help="register this Beam Flink job-server jar instead of asking Maven"
    )
    setup.add_argument("--downloads", metavar="DIR", help="keep downloaded archives here and reuse them")
    path = commands.add_parser("path", help="print where each runner part is and whether it is present")
    path.add_argument("--dir", help="the runners directory")
    path.add_argument("--flink-version", choices=sorted(FLINK_RELEASES))
    path.add_argument("--json", action="store_true", help="print JSON")
    flink = commands.add_parser(
        "flink",
        help="start a standalone Flink JobManager or TaskManager, write its config, wait for it",
        description="The pieces of a standalone Flink cluster from a distribution without launch scripts; "
        "beamtrove slurm submit's job script uses them.",
    )
    flink_commands = flink.add_subparsers(dest="flink_command", required=True)
    config = flink_commands.add_parser("config", help="write config.yaml and log4j.properties")
    config.add_argument("--conf-dir", required=True)
    config.add_argument("--jobmanager", default="localhost", help="host the JobManager is reached at")
    config.add_argument("--rest-port", type=int, default=8081)
    config.add_argument("--rpc-port", type=int, default=6123)
    config.add_argument("--slots", type=int, default=1, help="task slots per TaskManager")
    config.add_argument("--parallelism", type=int, help="default parallelism (default: --slots)")
    config.add_argument("--tmp-dir", help="Flink's temporary directory")
    config.add_argument("--jobmanager-memory", default="1600m")
    config.add_argument("--taskmanager-memory", default="1728m")
    config.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="any other setting")
    for role in ("jobmanager", "taskmanager"):
        process = flink_commands.add_parser(role, help=f"replace this process with a Flink {role} JVM")
        process.add_argument("--conf-dir", required=True, help="directory holding config.yaml")
        process.add_argument("--log-file", required=True)
        process.add_argument("--flink-home", help="default: $FLINK_HOME, else the runners directory's flink-dist")
        process.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="setting for this process")
    wait = flink_commands.add_parser("wait", help="wait until TaskManagers are registered; print the total slots")
    wait.add_argument("--rest", required=True, help="http://HOST:PORT of the JobManager")
    wait.add_argument("--taskmanagers", type=int, required=True)
    wait.add_argument("--timeout", type=float, default=300.0)
    wait.add_argument("--watch-pid", type=int, action="append", default=[], help="stop waiting when this pid exits")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``beamtrove runners``; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "setup":
        return _setup(args)
    if args.command == "path":
        return _path(args)
    return _flink(args)


if __name__ == "__main__":
    sys.exit(main())
