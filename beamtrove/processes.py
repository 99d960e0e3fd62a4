"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


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
