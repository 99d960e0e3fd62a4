"""A lease: a claim on a path that one process holds at a time, renewed while its owner lives.

The output folder's lock (:mod:`beamtrove.execution.output_lock`) and the task
locks of a job directory (:mod:`beamtrove.execution.jobs.jobdir`) are both
leases. :func:`take_lease` creates the claim, a small JSON file naming its
owner (``host``, ``pid``, what the caller adds) with a ``token`` and a
``heartbeat`` time, only if it is absent: ``O_CREAT|O_EXCL`` on a local,
NFS or Lustre path, a conditional write on an object store (``gs://``,
``s3://`` through fsspec). Of racing processes exactly one creates it.

**The one staleness rule.** A claim is stale when

* its owner ran on this host and its process is gone, or is this very
  process (a process holds a lease on a path once: a claim of its own it
  finds is one it left behind), or
* its last renewal is ``timeout`` seconds old or more. Its last renewal is
  the store's modification time of the claim when the store keeps one, else
  the ``heartbeat`` time inside it. A claim that cannot be read (empty or cut
  short: its owner stopped between creating it and writing it, or hit a full
  disk) names no owner and no heartbeat: it is judged by the store's time
  alone, and never goes stale on a store that keeps none.

"This host" is the host the claims name, ``socket.gethostname()`` unless the
caller names itself otherwise (a worker's ``--host``). The store's time and
this machine's clock are compared, so clocks apart by a fair part of the
timeout would misjudge; the timeouts used are minutes.

**Renewal** (:meth:`Lease.heartbeat`) moves the store's modification time
forward, on every file system: on a local or shared POSIX file system
``os.utime`` does, without rewriting the claim, so a reader never catches a
claim half rewritten (and NFS sets the server's time); an object is
immutable and has no ``utime``, so there the claim is written again, whole,
with a new ``heartbeat`` (read by a store that keeps no times).

**Taking over** a stale claim happens under a guard, ``<name>.takeover``
beside it, itself created only if absent: the check that the claim is still
the stale one and its removal are then one step, so of two processes taking
over the same stale claim, the second cannot remove the fresh claim of the
first. A guard is held for milliseconds; one as old as the timeout belongs
to a process that died holding it, and is removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from beamtrove.fs import filesystem, is_local
from beamtrove.processes import is_alive

__all__ = [
    "Claim",
    "Heartbeat",
    "Lease",
    "LeasePath",
    "heartbeats_paused",
    "lease_state",
    "read_claim",
    "remove_stale",
    "stale_reason",
    "take_lease",
]

_LOGGER = logging.getLogger(__name__)
#: A local path (str or path object) or an fsspec URL.
LeasePath = str | os.PathLike
# Claims that come and go as a taker looks (released the moment it sees them): it tries this many times, then
# calls the lease busy.
_ATTEMPTS = 3


class _LocalFile:
    """A file on this machine's file system (a local disk, NFS, Lustre), through POSIX calls."""

    def __init__(self, path: str):
        self.path = path

    def beside(self, suffix: str) -> _LocalFile:
        return _LocalFile(os.path.splitext(self.path)[0] + suffix)

    def create(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())  # whole on the server before another node reads it
        except BaseException:  # a stop, or a full disk: no claim of nobody's is left behind
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise

    def read(self) -> tuple[bytes, float | None] | None:
        try:
            with open(self.path, "rb") as source:
                # The time of the file read, even if another replaces it meanwhile.
                return source.read(), os.fstat(source.fileno()).st_mtime
        except FileNotFoundError:
            return None

    def renew(self, data: bytes) -> None:
        del data  # the claim stays as written: its time is the renewal
        with contextlib.suppress(FileNotFoundError):  # released meanwhile
            os.utime(self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class _StoreFile:
    """An object on a store reached through fsspec (``gs://``, ``s3://``, ``memory://``)."""

    def __init__(self, fs: Any, path: str):
        self.fs, self.path = fs, path

    def beside(self, suffix: str) -> _StoreFile:
        return _StoreFile(self.fs, posixpath.splitext(self.path)[0] + suffix)

    def create(self, data: bytes) -> None:
        """Creates the object only if absent.

        A store makes the object, whole, when it is closed, with a conditional write (GCS ``ifGenerationMatch=0``,
        S3 ``If-None-Match: *``), so it is the close that finds another process's claim.

        Raises:
            FileExistsError: The object exists.
        """
        created = self.fs.open(self.path, "xb")
        try:
            with created as out:
                out.write(data)
        except FileExistsError:
            raise  # refused by the store at the close: the claim there is another's, and stays
        except BaseException:
            with contextlib.suppress(OSError):
                self.fs.rm(self.path)
            raise

    def read(self) -> tuple[bytes, float | None] | None:
        # A listing made earlier may hold the object's old time: asked afresh.
        self.fs.invalidate_cache(self.path)
        try:
            data = self.fs.cat_file(self.path)
            written = self.fs.modified(self.path).timestamp()
        except FileNotFoundError:
            return None
        except NotImplementedError:  # a store that keeps no modification time
            written = None
        return data, written

    def renew(self, data: bytes) -> None:
        # An object is replaced whole when its write closes: a reader sees the old claim or the new one.
        with self.fs.open(self.path, "wb") as out:
            out.write(data)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self.path)


def _file(path: LeasePath, storage_options: Mapping[str, Any] | None) -> _LocalFile | _StoreFile:
    # A plain path is local: fsspec is not imported for it (a local job's status starts without it).
    if isinstance(path, os.PathLike) or "://" not in path:
        return _LocalFile(os.fspath(path))
    fs, stripped = filesystem(path, storage_options)
    return _LocalFile(stripped) if is_local(path) else _StoreFile(fs, stripped)


def _encode(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record).encode()


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim as read.

    Attributes:
        record: What it says (owner, token, heartbeat, ...); None when it cannot be read.
        written: When the store last wrote it (seconds since the epoch); None when the store keeps no times.
    """

    record: dict[str, Any] | None
    written: float | None

    def renewed(self) -> float | None:
        """When the claim was last renewed: the store's time, else its heartbeat; None when neither tells."""
        if self.written is not None:
            return self.written
        heartbeat = (self.record or {}).get("heartbeat")
        return heartbeat if isinstance(heartbeat, (int, float)) and not isinstance(heartbeat, bool) else None

    def age(self) -> float | None:
        """Seconds since the claim was last renewed; None when nothing tells."""
        renewed = self.renewed()
        return None if renewed is None else time.time() - renewed


def _read(file: _LocalFile | _StoreFile) -> Claim | None:
    found = file.read()
    if found is None:
        return None
    data, written = found
    try:
        record = json.loads(data)
    except ValueError:  # not JSON, or not UTF-8: empty or cut short
        record = None
    return Claim(record if isinstance(record, dict) else None, written)


def read_claim(path: LeasePath, storage_options: Mapping[str, Any] | None = None) -> Claim | None:
    """The claim at ``path``; None when there is none (free, or released)."""
    return _read(_file(path, storage_options))


def stale_reason(claim: Claim, timeout: float, *, host: str | None = None) -> str | None:
    """Why ``claim`` is stale by the rule of this module, for a message; None when its owner may be running.

    Args:
        claim: The claim, as read.
        timeout: Seconds without renewal after which a claim is stale.
        host: The name this host goes by in claims; default ``socket.gethostname()``.
    """
    record = claim.record
    if record is not None and record.get("host") == (host or socket.gethostname()):
        pid = record.get("pid")
        if pid == os.getpid():
            return "it was this process's"
        if isinstance(pid, int) and not is_alive(pid):
            return "its process is gone"
    age = claim.age()
    if age is None or age < timeout:
        return None
    if record is None:
        return f"it was last written {age:.0f} s ago, over the {timeout:g} s timeout"
    return f"no heartbeat for {timeout:g} s"


def lease_state(
    path: LeasePath, timeout: float, storage_options: Mapping[str, Any] | None = None, *, host: str | None = None
) -> tuple[str, dict[str, Any] | None]:
    """``("free" | "running" | "stale", record)`` of the lease at ``path``, for a status listing.

    The record is None when the lease is free or its claim cannot be read; see :func:`stale_reason` for ``host``.
    """
    claim = read_claim(path, storage_options)
    if claim is None:
        return "free", None
    return ("stale" if stale_reason(claim, timeout, host=host) else "running"), claim.record


def _remove_if_unchanged(
    file: _LocalFile | _StoreFile,
    path: LeasePath,
    stale: Claim,
    timeout: float,
    on_stale: Callable[[LeasePath], None] | None,
) -> bool:
    """Removes the claim ``stale`` (``on_stale(path)``, default delete) under the takeover guard, if still there.

    Returns True when it was removed.
    """
    guard = file.beside(".takeover")
    try:
        guard.create(_encode({"host": socket.gethostname(), "pid": os.getpid(), "heartbeat": time.time()}))
    except FileExistsError:
        # Judged by age alone: a guard of this process may be another thread's, taking over right now.
        held = _read(guard)
        age = held and held.age()
        if age is not None and age >= timeout:
            guard.remove()
        return False
    try:
        # Renewed, released or taken over since it was judged: not the stale claim any more.
        if _read(file) != stale:
            return False
        if on_stale is None:
            file.remove()
        else:
            with contextlib.suppress(FileNotFoundError):  # its owner woke up and released it meanwhile
                on_stale(path)
        return True
    finally:
        guard.remove()


def remove_stale(
    path: LeasePath,
    timeout: float,
    storage_options: Mapping[str, Any] | None = None,
    *,
    host: str | None = None,
    on_stale: Callable[[LeasePath], None] | None = None,
) -> bool:
    """Removes the claim at ``path`` if it is stale, under the takeover guard; True when ``path`` is free now.

    :func:`take_lease` does this itself when given a timeout; see it for ``on_stale``, and :func:`stale_reason`
    for ``host``.
    """
    file = _file(path, storage_options)
    held = _read(file)
    if held is None:
        return True
    return stale_reason(held, timeout, host=host) is not None and _remove_if_unchanged(
        file, path, held, timeout, on_stale
    )


class Heartbeat:
    """A thread renewing a lease every ``interval`` s, running from its start until stopped or the lease is lost.

    :meth:`Lease.heartbeat` starts one; ``with`` stops it at the end of the block, else :meth:`Lease.release`
    does. :func:`heartbeats_paused` pauses every one of a process while it forks.
    """

    def __init__(self, lease: Lease, interval: float):
        self.lease, self.interval = lease, interval
        self._stop = threading.Event()
        self._thread = self._new_thread()

    def _new_thread(self) -> threading.Thread:
        name = os.path.basename(os.fspath(self.lease.path))
        return threading.Thread(target=self._beat, args=(self._stop,), name=f"heartbeat-{name}", daemon=True)

    def _beat(self, stop: threading.Event) -> None:
        try:
            while not stop.wait(self.interval):
                try:
                    if not self.lease.renew():
                        return  # released, or taken over while this process was frozen: a lost lease is not regained
                except Exception as exc:  # a store's passing fault must not end the beat: the next one may pass
                    _LOGGER.warning("could not renew the lease %s (%s); trying again in %g s", self.lease.path, exc,
                                    self.interval)  # fmt: skip
        finally:
            if stop is self._stop:
                with _RUNNING_LOCK:
                    _RUNNING.discard(self)

    def start(self) -> Heartbeat:
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the beat and waits for its thread; again, nothing."""
        self._stop.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _pause(self) -> None:
        """Stops the thread, leaving the beat to :meth:`_resume`."""
        stop, self._stop = self._stop, threading.Event()
        stop.set()
        self._thread.join()

    def _resume(self) -> None:
        """Starts the beat again in a new thread; the interval starts over."""
        self._thread = self._new_thread()
        self._thread.start()

    def __enter__(self) -> Lease:
        return self.lease

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# The heartbeats whose threads run in this process.
_RUNNING: set[Heartbeat] = set()
_RUNNING_LOCK = threading.Lock()


@contextlib.contextmanager
def heartbeats_paused() -> Iterator[None]:
    """Within the block, no heartbeat of this process runs a thread; they beat again after it.

    For a process about to fork: a fork could catch a heartbeat's thread
    holding a lock (a file's, the logger's), which its child would never see
    released. A pause of a few forks is far shorter than any lease timeout.
    Call it from the thread that started the heartbeats.
    """
    with _RUNNING_LOCK:
        paused = list(_RUNNING)
    for beat in paused:
        beat._pause()
    try:
        yield
    finally:
        for beat in paused:
            beat._resume()


@dataclasses.dataclass(eq=False)
class Lease:
    """A held claim at ``path``, taken by :func:`take_lease`.

    Attributes:
        path: The claim's path, as given: a local path or an fsspec URL.
        claim: What the claim says: the caller's fields, ``token`` and ``heartbeat`` (its creation).
        storage_options: fsspec options of ``path``.
        took_over: Why the claim this lease replaced was stale (:func:`stale_reason`); None when it was free.
        replaced: The stale claim it replaced, for a message; None when it was free.
    """

    path: LeasePath
    claim: dict[str, Any]
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    took_over: str | None = None
    replaced: Claim | None = None
    # The process that took it: a child forked from it holds nothing (see release).
    _pid: int = dataclasses.field(default_factory=os.getpid, repr=False)
    _beats: list[Heartbeat] = dataclasses.field(default_factory=list, repr=False)
    _file: _LocalFile | _StoreFile = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._file = _file(self.path, self.storage_options)

    @property
    def token(self) -> str:
        """The claim's unique token: whether the claim at ``path`` is this lease's."""
        return self.claim["token"]

    def owned(self) -> bool:
        """Whether the claim at ``path`` is still this lease's (not released, nor taken over as stale)."""
        held = _read(self._file)
        return held is not None and held.record is not None and held.record.get("token") == self.token

    def renew(self) -> bool:
        """Renews the claim now, if it is still this lease's; returns whether it is."""
        if not self.owned():
            return False
        self._file.renew(_encode({**self.claim, "heartbeat": time.time()}))
        return True

    def heartbeat(self, interval: float) -> Heartbeat:
        """Renews the claim every ``interval`` s from a thread, while it is this lease's; returns that beat, running.

        ``with lease.heartbeat(interval):`` beats while the block runs; otherwise the beat lasts until
        :meth:`release`. The first renewal comes after ``interval`` s: take the lease with a fresh claim.
        """
        beat = Heartbeat(self, interval)
        self._beats.append(beat)
        return beat.start()

    def release(self) -> None:
        """Stops its heartbeats, then removes the claim if it is still this lease's; again, nothing.

        In a process forked from the one that took it, nothing: the lease is the parent's, even if the child runs
        its parent's exit handlers.
        """
        if os.getpid() != self._pid:
            return
        while self._beats:
            # Stopped first: a renewal after the removal would write the claim again on an object store.
            self._beats.pop().stop()
        if self.owned():
            self._file.remove()


def take_lease(
    path: LeasePath,
    claim: Mapping[str, Any],
    timeout: float | None,
    storage_options: Mapping[str, Any] | None = None,
    *,
    on_stale: Callable[[LeasePath], None] | None = None,
) -> Lease | None:
    """Takes the lease at ``path``: creates the claim only if absent, or takes over a stale one.

    A stale claim (:func:`stale_reason`, with the host ``claim`` names) is removed under the takeover guard,
    then the claim created; the lease says why in :attr:`Lease.took_over`, the caller logs it. Its folder must
    exist.

    Args:
        path: The claim's path: a local path or an fsspec URL.
        claim: What the claim says of its owner (``host``, ``pid``, ...); a ``token`` and a ``heartbeat`` time
            are added.
        timeout: Seconds without renewal after which a claim is stale; None takes only a free lease.
        storage_options: fsspec options of ``path``.
        on_stale: Removes a stale claim, given ``path`` (a job directory archives it); default: deleted.

    Returns:
        The lease, or None when a live claim holds it (or another process took the one this call freed).
    """
    file = _file(path, storage_options)
    token = uuid.uuid4().hex
    replaced: Claim | None = None
    why: str | None = None
    for _ in range(_ATTEMPTS):
        record = {**claim, "token": token, "heartbeat": time.time()}
        try:
            file.create(_encode(record))
        except FileExistsError:
            pass
        else:
            return Lease(path, record, dict(storage_options or {}), took_over=why, replaced=replaced)
        if replaced is not None:
            return None  # another process claimed it once this one freed it
        held = _read(file)
        if held is None:
            continue  # released meanwhile: free to take
        if timeout is None:
            return None
        why = stale_reason(held, timeout, host=claim.get("host"))
        if why is None or not _remove_if_unchanged(file, path, held, timeout, on_stale):
            return None
        replaced = held
    return None
