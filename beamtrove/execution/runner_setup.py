"""``beamtrove runners setup``: obtaining Prism, Beam's Flink job-server jar and a Flink distribution.

Each part comes from a package registry through its own client: Prism from
the Go module proxy (``go install``), the job-server jar from Maven
(``mvn dependency:copy``) or a jar built elsewhere, Flink's jars from PyPI
(``pip download apache-flink-libraries``). Each is built in a staging folder
and renamed into place, and recorded in ``runners.json``; a part that cannot
be had is recorded with the command tried, the registry's error and what to
do instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence

from beamtrove.execution.flink import flink_process, is_flink_home, java_executable, java_version, write_flink_config
from beamtrove.execution.runner_parts import (
    FLINK_RELEASES,
    JOB_SERVER_MAIN_CLASS,
    MANIFEST,
    PARTS,
    beam_version,
    default_flink_minor,
    default_runners_dir,
    job_server_artifact,
    job_server_hint,
    job_server_main_class,
    part_path,
    part_present,
    prism_module_version,
    read_manifest,
)
from beamtrove.fs import file_sha256, replace_directory, staging_directory, write_local_atomically
from beamtrove.progress import utc_timestamp

__all__ = ["SetupResult", "format_setup", "setup_runners"]

_PRISM_PACKAGE = "github.com/apache/beam/sdks/v2/go/cmd/prism"
_MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_FLINK_PYPI_PACKAGE = "apache-flink-libraries"
_ERROR_TAIL = 3000


def _job_server_coordinates(flink_minor: str) -> str:
    return f"org.apache.beam:{job_server_artifact(flink_minor)}:{beam_version()}"


def _write_manifest(root: pathlib.Path, manifest: dict) -> pathlib.Path:
    path = root / MANIFEST
    write_local_atomically(path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    return path


def _now() -> str:
    return utc_timestamp()


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
        "module_version": prism_module_version(final),
        "bytes": final.stat().st_size,
    }


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
                    job_server_hint(flink_minor),
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
                f"install Maven and put mvn on PATH; or {job_server_hint(flink_minor)}",
                coordinates=coordinates,
            )
            copied = staging / f"{job_server_artifact(flink_minor)}-{beam_version()}.jar"
            if result.returncode or not copied.is_file():
                errors = [line for line in result.stdout.splitlines() if line.startswith("[ERROR]")]
                message = (
                    errors[0].removeprefix("[ERROR] ").removesuffix(" -> [Help 1]")
                    if errors
                    else _tail(result.stdout + result.stderr)
                )
                raise _PartFailed(
                    f"Maven could not provide {coordinates} (exit {result.returncode}): {message}",
                    job_server_hint(flink_minor),
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
        java = java_executable()
        flink_process("jobmanager", home, home / "conf", home / "log" / "check.log", java=java)
    except (FileNotFoundError, RuntimeError) as exc:
        raise _PartFailed(
            f"the Flink distribution does not start on this machine's Java: {exc}",
            "install Java 11 or newer (Java 17 is what the tests use) and set JAVA_HOME or put java on PATH",
        ) from exc
    return java_version(java)


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
        return prism_module_version(part_path(part, root, flink_minor)) in (None, f"v{beam_version()}")
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


def format_setup(results: list[SetupResult], runners_dir: str | os.PathLike | None = None) -> tuple[str, str]:
    """What ``runners setup`` prints: the table of parts, and what to do about each that failed."""
    rows = [f"{'part':<17} {'status':<9} path or error"]
    for result in results:
        detail = result.record.get("path") if result.ok else result.record.get("error", "")
        rows.append(f"{result.part:<17} {result.status:<9} {detail}")
    root = pathlib.Path(runners_dir) if runners_dir else default_runners_dir()
    rows.append(f"\nrecorded in {root / MANIFEST}")
    errors = []
    for result in results:
        if result.ok:
            continue
        errors.append(f"beamtrove: error: {result.part} could not be obtained: {result.record['error']}")
        if result.record.get("command"):
            errors.append(f"  tried: {' '.join(result.record['command'])}")
        errors.append(f"  what to do: {result.record['hint']}")
    return "\n".join(rows), "\n".join(errors)
