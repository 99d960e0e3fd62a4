"""SDK workers of local multi-process runs, forked from a process that has imported Beam already.

Beam's FnApiRunner starts each ``--direct_running_mode multi_processing``
worker as a new ``python -m apache_beam.runners.worker.sdk_worker_main``,
which spends more than a second importing Beam and the pipeline's libraries
before its first bundle (1.3 s per worker on a 2-core machine, the two
workers in parallel). The zygote is a process that imports them once and
forks a worker whenever the runner asks for one, so a worker starts with its
modules loaded. ``beamtrove run`` starts the zygote before it imports Beam
itself, so the zygote's imports overlap the command's own; a library caller's
first multi-process run starts it then, and later runs in that process reuse
it.

A forked worker is otherwise the worker Beam would start: it has the
environment, working directory, stdout and stderr the runner's process has
when it asks, and runs Beam's own harness entry point. The zygote imports
its modules while its main thread is its only one and forks from that
thread, so no worker starts with a lock another thread held. Environment
variables read only when an interpreter starts (``PYTHONPATH``,
``PYTHONHASHSEED``) keep the values the zygote started with.

The runner also has the zygote load the models and lists its DoFns share
(:class:`~beamtrove.resources.Preloading`) as the pipeline is built: the
zygote loads them once while the runner builds the rest of the graph, and
every worker starts with them in memory it shares with the others, instead of
each loading its own copy before its first bundle.

One difference: the zygote and its workers ignore Ctrl-C, which a terminal
sends to the whole process group. Workers that died first would each make
the runner's threads that read from them print a gRPC traceback; instead the
runner's process alone reports the interruption: as its run unwinds, it has
the zygote kill each worker before it closes the worker's channels (which
would make a worker mid-bundle print their traceback; the runner's threads
that read from a killed worker fail silently once a stop signal has come,
see :func:`beamtrove.processes.stop_signals`), and the zygote kills
any worker left once the runner's process has gone, as it does whenever that
process ends.

This module imports no Beam: the command line starts the zygote before
importing it. The zygote runs as ``python -m beamtrove.execution.worker_zygote
CHANNEL_FD MODULE...``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["SDK_WORKER_MODULE", "WorkerZygote", "shared_zygote", "start_zygote"]

#: Beam's SDK worker entry point, the module every zygote imports.
SDK_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"

# A message is its length, then that many bytes of JSON; file descriptors ride on the length.
_LENGTH = struct.Struct("!Q")
_STREAMS = (1, 2)


class ZygoteExited(RuntimeError):
    """The zygote ended (killed, or it could not start), taking the news of its workers' exits with it."""


def _send(channel: socket.socket, message: dict, fds: Sequence[int] = ()) -> None:
    body = json.dumps(message).encode()
    socket.send_fds(channel, [_LENGTH.pack(len(body))], list(fds))
    channel.sendall(body)


def _receive_exactly(channel: socket.socket, size: int, head: bytes = b"") -> bytes:
    chunks = [head]
    received = len(head)
    while received < size:
        chunk = channel.recv(min(size - received, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the channel mid-message")
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


def _receive(channel: socket.socket) -> tuple[dict, list[int]] | None:
    """The next message and the file descriptors sent with it; None once the other end has closed."""
    head, fds, _, _ = socket.recv_fds(channel, _LENGTH.size, len(_STREAMS))
    if not head:
        return None
    (length,) = _LENGTH.unpack(_receive_exactly(channel, _LENGTH.size, head))
    return json.loads(_receive_exactly(channel, length)), fds


class WorkerZygote:
    """The runner's end of one zygote: it asks for workers, learns when they exit and can kill them.

    Safe to use from several threads: Beam starts and waits for each worker in
    a thread of its own.

    Args:
        modules: What the zygote imports before its first fork (Beam's SDK
            worker is always imported). A module that cannot be imported is
            skipped: the worker that needs it fails on it, as it would without
            the zygote.
    """

    def __init__(self, modules: Iterable[str] = ()):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [sys.executable, "-m", __name__, str(theirs.fileno()), SDK_WORKER_MODULE, *modules]
        try:
            self._process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self._channel = ours
        self._owner = os.getpid()
        self._requests = threading.Lock()
        self._changed = threading.Condition()
        self._started: list[int | str] = []
        self._exit_codes: dict[int, int] = {}
        self._ended = False
        threading.Thread(target=self._read_replies, name="worker-zygote-replies", daemon=True).start()

    @property
    def pid(self) -> int:
        """The zygote's process id: every worker's parent."""
        return self._process.pid

    @property
    def usable(self) -> bool:
        """Whether this process can ask the zygote for workers: it started it, and the zygote still runs."""
        return self._owner == os.getpid() and not self._ended

    def start_worker(self, environment: Mapping[str, str], cwd: str) -> int:
        """Forks a worker with ``environment`` in ``cwd`` and this process's stdout and stderr; returns its pid.

        Raises:
            ZygoteExited: The zygote is gone.
            OSError: The zygote could not fork (its message says why).
        """
        with self._requests:
            try:
                _send(self._channel, {"environment": dict(environment), "cwd": cwd}, _STREAMS)
            except OSError as error:
                raise ZygoteExited(f"the SDK worker zygote is gone ({error})") from error
            with self._changed:
                self._changed.wait_for(lambda: self._started or self._ended)
                if not self._started:
                    raise ZygoteExited(self._exit_description())
                started = self._started.pop(0)
        if isinstance(started, str):
            raise OSError(f"the SDK worker zygote could not fork a worker: {started}")
        return started

    def wait(self, pid: int) -> int:
        """The exit code of worker ``pid`` (negative: the signal that ended it), once it has exited.

        Raises:
            ZygoteExited: The zygote ended before the worker did.
        """
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exit_codes or self._ended)
            if pid not in self._exit_codes:
                raise ZygoteExited(self._exit_description())
            return self._exit_codes.pop(pid)

    def preload(self, pickled_fn: bytes) -> None:
        """Has the zygote load a DoFn's shared resources before it forks its next worker.

        Args:
            pickled_fn: A :class:`~beamtrove.resources.Preloading` DoFn, pickled
                by Beam's pickler. The zygote calls its ``preload()``; one that
                fails there is left to the workers' ``setup()``, which reports
                the failure as it would without the zygote.
        """
        with self._requests, contextlib.suppress(OSError):
            _send(self._channel, {"preload": pickled_fn.decode("ascii")})

    def kill(self, pid: int) -> None:
        """SIGKILLs worker ``pid`` unless it has exited already (the zygote knows; its pid may be another's)."""
        with self._requests, contextlib.suppress(OSError):
            _send(self._channel, {"kill": pid})

    def close(self, timeout: float = 30) -> None:
        """Closes the channel, which kills the workers the zygote forked, and waits for the zygote to exit.

        The zygote is killed if it has not exited after ``timeout`` seconds.
        """
        with contextlib.suppress(OSError):
            # Shutting down wakes the reply thread's pending receive, which then ends.
            self._channel.shutdown(socket.SHUT_RDWR)
        self._channel.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _read_replies(self) -> None:
        try:
            while (received := _receive(self._channel)) is not None:
                reply, _ = received
                with self._changed:
                    if "started" in reply:
                        self._started.append(reply["started"])
                    elif "fork_failed" in reply:
                        self._started.append(reply["fork_failed"])
                    else:
                        self._exit_codes[reply["exited"]] = reply["exit_code"]
                    self._changed.notify_all()
        except (OSError, EOFError, ValueError):
            pass
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _exit_description(self) -> str:
        code = self._process.poll()
        how = "is still running but closed its channel" if code is None else f"exited with code {code}"
        return f"the SDK worker zygote (pid {self._process.pid}) {how}"


_shared: WorkerZygote | None = None
_shared_lock = threading.Lock()


def start_zygote(modules: Iterable[str] = ()) -> WorkerZygote:
    """The process's zygote, started now with ``modules`` if there is none it can use; see :class:`WorkerZygote`."""
    global _shared  # noqa: PLW0603 - one zygote per process, started on first use
    with _shared_lock:
        if _shared is None or not _shared.usable:
            _shared = WorkerZygote(modules)
        return _shared


def shared_zygote() -> WorkerZygote:
    """The process's zygote; one started now imports every beamtrove module this process has imported."""
    return start_zygote(sorted(name for name in sys.modules if name.partition(".")[0] == "beamtrove"))


# --------------------------------------------------------------------------- the zygote


def _become_worker(channel_fd: int, streams: list[int], environment: dict[str, str], cwd: str) -> None:
    """The body of a forked worker: the runner's streams, environment and directory, then Beam's harness."""
    os.close(channel_fd)
    for target, fd in zip(_STREAMS, streams, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    # Ctrl-C stays ignored, as in the zygote: see the module's docstring.
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(environment)
    from apache_beam.runners.worker import sdk_worker_main  # noqa: PLC0415 - imported already, by the zygote

    sdk_worker_main.main([])


def _preload(pickled_fn: bytes) -> None:
    """Loads a DoFn's shared resources into this process, for every worker forked from it after."""
    from apache_beam.internal import pickler  # noqa: PLC0415 - imported already, by the zygote

    # A DoFn that cannot be read or loaded here fails in the workers' setup(), with the runner's own report.
    with contextlib.suppress(Exception):
        pickler.loads(pickled_fn).preload()


def _serve(channel: socket.socket, modules: Sequence[str]) -> None:
    """Imports ``modules``, then forks a worker per request until the runner closes ``channel``.

    The runner's end closing is also how the zygote learns that the runner
    died, however it died (a kernel parent-death signal would fire when the
    runner's thread that started the zygote ends, not the runner). It then
    kills the workers still running: they have no runner left to work for.
    """
    # Ctrl-C reaches the whole process group: the runner decides what it means, and its workers react to it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in modules:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    fork = multiprocessing.get_context("fork")
    workers: dict[int, multiprocessing.process.BaseProcess] = {}
    try:
        # A channel that fails as the zygote replies or reads means the runner is gone, as a closed channel does.
        with contextlib.suppress(OSError, EOFError):
            _fork_on_request(channel, fork, workers)
    finally:
        # The runner is gone, and its workers with it: one forked as the runner died would otherwise wait forever to
        # connect to it, and this process's exit would wait for it.
        for worker in workers.values():
            worker.kill()


def _fork_on_request(
    channel: socket.socket,
    fork: multiprocessing.context.BaseContext,
    workers: dict[int, multiprocessing.process.BaseProcess],
) -> None:
    """Serves the runner's requests until it closes ``channel``, keeping the workers still running in ``workers``."""
    while True:
        sentinels = {worker.sentinel: worker for worker in workers.values()}
        for ready in multiprocessing.connection.wait([channel, *sentinels]):
            if ready is not channel:
                worker = sentinels[ready]
                worker.join()
                del workers[worker.pid]
                _send(channel, {"exited": worker.pid, "exit_code": worker.exitcode})
                continue
            received = _receive(channel)
            if received is None:
                return
            request, streams = received
            if "kill" in request:
                if request["kill"] in workers:
                    workers[request["kill"]].kill()
                continue
            if "preload" in request:
                _preload(request["preload"].encode("ascii"))
                continue
            worker = fork.Process(
                target=_become_worker,
                args=(channel.fileno(), streams, request["environment"], request["cwd"]),
                name="sdk-worker",
            )
            try:
                worker.start()
            except OSError as error:
                _send(channel, {"fork_failed": str(error)})
            else:
                workers[worker.pid] = worker
                _send(channel, {"started": worker.pid})
            finally:
                for fd in streams:
                    os.close(fd)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
