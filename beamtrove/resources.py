"""Models and lists shared by every DoFn instance of a worker process, and loaded ahead of forked workers."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, runtime_checkable

from beamtrove.fs import filesystem

__all__ = ["MissingOnWorker", "Preloading", "load_once", "missing_on_worker", "require_on_worker"]

_SHARED: dict[Hashable, Any] = {}
_SHARED_LOCK = threading.Lock()


def load_once(key: Hashable, loader: Callable[[], Any]) -> Any:
    """``loader()``'s result, computed once per worker process for each ``key``.

    Beam may run several instances of a DoFn in one process (one per thread);
    models and lists loaded through this are shared by all of them.
    """
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = loader()
        return _SHARED[key]


@runtime_checkable
class Preloading(Protocol):
    """A DoFn or rule whose shared models and lists can be loaded before its worker processes are forked.

    ``preload()`` loads, through :func:`load_once`, what ``setup()`` takes from
    there, in a process that later forks the workers that run it: each worker
    then starts with them loaded, and the workers share their memory rather
    than each loading a copy. It loads only local files and starts no thread (a
    forked process keeps only the thread that forked it); what it cannot load
    is left to ``setup()``, which reports it as ever.
    """

    def preload(self) -> None:
        """Loads the shared resources ``setup()`` will take, as far as they can be loaded ahead."""


class MissingOnWorker(FileNotFoundError):
    """A model or list the job was built with (the launching machine has it) that a worker does not have.

    A run ends with its message alone (``beamtrove run`` prints it as one
    line), not with the worker's traceback.
    """


# How a MissingOnWorker reads in the traceback text a portable runner passes on: its class, then its message.
_RELAYED_MISSING = re.compile(rf"\b{MissingOnWorker.__name__}: ([^\n]+)")


def missing_on_worker(error: BaseException | str) -> str | None:
    """The message of the :class:`MissingOnWorker` that failed a worker, if ``error`` reports one.

    Args:
        error: The error a run ended with (it, or an error it was raised from,
            is the worker's, or holds its traceback as text, as portable
            runners pass it on), or a line of a runner's log.
    """
    if isinstance(error, str):
        found = _RELAYED_MISSING.search(error)
        # Relayed text may keep its line breaks escaped.
        return _without_step(found.group(1).split("\\n")[0]) if found else None
    while error is not None:
        message = _without_step(str(error)) if isinstance(error, MissingOnWorker) else missing_on_worker(str(error))
        if message:
            return message
        error = error.__cause__ or error.__context__
    return None


def _without_step(message: str) -> str:
    """A DoFn's error message without the step Beam adds to it."""
    return message.partition(" [while running ")[0].strip()


def require_on_worker(path: str, what: str, option: str) -> str:
    """``path``, once a worker finds it there.

    Args:
        path: The file or folder the job was built with.
        what: What it is, e.g. ``"the language-ID model"``.
        option: The option that gives it, e.g. ``"--lid_model"``.

    Raises:
        MissingOnWorker: This process does not have it.
    """
    fs, local = filesystem(path)
    if not fs.exists(local):
        raise MissingOnWorker(
            f"{what} {path} ({option}) is not on the worker that needs it, though the machine that built the job "
            "has it: workers read it from their own file system. Put it in the worker image (the image "
            "`beamtrove dataflow build-image` builds holds `beamtrove assets fetch`'s), or give a path every worker "
            "reads."
        )
    return path
