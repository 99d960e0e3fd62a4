"""The lock of an output folder: one run owns it at a time, and the lock of a run that is gone is taken over.

:func:`lock_output` creates ``<output>/.beamtrove-lock/owner.json`` only if
it is absent, naming its owner (host, pid, start); a second run is refused
with that name. A heartbeat renews the claim, so a lock goes stale only when
its process died on this host or it has not renewed its heartbeat for
:data:`LOCK_TIMEOUT_SECONDS`; a stale lock is taken over, and a warning says
whose it was. A claim that cannot be read (empty or cut short: its run
stopped between creating it and writing it, or hit a full disk) names no
owner and has no heartbeat: it is judged by the age of the file on the
store, and taken over once as old as the timeout.
:func:`~beamtrove.execution.output.plan_output` takes the lock for a run.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import json
import logging
import os
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

__all__ = ["LOCK_TIMEOUT_SECONDS", "OutputInUse", "OutputLock", "lock_holder", "lock_output"]

_LOGGER = logging.getLogger(__name__)
#: How long a lock whose heartbeat stopped stays its owner's; the heartbeat renews it every fifth of that.
LOCK_TIMEOUT_SECONDS = 120.0
_LOCK_OWNER = "owner.json"
_LOCK_TAKEOVER = "takeover.json"


class OutputInUse(ConfigurationError):
    """Another run holds the lock of an output folder.

    Attributes:
        output: The output folder.
        owner: Who holds it, for a message: ``host ..., pid ..., started ...``,
            or what is known of a claim that cannot be read.
        takeover: When the lock is taken over, for a message.
    """

    def __init__(self, output: str, owner: str, takeover: str):
        super().__init__(
            f"--output {output} is in use by another run ({owner}): wait until it ends or choose another --output; "
            f"{takeover}."
        )
        self.output, self.owner, self.takeover = output, owner, takeover


@dataclasses.dataclass(frozen=True)
class _Claim:
    """The lock's claim as found: its record (None when it cannot be read) and when the store last wrote it."""

    record: dict[str, Any] | None
    written: float | None

    def age(self) -> float | None:
        """Seconds since the store last wrote the claim; None when the store does not tell."""
        return None if self.written is None else time.time() - self.written


def _read_claim(fs, path: str) -> _Claim | None:
    """The claim in the file ``path``; None when there is none (it was released)."""
    try:
        with fs.open(path, "rb") as source:
            data = source.read()
        written = fs.modified(path).timestamp()
    except FileNotFoundError:
        return None
    except NotImplementedError:  # a store that keeps no modification time
        written = None
    try:
        record = json.loads(data)
    except ValueError:  # not JSON, or not UTF-8: empty or cut short
        record = None
    return _Claim(record if isinstance(record, dict) else None, written)


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
    process runs one run at a time), or its claim cannot be read and the
    store last wrote it ``timeout`` seconds ago or more; taking it over is
    logged.

    Raises:
        OutputInUse: Another run holds the lock; the message names it.
    """
    storage_options = dict(storage_options or {})
    folder = join(output, LOCK_DIR)
    fs, path = filesystem(folder, storage_options)
    fs.makedirs(path, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    claim = {"host": socket.gethostname(), "pid": os.getpid(), "started": started, "token": uuid.uuid4().hex}
    owner = join(path, _LOCK_OWNER)
    for attempt in range(3):
        try:
            _create_claim(fs, owner, claim)
            break
        except FileExistsError:
            held = _read_claim(fs, owner)
            if held is None:
                continue  # released meanwhile: free to take
            if attempt or not _take_over(fs, path, output, held, timeout):
                raise _in_use(output, held, timeout) from None
    else:
        # Claims came and went as this run looked: one is being written.
        raise _in_use(output, _read_claim(fs, owner) or _Claim(None, time.time()), timeout)
    lock = OutputLock(folder, claim, timeout, storage_options)
    lock.start_heartbeat()
    return lock


def lock_holder(
    output: str, storage_options: Mapping[str, Any] | None = None, timeout: float = LOCK_TIMEOUT_SECONDS
) -> str | None:
    """Who holds the lock of ``output``, for a message; None when no run does (no lock, or a stale one)."""
    fs, path = filesystem(join(output, LOCK_DIR, _LOCK_OWNER), storage_options)
    held = _read_claim(fs, path)
    return None if held is None or _stale(held, timeout) else _whose(held)


def _create_claim(fs, owner: str, claim: dict[str, Any]) -> None:
    """Creates the claim ``owner`` only if absent, or leaves nothing when its writing fails (a full disk).

    A local disk makes the file when it is opened; an object store makes the object, whole, when it is closed,
    with a conditional write (GCS ``ifGenerationMatch=0``, S3 ``If-None-Match: *``), so there it is the close
    that finds another run's claim.

    Raises:
        FileExistsError: Another run's claim is there.
    """
    created = fs.open(owner, "xb")
    try:
        with created as out:
            out.write(json.dumps({**claim, "heartbeat": time.time()}).encode())
    except FileExistsError:
        raise  # refused by the store at the close: the claim there is the other run's, and stays
    except BaseException:
        with contextlib.suppress(OSError):
            fs.rm(owner)
        raise


def _whose(held: _Claim) -> str:
    """The owner a claim names, for a message."""
    record = held.record
    if record is None:
        return "a run whose claim cannot be read"
    return f"host {record.get('host')}, pid {record.get('pid')}, started {record.get('started')}"


def _in_use(output: str, held: _Claim, timeout: float) -> OutputInUse:
    lock = join(output, LOCK_DIR)
    if held.record is not None:
        return OutputInUse(
            output,
            _whose(held),
            f"its lock {lock} is taken over once that run is gone ({timeout:.0f} s without heartbeat)",
        )
    age = held.age()
    if age is None:
        # Only a store that keeps no modification time: nothing tells how old the claim is.
        return OutputInUse(
            output,
            f"its claim {join(lock, _LOCK_OWNER)} cannot be read, and the store does not tell its age",
            f"remove {lock} once no run writes into {output}",
        )
    return OutputInUse(
        output,
        f"its claim {join(lock, _LOCK_OWNER)} cannot be read: it was written {age:.0f} s ago, maybe by a run "
        "writing it right now",
        f"its lock {lock} is taken over once that claim is {timeout:.0f} s old (in {max(timeout - age, 0):.0f} s)",
    )


def _stale(held: _Claim, timeout: float) -> str | None:
    """Why the claim ``held`` is stale, or None when its owner may be running."""
    record = held.record
    if record is None:
        age = held.age()
        if age is None or age < timeout:
            return None
        return f"it was last written {age:.0f} s ago, over the {timeout:.0f} s timeout"
    if record.get("host") == socket.gethostname():
        pid = record.get("pid")
        if pid == os.getpid():
            return "it was this process's"
        if isinstance(pid, int) and not is_alive(pid):
            return "its process is gone"
    heartbeat = record.get("heartbeat")
    if not isinstance(heartbeat, (int, float)) or time.time() - heartbeat >= timeout:
        return f"no heartbeat for {timeout:.0f} s"
    return None


def _take_over(fs, path: str, output: str, held: _Claim, timeout: float) -> bool:
    """Removes the claim ``held`` from ``path``, the lock folder of ``output``, if it is stale and still there.

    Returns True when the lock can now be taken.

    A short-lived takeover guard, itself created only if absent, makes the
    check and the removal one step: without it, two runs could both remove
    a stale claim and the second remove the fresh one of the first.
    """
    why = _stale(held, timeout)
    if why is None:
        return False
    guard = join(path, _LOCK_TAKEOVER)
    try:
        with fs.open(guard, "xb") as out:
            out.write(json.dumps({"at": time.time()}).encode())
    except FileExistsError:
        # A guard is held for milliseconds; one as old as the timeout belongs to a run that died holding it.
        taken = _read_claim(fs, guard)
        at = taken and (taken.record or {}).get("at", taken.written)
        if isinstance(at, (int, float)) and time.time() - at >= timeout:
            with contextlib.suppress(FileNotFoundError):
                fs.rm(guard)
        return False
    try:
        owner = join(path, _LOCK_OWNER)
        if _read_claim(fs, owner) != held:
            return False
        with contextlib.suppress(FileNotFoundError):
            fs.rm(owner)
        _LOGGER.warning("took over the lock of %s from %s: %s", output, _whose(held), why)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(guard)
