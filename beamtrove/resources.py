"""Models and lists shared by every DoFn instance of a worker process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["load_once"]

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
