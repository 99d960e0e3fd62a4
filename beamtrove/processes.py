"""Processes and signals: children that do not outlive their parent, and stop signals that act as Ctrl-C."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Iterator

__all__ = ["available_memory", "die_with_parent", "is_alive", "machine_workers", "stops_interrupt"]

_PR_SET_PDEATHSIG = 1
_MEMINFO = "/proc/meminfo"
# Where cgroup v2 gives this process's memory limit and use ("max" when there is no limit).
_CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"
_CGROUP_USED = "/sys/fs/cgroup/memory.current"


def available_memory() -> int | None:
    """Bytes of memory new processes can take now: the kernel's MemAvailable, within this cgroup's limit.

    None where neither is known (not Linux).
    """
    found = []
    with contextlib.suppress(OSError, ValueError), open(_MEMINFO, encoding="ascii") as meminfo:
        found += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    with (
        contextlib.suppress(OSError, ValueError),
        open(_CGROUP_LIMIT, encoding="ascii") as limit,
        open(_CGROUP_USED, encoding="ascii") as used,
    ):
        found.append(int(limit.read()) - int(used.read()))
    return max(0, min(found)) if found else None


def machine_workers(memory_per_worker: int) -> tuple[int, str]:
    """How many worker processes this machine takes at once, each holding up to ``memory_per_worker`` bytes.

    Returns:
        ``(count, what bounds it)``: at least 1, at most the cores this process may run on (``"cores"``) and
        the memory available now divided by ``memory_per_worker`` (``"memory"``).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory = available_memory()
    fitting = cores if memory is None else max(1, memory // memory_per_worker)
    return (cores, "cores") if cores <= fitting else (fitting, "memory")


def is_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent(parent_pid: int | None = None) -> None:
    """Has the kernel SIGKILL the calling process once its parent dies; run it first thing in a child.

    A parent that is SIGKILLed cannot stop its children; without this they
    would run on (a pipeline, a training), writing where nothing reads. The
    kernel's watch does not exist where ``prctl`` is missing (not Linux).

    Args:
        parent_pid: The parent's pid, for a child that calls this only once
            its interpreter has started (a spawned one): if the parent died
            before, the child ends at once.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def stops_interrupt() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM (kill, a scheduler's stop) interrupt as Ctrl-C does.

    Yields the list of the signals received, filled in as they come. Signal
    handlers belong to the main thread: elsewhere the block changes nothing.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def interrupt(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
