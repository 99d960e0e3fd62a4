"""The lock of an output folder: one run owns it at a time, and the lock of a run that is gone is taken over.

The lock is a lease (:mod:`beamtrove.execution.lease`):
:func:`lock_output` creates ``<output>/.beamtrove-lock/owner.json`` only if
it is absent, naming its owner (host, pid, start); a second run is refused
with that name. A heartbeat renews the claim every fifth of
:data:`LOCK_TIMEOUT_SECONDS`, so a lock goes stale only when its process
died on this host or it has not been renewed for that long (the lease's
rule); a stale lock is taken over, and a warning says whose it was. A claim
that cannot be read (empty or cut short: its run stopped between creating it
and writing it, or hit a full disk) names no owner: it is judged by the age
of the file on the store, and taken over once as old as the timeout.
:func:`~beamtrove.execution.output.plan_output` takes the lock for a run.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.lease import Claim, Lease, read_claim, stale_reason, take_lease
from beamtrove.fs import filesystem, is_local, join
from beamtrove.layout import LOCK_DIR
from beamtrove.progress import utc_timestamp

__all__ = ["LOCK_TIMEOUT_SECONDS", "OutputInUse", "OutputLock", "lock_holder", "lock_output"]

_LOGGER = logging.getLogger(__name__)
#: How long a lock whose heartbeat stopped stays its owner's; the heartbeat renews it every fifth of that.
LOCK_TIMEOUT_SECONDS = 120.0
_LOCK_OWNER = "owner.json"


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


@dataclasses.dataclass
class OutputLock:
    """A run's hold on an output folder: the lease ``<output>/.beamtrove-lock/owner.json``.

    Its heartbeat renews it until :meth:`release`, which the process runs at exit if nothing did.
    :func:`lock_output` takes one.
    """

    folder: str
    lease: Lease

    @property
    def claim(self) -> dict[str, Any]:
        """What the claim says: host, pid, start, token."""
        return self.lease.claim

    def owned(self) -> bool:
        """Whether the lock is still this claim (not released, nor taken over as stale)."""
        return self.lease.owned()

    def release(self) -> None:
        """Stops the heartbeat and removes the lock if it is still this claim; again, nothing."""
        atexit.unregister(self.release)
        self.lease.release()
        _remove_folder(self.folder)


def lock_output(
    output: str, storage_options: Mapping[str, Any] | None = None, timeout: float = LOCK_TIMEOUT_SECONDS
) -> OutputLock:
    """Takes the lock of the folder ``output`` (made if missing), or takes it over from a run that is gone.

    A lock is stale by the lease's rule (:mod:`beamtrove.execution.lease`): its owner ran on this host and its
    process is gone (or is this one: a process runs one run at a time), or it was last renewed ``timeout``
    seconds ago or more (a claim that cannot be read: the store last wrote it that long ago); taking it over is
    logged.

    Raises:
        OutputInUse: Another run holds the lock; the message names it.
    """
    storage_options = dict(storage_options or {})
    folder = join(output, LOCK_DIR)
    claim = {"host": socket.gethostname(), "pid": os.getpid(), "started": utc_timestamp()}
    owner = join(folder, _LOCK_OWNER)
    lease: Lease | None = None
    try:
        if is_local(folder):
            # Only a disk needs the folder: a store makes an object without one (and one made there would stay).
            fs, path = filesystem(folder, storage_options)
            fs.makedirs(path, exist_ok=True)
        lease = _take(output, owner, claim, timeout, storage_options)
        lock = OutputLock(folder, lease)
        lease.heartbeat(timeout / 5)
        atexit.register(lock.release)  # last: an exit handler is registered only for a lock handed back
    except OutputInUse:
        raise  # nothing of this run's was written
    except BaseException:
        # Stopped before the lock was handed over (Ctrl-C lands anywhere), or a write failed: a claim naming this
        # process would hold the folder until its next run took it over. It may be written with its lease not yet
        # handed back. A store failing meanwhile leaves it to that takeover, not in place of what stopped the run.
        with contextlib.suppress(Exception):  # a store's errors are not all OSErrors (gcsfs's HttpError)
            held = read_claim(owner, storage_options) if lease is None else None
            if held is not None and held.record is not None and all(held.record.get(k) == claim[k] for k in claim):
                lease = Lease(owner, held.record, storage_options)
            if lease is not None:
                lease.release()  # and its heartbeat, if it started
            _remove_folder(folder)
        raise
    return lock


def _take(output: str, owner: str, claim: dict[str, Any], timeout: float, storage_options: dict[str, Any]) -> Lease:
    """The lease of the lock ``owner``, taken (or taken over, which is logged) for ``claim``.

    Raises:
        OutputInUse: Another run holds it.
    """
    for _ in range(3):
        lease = take_lease(owner, claim, timeout, storage_options)
        if lease is not None:
            break
        held = read_claim(owner, storage_options)
        if held is not None:
            raise _in_use(output, held, timeout)
        # Released as this run looked: free to take.
    else:
        # Claims came and went as this run looked: one is being written.
        raise _in_use(output, read_claim(owner, storage_options) or Claim(None, time.time()), timeout)
    if lease.took_over is not None and lease.replaced is not None:
        _LOGGER.warning("took over the lock of %s from %s: %s", output, _whose(lease.replaced), lease.took_over)
    return lease


def _remove_folder(folder: str) -> None:
    """Removes the lock's folder once empty (another run's new claim, or a takeover guard, keeps it)."""
    if is_local(folder):
        # A store has no folders.
        with contextlib.suppress(OSError):
            os.rmdir(filesystem(folder)[1])


def lock_holder(
    output: str, storage_options: Mapping[str, Any] | None = None, timeout: float = LOCK_TIMEOUT_SECONDS
) -> str | None:
    """Who holds the lock of ``output``, for a message; None when no run does (no lock, or a stale one)."""
    held = read_claim(join(output, LOCK_DIR, _LOCK_OWNER), storage_options)
    return None if held is None or stale_reason(held, timeout) else _whose(held)


def _whose(held: Claim) -> str:
    """The owner a claim names, for a message."""
    record = held.record
    if record is None:
        return "a run whose claim cannot be read"
    return f"host {record.get('host')}, pid {record.get('pid')}, started {record.get('started')}"


def _in_use(output: str, held: Claim, timeout: float) -> OutputInUse:
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
