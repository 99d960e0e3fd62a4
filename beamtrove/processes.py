"""Processes and signals: children that do not outlive their parent, and stop signals that act as Ctrl-C."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Iterator

__all__ = ["die_with_parent", "interrupt_on_sigterm", "is_alive", "stops_interrupt"]

_PR_SET_PDEATHSIG = 1


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


def interrupt_on_sigterm() -> None:
    """From now on, SIGTERM (kill, a scheduler's stop) interrupts the main thread as Ctrl-C does.

    For a command's whole life, from its start: the blocks of :func:`stops_interrupt` inside it also list the
    signals they receive. Call it in the main thread.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)


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
