"""The lock of an output folder: one run owns it at a time, and the lock of a run that is gone is taken over.

:func:`lock_output` creates ``<output>/.beamtrove-lock/owner.json`` only if
it is absent, naming its owner (host, pid, start); a second run is refused
with that name. A heartbeat renews the claim, so a lock goes stale only when
its process died on this host or it has not renewed its heartbeat for
:data:`LOCK_TIMEOUT_SECONDS`; a stale lock is taken over, and a warning says
whose it was. :func:`~beamtrove.execution.output.plan_output` takes the lock
for a run.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from beamtrove.configuration import ConfigurationError
from beamtrove.fs import filesystem, join, read_json_record, write_json
from beamtrove.layout import LOCK_DIR
from beamtrove.processes import is_alive

__all__ = ["LOCK_TIMEOUT_SECONDS", "OutputLock", "lock_output"]

_LOGGER = logging.getLogger(__name__)
#: How long a lock whose heartbeat stopped stays its owner's; the heartbeat renews it every fifth of that.
LOCK_TIMEOUT_SECONDS = 120.0
_LOCK_OWNER = "owner.json"
_LOCK_TAKEOVER = "takeover.json"


@dataclasses.dataclass
class OutputLock:
    """A run's hold on an output folder: ``<output>/.beamtrove-lock/owner.json``, created only if absent.

    The claim names its owner (host, pid, start) and a token; a heartbeat
    thread rewrites it every fifth of the timeout with the time, so only the
    lock of a run that is gone goes stale. :func:`lock_output` takes one.
    """

    folder: str
    claim: dict[str, Any]
    timeout: float
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def _owner(self) -> str:
        return join(self.folder, _LOCK_OWNER)

    def owned(self) -> bool:
        """Whether the lock is still this claim (not released, nor taken over as stale)."""
        held = read_json_record(self._owner, self.storage_options)
        return held is not None and held.get("token") == self.claim["token"]

    def _beat(self) -> None:
        while not self._stop.wait(self.timeout / 5):
            if not self.owned():
                return
            write_json({**self.claim, "heartbeat": time.time()}, self._owner, self.storage_options)

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="beamtrove-output-lock", daemon=True)
        self._thread.start()
        atexit.register(self.release)

    def release(self) -> None:
        """Stops the heartbeat and removes the lock if it is still this claim; again, nothing."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        atexit.unregister(self.release)
        if self.owned():
            fs, path = filesystem(self.folder, self.storage_options)
            fs.rm(path, recursive=True)


def lock_output(
    output: str, storage_options: Mapping[str, Any] | None = None, timeout: float = LOCK_TIMEOUT_SECONDS
) -> OutputLock:
    """Takes the lock of the folder ``output`` (made if missing), or takes it over from a run that is gone.

    A lock is stale when its heartbeat is older than ``timeout`` seconds, or
    its owner ran on this host and its process is gone (or is this one: a
    process runs one run at a time); taking it over is logged.

    Raises:
        ConfigurationError: Another run holds the lock; the message names it.
    """
    storage_options = dict(storage_options or {})
    folder = join(output, LOCK_DIR)
    fs, path = filesystem(folder, storage_options)
    fs.makedirs(path, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    claim = {"host": socket.gethostname(), "pid": os.getpid(), "started": started, "token": uuid.uuid4().hex}
    owner = join(path, _LOCK_OWNER)
    for attempt in range(2):
        try:
            with fs.open(owner, "xb") as out:
                out.write(json.dumps({**claim, "heartbeat": time.time()}).encode())
            break
        except FileExistsError:
            held = read_json_record(join(folder, _LOCK_OWNER), storage_options)
            if attempt or not _take_over(folder, held, timeout, storage_options):
                raise ConfigurationError(_in_use(output, held, timeout)) from None
    lock = OutputLock(folder, claim, timeout, storage_options)
    lock.start_heartbeat()
    return lock


def _in_use(output: str, held: dict[str, Any] | None, timeout: float) -> str:
    owner = (
        f"host {held.get('host')}, pid {held.get('pid')}, started {held.get('started')}"
        if held
        else "an owner whose claim cannot be read yet"
    )
    return (
        f"--output {output} is in use by another run ({owner}): wait until it ends or choose another --output; "
        f"its lock {join(output, LOCK_DIR)} is taken over once that run is gone ({timeout:.0f} s without heartbeat)."
    )


def _stale(held: dict[str, Any] | None, timeout: float) -> str | None:
    """Why the claim ``held`` is stale, or None when its owner may be running."""
    if held is None:
        return None
    if held.get("host") == socket.gethostname():
        pid = held.get("pid")
        if pid == os.getpid():
            return "it was this process's"
        if isinstance(pid, int) and not is_alive(pid):
            return "its process is gone"
    heartbeat = held.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or time.time() - heartbeat >= timeout:
        return f"no heartbeat for {timeout:.0f} s"
    return None


def _take_over(folder: str, held: dict[str, Any] | None, timeout: float, storage_options) -> bool:
    """Removes the claim ``held`` if it is stale and still there; True when the lock can now be taken.

    A short-lived takeover guard, itself created only if absent, makes the
    check and the removal one step: without it, two runs could both remove
    a stale claim and the second remove the fresh one of the first.
    """
    why = _stale(held, timeout)
    if why is None:
        return False
    fs, path = filesystem(folder, storage_options)
    guard = join(path, _LOCK_TAKEOVER)
    try:
        with fs.open(guard, "xb") as out:
            out.write(json.dumps({"at": time.time()}).encode())
    except FileExistsError:
        # A guard is held for milliseconds; one as old as the timeout belongs to a run that died holding it.
        taken = read_json_record(join(folder, _LOCK_TAKEOVER), storage_options) or {}
        if time.time() - taken.get("at", 0) >= timeout:
            with contextlib.suppress(FileNotFoundError):
                fs.rm(guard)
        return False
    try:
        if read_json_record(join(folder, _LOCK_OWNER), storage_options) != held:
            return False
        with contextlib.suppress(FileNotFoundError):
            fs.rm(join(path, _LOCK_OWNER))
        _LOGGER.warning(
            "took over the lock of %s from host %s, pid %s, started %s: %s",
            posixpath.dirname(folder),
            held.get("host"),
            held.get("pid"),
            held.get("started"),
            why,
        )
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(guard)
