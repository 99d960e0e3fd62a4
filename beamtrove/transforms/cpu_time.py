"""A limit on the CPU time one call may use in the thread that makes it: the guard of filters and formatters.

Extraction runs in a child process whose own CPU-time signal interrupts a page
(see :mod:`beamtrove.transforms.extractors.base`). Filters and formatters run in
the worker itself, in whatever thread the runner gives them: the DirectRunner's
main thread, or a non-main thread of a Prism or multi_processing SDK worker,
where no signal handler can reach them (Python runs handlers in the main thread
only). So each thread's CPU time is read from its own clock
(``pthread_getcpuclockid``) by a watchdog thread, one per process, which
interrupts a call that used up its time by raising :class:`CpuTimeExceeded` in
its thread, as Ctrl-C raises KeyboardInterrupt. A thread's CPU time does not
grow with the machine's load (other processes and other threads of the worker
do not count), so neither does what is cut short. The interruption happens
once the thread runs Python code again: a call stuck inside one C function is
cut short when that returns.

A call costs its thread a few microseconds; the watchdog wakes every
:data:`CHECK_SECONDS` and reads the clock of each thread inside a call.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CHECK_SECONDS", "CpuTimeExceeded", "CpuTimeLimit", "CpuTimeLimitExceeded"]

#: How often the watchdog reads the CPU clocks: a call is interrupted at most this much CPU time late.
CHECK_SECONDS = 0.02

_T = TypeVar("_T")
_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_NO_EXCEPTION = ctypes.py_object()


class CpuTimeExceeded(BaseException):
    """Interrupts a call that used up its CPU time.

    A ``BaseException``, so that a rule's ``except Exception`` does not swallow it.
    """


class CpuTimeLimitExceeded(Exception):
    """A call used more CPU time than its limit allows."""


@dataclasses.dataclass(eq=False)
class _Watch:
    """The call one thread is in, as the watchdog sees it.

    ``call`` is a fresh object per call (None between calls); ``fired`` the
    call the watchdog interrupted last. While ``checking``, the watchdog may be
    about to interrupt the call it read: a call ends only once that is over.
    """

    ident: int
    clock: int
    call: object | None = None
    started: float = 0.0
    seconds: float = 0.0
    fired: object | None = None
    checking: bool = False

    def begin(self, call: object, seconds: float) -> None:
        self.started = time.thread_time()
        self.seconds = seconds
        self.call = call

    def end(self, call: object) -> bool:
        """Ends ``call`` in its thread; True when it used up its time. Nothing interrupts the thread afterwards."""
        while True:
            try:
                self.call = None
                while self.checking:
                    time.sleep(0)
                if self.fired is not call:
                    return False
                # The interruption may still be pending: it must not reach what the thread does next.
                _set_async_exc(self.ident, _NO_EXCEPTION)
                return True
            except CpuTimeExceeded:
                # It arrived here, once: the loop ends the call again, with nothing pending any more.
                continue

    def check(self) -> None:
        """Interrupts the thread's call when it used up its time (in the watchdog's thread)."""
        self.checking = True
        try:
            call = self.call
            if call is None or call is self.fired:
                return
            if time.clock_gettime(self.clock) - self.started > self.seconds:
                self.fired = call
                _set_async_exc(self.ident, ctypes.py_object(CpuTimeExceeded))
        finally:
            self.checking = False


class _Watchdog:
    """The thread that reads the CPU clocks of the threads inside a call, one per process."""

    def __init__(self):
        self._pid = os.getpid()
        self._watches: dict[int, _Watch] = {}
        self._lock = threading.Lock()
        # Per thread, not per thread id: a new thread may get the id of one that ended.
        self._local = threading.local()
        threading.Thread(target=self._run, name="beamtrove-cpu-time-watchdog", daemon=True).start()

    def watch(self) -> _Watch:
        """The watch of the calling thread."""
        watch = getattr(self._local, "watch", None)
        if watch is None:
            ident = threading.get_ident()
            watch = self._local.watch = _Watch(ident, time.pthread_getcpuclockid(ident))
            with self._lock:
                self._watches[ident] = watch
        return watch

    def _run(self) -> None:
        while True:
            time.sleep(CHECK_SECONDS)
            for watch in list(self._watches.values()):
                try:
                    watch.check()
                except OSError:  # the thread ended: its clock is gone
                    with self._lock:
                        self._watches.pop(watch.ident, None)


_watchdog: _Watchdog | None = None
_watchdog_lock = threading.Lock()


def _this_threads_watch() -> _Watch:
    global _watchdog  # noqa: PLW0603 - one watchdog per process, started on first use
    watchdog = _watchdog
    if watchdog is None or watchdog._pid != os.getpid():  # a forked child has no watchdog thread
        with _watchdog_lock:
            if _watchdog is None or _watchdog._pid != os.getpid():
                _watchdog = _Watchdog()
            watchdog = _watchdog
    return watchdog.watch()


class CpuTimeLimit:
    """Runs calls each limited to ``seconds`` of its thread's CPU time.

    Args:
        seconds: CPU seconds one call may use.
        what: What a call does, for the message of :class:`CpuTimeLimitExceeded`.

    Raises:
        ValueError: ``seconds`` is not a positive number of seconds.
    """

    def __init__(self, seconds: float, what: str = "the call"):
        if not 0 < seconds < float("inf"):
            raise ValueError(f"A CPU-time limit is a positive number of seconds, not {seconds!r}.")
        self.seconds = seconds
        self._message = f"{what} used more than {seconds:g} s of CPU time"

    def run(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)``, unless it uses more than the limit.

        Raises:
            CpuTimeLimitExceeded: The call used up its CPU time (whatever it raised then).
        """
        watch = _this_threads_watch()
        call = object()
        try:
            try:
                watch.begin(call, self.seconds)
                result = function(*args)
            finally:
                used_up = watch.end(call)
        except CpuTimeExceeded:
            # Raised in the call, or on its way out before it ended.
            used_up = watch.end(call)
        except Exception:
            if not watch.end(call):
                raise
            used_up = True
        if used_up:
            raise CpuTimeLimitExceeded(self._message) from None
        return result
