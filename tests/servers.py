"""Object stores as real servers, each its own process on a loopback port: fake-gcs-server for ``gs://``, moto's
server for ``s3://``.

The session fixtures :func:`gcs_server` and :func:`s3_server` start one server each for the whole test session
(``bash .ci/run`` installs both); a test takes a fresh bucket of its own from :meth:`ObjectStore.bucket`. A
``beamtrove`` process reaches a server through :attr:`ObjectStore.env`, as a user of the emulator would set it up;
this process through :meth:`ObjectStore.environment`.

To start them by hand::

    ~/go/bin/fake-gcs-server -scheme http -host 127.0.0.1 -port 4443 -backend memory
    export STORAGE_EMULATOR_HOST=http://127.0.0.1:4443
    moto_server -H 127.0.0.1 -p 5000
    export AWS_ENDPOINT_URL_S3=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import pathlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from beamtrove.fs import filesystem

__all__ = ["ObjectStore", "gcs_server", "s3_server", "store"]

_READY_SECONDS = 30.0
_GO_BIN = pathlib.Path.home() / "go" / "bin"


@dataclasses.dataclass
class ObjectStore:
    """A running object store server.

    Attributes:
        protocol: ``gs`` or ``s3``.
        endpoint: Its URL, ``http://127.0.0.1:PORT``.
        env: The environment variables that send a process's ``protocol://`` URLs to it.
        process: The server's process.
    """

    protocol: str
    endpoint: str
    env: dict[str, str]
    process: subprocess.Popen
    _buckets: Iterator[int] = dataclasses.field(default_factory=itertools.count)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """Sends this process's ``protocol://`` URLs to the server while the block runs."""
        saved = {name: os.environ.get(name) for name in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def bucket(self) -> str:
        """Makes a new empty bucket; returns its URL, ``gs://bucket-N``."""
        url = f"{self.protocol}://bucket-{next(self._buckets)}"
        with self.environment():
            fs, path = filesystem(url)
            fs.mkdir(path)
        return url

    def upload(self, local: pathlib.Path, url: str) -> None:
        """Copies the local file or folder ``local`` to ``url``."""
        with self.environment():
            fs, path = filesystem(url)
            fs.put(str(local), path, recursive=local.is_dir())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(command: list[str], endpoint: str, name: str, log: pathlib.Path) -> subprocess.Popen:
    """Starts the server ``command``, its output into ``log``, and waits until ``endpoint`` answers HTTP."""
    # A file, not a pipe: a server logs a line per request, and would stop once a pipe nobody reads is full.
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + _READY_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(endpoint, timeout=1):
                return process
        except urllib.error.HTTPError:  # an answer, if not to this request
            return process
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"{name} did not answer at {endpoint} within {_READY_SECONDS:.0f} s") from None
            time.sleep(0.05)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory) -> Iterator[ObjectStore]:
    """A fake-gcs-server (in memory, plain HTTP) for the session; skips when it is not installed."""
    binary = shutil.which("fake-gcs-server") or shutil.which("fake-gcs-server", path=str(_GO_BIN))
    if binary is None:
        pytest.skip(
            "fake-gcs-server is not installed: `go install github.com/fsouza/fake-gcs-server@v1.56.1` "
            "(bash .ci/run does)"
        )
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
               "-log-level", "error"]  # fmt: skip
    log = tmp_path_factory.mktemp("gcs-server") / "server.log"
    process = _serve(command, f"{endpoint}/storage/v1/b", "fake-gcs-server", log)
    try:
        yield ObjectStore("gs", endpoint, {"STORAGE_EMULATOR_HOST": endpoint}, process)
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[ObjectStore]:
    """A moto S3 server for the session; skips when it is not installed."""
    binary = shutil.which("moto_server")
    if binary is None:
        pytest.skip("moto_server is not installed: pip install 'moto[server]' (the dev extra has it)")
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("s3-server") / "server.log"
    process = _serve([binary, "-H", "127.0.0.1", "-p", str(port)], endpoint, "moto_server", log)
    env = {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        yield ObjectStore("s3", endpoint, env, process)
    finally:
        _stop(process)


@pytest.fixture(params=["gcs_server", "s3_server"])
def store(request, monkeypatch) -> ObjectStore:
    """Each object store server in turn, which this process and the commands it starts reach during the test."""
    server = request.getfixturevalue(request.param)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    return server
