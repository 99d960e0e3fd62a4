"""Building beamtrove's worker image: the repository's Dockerfile, on Google's and Beam's images or on a local base.

The ``Dockerfile`` is the one recipe. By default it starts from Google's
template-launcher image and Beam's SDK image of the pinned Beam version, as
users build it for Dataflow. :func:`make_local_base` makes a base from Debian
packages instead (``debootstrap``), laid out as Beam's SDK images are:
Python 3.11 with pip, and Beam's boot program, built from the Go module
proxy, at ``/opt/apache/beam/boot`` as the entrypoint. Given that base for
both, the Dockerfile builds a worker image where no container registry can be
reached; it holds no template launcher (Google ships that binary only in its
own images), so it serves workers, not Flex Template launches.

Everything here runs the ``docker``, ``debootstrap`` and ``go`` commands:
beamtrove itself needs no Docker library.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from beamtrove.configuration import ConfigurationError

__all__ = ["BOOT_PATH", "build_image", "image_size", "local_base_tag", "make_local_base"]

#: Where Beam's SDK images keep the boot program, the entrypoint of every worker container.
BOOT_PATH = "/opt/apache/beam/boot"
# The Debian release whose Python is Beam's SDK images' (3.11).
_SUITE = "bookworm"
_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
# The Go package of Beam's Python boot program.
_BOOT_PACKAGE = "github.com/apache/beam/sdks/v2/python/container"
# Where Google's launcher images keep the launcher: the Dockerfile copies the folder, empty in the local base.
_LAUNCHER_DIR = "opt/google/dataflow"
# The certificate authorities the machine trusts, which a base made on it trusts too (a proxy's among them).
_CA_BUNDLE = pathlib.Path("/etc/ssl/certs/ca-certificates.crt")


def _beam_version() -> str:
    return importlib.metadata.version("apache-beam")


def local_base_tag() -> str:
    """The tag of the local base for the installed Beam version, e.g. ``beamtrove-base:bookworm-beam2.77.0``."""
    return f"beamtrove-base:{_SUITE}-beam{_beam_version()}"


def _require(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ConfigurationError(f"{tool} is not on PATH: {why}.")
    return path


def _run(command: Sequence[str], **kwargs) -> None:
    """Runs ``command`` with its output on this process's streams.

    Raises:
        ConfigurationError: It failed (its own output above says why).
    """
    print(f"$ {shlex.join(command)}", file=sys.stderr, flush=True)
    try:
        subprocess.run(command, check=True, **kwargs)
    except subprocess.CalledProcessError as exc:
        raise ConfigurationError(
            f"`{shlex.join(command)}` failed with exit code {exc.returncode} (its output is above)."
        ) from None


def _docker() -> str:
    docker = _require("docker", "building the image needs Docker (Debian: apt-get install docker.io)")
    answer = subprocess.run(
        [docker, "info", "--format", "{{.ServerVersion}}"], check=False, capture_output=True, text=True
    )
    if answer.returncode != 0:
        raise ConfigurationError(
            f"docker cannot reach a Docker daemon ({answer.stderr.strip() or answer.stdout.strip()}): start dockerd."
        )
    return docker


def _image_exists(docker: str, tag: str) -> bool:
    return subprocess.run([docker, "image", "inspect", tag], capture_output=True, check=False).returncode == 0


def make_local_base(tag: str | None = None, *, rebuild: bool = False) -> str:
    """Makes the local base image from Debian packages and Beam's boot program; returns its tag.

    Needs root (``debootstrap``), ``go`` and a Docker daemon.

    Args:
        tag: The base's tag; :func:`local_base_tag` by default.
        rebuild: Make it again when an image of that tag exists already (by default, that image is used).

    Raises:
        ConfigurationError: A tool is missing, or a step failed.
    """
    tag = tag or local_base_tag()
    docker = _docker()
    if not rebuild and _image_exists(docker, tag):
        print(f"using the local base {tag} made before (--rebuild-base makes it again)", file=sys.stderr)
        return tag
    debootstrap = _require("debootstrap", "--local-base makes the base from Debian packages with debootstrap")
    go = _require("go", "--local-base builds Beam's boot program from the Go module proxy")
    if os.geteuid() != 0:
        raise ConfigurationError("--local-base runs debootstrap, which needs root: run it as root.")
    with tempfile.TemporaryDirectory(prefix="beamtrove-base-") as work:
        rootfs, binaries = pathlib.Path(work, "rootfs"), pathlib.Path(work, "bin")
        _run([debootstrap, "--variant=minbase", f"--include={','.join(_PACKAGES)}", _SUITE, str(rootfs)])
        environment = {**os.environ, "GOBIN": str(binaries), "CGO_ENABLED": "0"}
        _run([go, "install", f"{_BOOT_PACKAGE}@v{_beam_version()}"], env=environment)
        boot = rootfs / BOOT_PATH.lstrip("/")
        boot.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(binaries / "container", boot)
        (rootfs / _LAUNCHER_DIR).mkdir(parents=True, exist_ok=True)
        # Beam's images install packages into their Python with pip: Debian's marks its own as managed by apt.
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        if _CA_BUNDLE.is_file():
            shutil.copy2(_CA_BUNDLE, rootfs / _CA_BUNDLE.relative_to("/"))
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / cache, ignore_errors=True)
        changes = [
            "--change",
            f'ENTRYPOINT ["{BOOT_PATH}"]',
            "--change",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run([docker, "import", *changes, "-", tag], stdin=tar.stdout)
        finally:
            tar.stdout.close()
            tar.wait()
    return tag


def build_image(
    tag: str, context: str | os.PathLike, *, sdk_image: str | None = None, launcher_image: str | None = None
) -> None:
    """Builds the repository's Dockerfile in ``context`` as ``tag``, on the host network.

    Args:
        tag: The image's tag.
        context: The clone the Dockerfile and beamtrove's sources are in.
        sdk_image: The image workers start from; the Dockerfile's (Beam's SDK image) when None.
        launcher_image: The image the template launcher comes from; the Dockerfile's (Google's) when None.

    Raises:
        ConfigurationError: There is no Dockerfile in ``context``, or the build failed.
    """
    context = pathlib.Path(context)
    if not (context / "Dockerfile").is_file():
        raise ConfigurationError(f"{context} holds no Dockerfile: give --context the folder of a beamtrove clone.")
    arguments = []
    for name, value in (("SDK_IMAGE", sdk_image), ("LAUNCHER_IMAGE", launcher_image)):
        if value:
            arguments += ["--build-arg", f"{name}={value}"]
    _run([_docker(), "build", "--network", "host", *arguments, "--tag", tag, str(context)])


def image_size(tag: str) -> int:
    """The size of image ``tag`` in bytes, as Docker reports it."""
    answer = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True, check=True
    )
    return int(answer.stdout.strip())
