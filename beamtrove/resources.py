"""Models and lists shared by every DoFn instance of a worker process, and loaded ahead of forked workers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Preloading", "load_once"]

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
