"""The manifests of the index folders beamtrove writes (dedup and decontamination): reading one, checking its folder.

A damaged index is bad configuration: each helper here refuses one with a
:class:`~beamtrove.options.ConfigurationError` of one line naming the file and
saying how to rebuild it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from beamtrove.configuration import ConfigurationError

__all__ = ["file_sizes", "is_count", "load_manifest"]


def load_manifest(
    url: str,
    fs,
    path: str,
    *,
    format_name: str,
    version: int,
    index: str,
    rebuild: str,
    problem: Callable[[Mapping[str, Any]], str | None],
) -> dict[str, Any]:
    """The JSON object of the manifest at ``path`` on ``fs`` (``url`` to the user), of the format and version wanted.

    Args:
        url: The manifest as the user named it, for messages.
        fs: The fsspec filesystem holding it.
        path: Its path on ``fs``.
        format_name: The ``format`` it must have.
        version: The ``version`` it must have.
        index: What it describes, for messages (``dedup index``).
        rebuild: What rebuilds the index, for messages (``rebuild the index with ...``).
        problem: What makes the manifest's fields unusable, or None.

    Raises:
        ConfigurationError: It is not JSON, is of another format or version, or ``problem`` finds one.
    """
    with fs.open(path, "rb") as stream:
        try:
            manifest = orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ConfigurationError(f"{url} is not JSON ({exc}): {rebuild}.") from None
    if not isinstance(manifest, dict) or manifest.get("format") != format_name or manifest.get("version") != version:
        raise ConfigurationError(f"{url} is not a version {version} {index}; {rebuild}.")
    found = problem(manifest)
    if found:
        raise ConfigurationError(f"{url} is damaged: {found}; {rebuild}.")
    return manifest


def is_count(value: Any) -> bool:
    """Whether a manifest's ``value`` is a count: an integer of at least 0 (JSON's true and false are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def file_sizes(fs, folder: str) -> dict[str, int]:
    """Every file below ``folder`` on ``fs``, by its path relative to it, with its bytes: one listing of the folder."""
    return {posixpath.relpath(found, folder): info["size"] for found, info in fs.find(folder, detail=True).items()}
