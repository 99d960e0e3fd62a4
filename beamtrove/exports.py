"""Packages that name their public objects at the top but import each only when it is used.

A package whose ``__init__`` imported all its modules would make importing
any one of them import them all, Beam with them: a command that only reads a
job directory would pay for Beam's import to get an exception class.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exported_from"]


def exported_from(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``homes`` comes from its module on first use.

    Args:
        package: The package's ``__name__``, for the error a missing name raises.
        homes: Exported name -> the module defining it.
    """

    def lookup(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    return lookup
