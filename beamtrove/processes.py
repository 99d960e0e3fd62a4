"""Processes and signals: children that do not outlive their parent, and stop signals that act as Ctrl-C."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "PythonChild",
    "available_memory",
    "die_with_parent",
    "forget_interrupts_handled",
    "interrupt_on_sigterm",
    "is_alive",
    "machine_cores",
    "machine_workers",
    "stop_signals",
    "stopped_by",
    "stops_interrupt",
]

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


def machine_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def machine_workers(memory_per_worker: int) -> tuple[int, str]:
    """How many worker processes this machine takes at once, each holding up to ``memory_per_worker`` bytes.

    Returns:
        ``(count, what bounds it)``: at least 1, at most the cores this process may run on (``"cores"``) and
        the memory available now divided by ``memory_per_worker`` (``"memory"``).
    """
    cores = machine_cores()
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


def forget_interrupts_handled() -> None:
    """Keeps an interrupt this process handled from ending it by SIGINT once its main module returns.

    CPython remembers a KeyboardInterrupt that escaped code it ran from a C
    string (``PyRun_String``, which extension modules such as resiliparse's
    run while they are imported), and ends the process by SIGINT after its
    main module has returned, whatever status it returned: a SIGTERM that
    lands during such an import, handled by the command as any interrupt,
    ended it -2 rather than 130. Running an empty string through the same
    call clears that memory.
    """
    ctypes.pythonapi.PyRun_SimpleString(b"")


def interrupt_on_sigterm() -> None:
    """From now on, SIGTERM (kill, a scheduler's stop) interrupts the main thread as Ctrl-C does.

    For a command's whole life, from its start: the blocks of :func:`stops_interrupt` inside it also list the
    signals they receive. Call it in the main thread.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)


@contextlib.contextmanager
def stop_signals(on_stop: Callable[[int], None]) -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM (Ctrl-C, kill, a scheduler's stop) are listed and call ``on_stop``.

    Yields the list of the signals received, filled in as they come. Once one
    has come, threads that fail print nothing: they fail because of the stop.
    Signal handlers belong to the main thread: elsewhere the block changes
    nothing.
    An ``on_stop`` that does not raise lets the code of the block go on (a
    process waiting for its children to stop); one that raises stops it
    wherever it is.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        received.append(signum)
        on_stop(signum)

    def drop_lost_interrupts(unraisable) -> None:
        # A signal that comes while a garbage collector's callback runs raises there, where Python cannot pass
        # it on: it prints the exception and goes on. The signal is listed all the same; say nothing of it.
        if not (received and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            hook(unraisable)

    def drop_stopped_threads(failure) -> None:
        # Once stopped, threads fail because of the stop (a stream read from a worker killed with its run): the
        # stop is reported once, by the process, not by each of them.
        if not received:
            thread_hook(failure)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    hook, sys.unraisablehook = sys.unraisablehook, drop_lost_interrupts
    thread_hook, threading.excepthook = threading.excepthook, drop_stopped_threads
    try:
        yield received
    finally:
        threading.excepthook = thread_hook
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(signum: int) -> None:
    raise KeyboardInterrupt


def stops_interrupt() -> contextlib.AbstractContextManager[list[int]]:
    """Within the block, SIGINT and SIGTERM interrupt as Ctrl-C does (:func:`stop_signals` raising it)."""
    return stop_signals(_interrupt)


def stopped_by(received: list[int]) -> tuple[str, int]:
    """The name of the stop signal :func:`stops_interrupt` received first (SIGINT when none: a plain Ctrl-C), and
    the exit status a process it stops ends with: 128 + its number, as a shell reports a process it ended."""
    signum = signal.Signals(received[0] if received else signal.SIGINT)
    return signum.name, 128 + signum.value


def _run_forked(target: Callable[[], int | None], output: pathlib.Path | None, new_session: bool) -> None:
    """The body of a :class:`PythonChild` forked from its parent: ``target``, as a new interpreter would run it."""
    die_with_parent()
    if new_session:
        os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Inherited objects stay where the parent left them: a collection would write to each one's header, which
    # copies the page it is on, and the pages shared with the parent and the other children would become this
    # child's own.
    gc.freeze()
    if output is not None:
        fd = os.open(output, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.dup2(fd, sys.stderr.fileno())
        os.close(fd)
    # The parent's exit handlers are not this process's; the child's own run as at any exit.
    atexit._clear()
    try:
        code = target()
    finally:
        atexit._run_exitfuncs()
    sys.exit(code or 0)


class PythonChild:
    """A child process running Python, which the kernel stops if this process dies.

    It is forked from this process when no other thread runs here: it starts
    with every module this process imported (a new interpreter spends seconds
    importing Beam), in memory pages it shares with this process and with the
    other children forked from it until one of them writes to a page. A fork
    could catch another thread holding a lock, so a process with threads runs
    ``command`` in a new interpreter instead.

    Args:
        target: What a forked child runs; it returns the exit code (None: 0).
        command: What a new interpreter runs instead, to the same effect.
        output: A file that the child's stdout and stderr go to (default: this process's).
        new_session: The child starts a session of its own, out of reach of a terminal's Ctrl-C.
    """

    def __init__(
        self,
        target: Callable[[], int | None],
        command: Sequence[str],
        *,
        output: pathlib.Path | None = None,
        new_session: bool = False,
    ):
        self.command = list(command)
        self.forked = threading.active_count() == 1
        if self.forked:
            if output is not None:
                output.write_bytes(b"")
            self._process = multiprocessing.get_context("fork").Process(
                target=_run_forked, args=(target, output, new_session)
            )
            self._process.start()
            self.pid = self._process.pid
            return
        with contextlib.ExitStack() as stack:
            log = stack.enter_context(open(output, "wb")) if output is not None else None
            self._popen = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT if log else None,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - a SIGKILLed parent cannot stop its children
                start_new_session=new_session,
            )
        self.pid = self._popen.pid

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: the signal that ended it), None if it still runs after ``timeout`` seconds."""
        if self.forked:
            self._process.join(timeout)
            return self._process.exitcode
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self) -> None:
        """Sends SIGTERM unless the child has been waited for already (its pid may then be another's)."""
        if self.forked:
            self._process.terminate()
        else:
            self._popen.terminate()

    def kill(self) -> None:
        """SIGKILLs the child unless it has been waited for already (its pid may then be another's)."""
        if self.forked:
            self._process.kill()
        else:
            self._popen.kill()
