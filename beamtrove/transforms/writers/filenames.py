"""Output file names from templates such as ``${language}/part-${shard}.jsonl.gz``: :class:`FilenameTemplate`.

A template is checked once, when a writer is built, to name files only
inside the output directory; each element's fields then fill it in, made
safe and short enough for any common filesystem. The file sink
(:mod:`beamtrove.transforms.writers.base`) numbers the files of each
rendered destination.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from beamtrove.layout import RUN_OUTPUT_NAMES

__all__ = ["MAX_NAME_BYTES", "MAX_VALUE_BYTES", "MISSING_VALUE", "SHARD", "FilenameTemplate"]

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
_UNSAFE = re.compile(r"[^\w.=+-]")
# fsspec reads "scheme://" (and "::", which chains filesystems) anywhere in a path as a URL of its own.
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
SHARD = "shard"
MISSING_VALUE = "unknown"
#: The longest file or folder name common filesystems take (ext4, XFS, btrfs, ZFS), in bytes of UTF-8.
MAX_NAME_BYTES = 255
#: The longest a placeholder's value renders: a longer one keeps its start and ends in a hash of the whole value.
MAX_VALUE_BYTES = 100
_HASH_CHARS = 16
# Room a name keeps for ${shard}: five digits, more past 99,999 files in one destination.
_SHARD_BYTES = 10
# A shortened value keeps at least a few characters of its start before its hash.
_MIN_VALUE_BYTES = _HASH_CHARS + 8
_EXAMPLE = "'${language}/part-${shard}.jsonl.gz'"


class FilenameTemplate:
    """File names such as ``${dump}/${language}/part-${shard}.jsonl.gz``.

    ``${shard}`` is required and becomes the file's 5-digit sequence number
    within its destination. Every other ``${key}`` is filled from the element's
    fields (a document's metadata); a missing or empty value becomes
    ``unknown``, and characters that could escape the output directory become
    ``_``. A value too long for a file name (over :data:`MAX_VALUE_BYTES`, or
    less when one name holds several placeholders) keeps its start and ends in
    ``-`` and 16 hex digits of its SHA-256, so the same value always gives the
    same name and no name exceeds :data:`MAX_NAME_BYTES`.

    Rendered names stay visible data: a name a value would start with ``.``
    or ``_`` (names readers skip) starts with ``%`` or ``~`` instead, which
    no value renders to otherwise, and a first folder a value would name
    like one of a run's own outputs (``dead_letters``, ...) gets the hash
    ending too, so a document never lands among a run's dead letters.
    """

    def __init__(self, template: str):
        """Validates the template.

        Raises:
            ValueError: The template lacks ``${shard}``, holds a URL or ``::``,
                is absolute, has an empty, ``.`` or ``..`` folder name, or a
                name that could render longer than :data:`MAX_NAME_BYTES`.
        """
        if SHARD not in _PLACEHOLDER.findall(template):
            raise ValueError(
                f"Output file name template {template!r} needs a ${{{SHARD}}} placeholder so that several "
                f"files can share a destination, e.g. 'part-${{{SHARD}}}.jsonl.gz'."
            )
        problem = _placement_problem(template)
        if problem:
            raise ValueError(
                f"Output file name template {template!r} {problem}. A template is a path relative to the output "
                f"directory, e.g. {_EXAMPLE}."
            )
        self.template = template
        # Each folder or file name, and the bytes each of its values may render to.
        self._names = [(name, _value_room(name)) for name in template.split("/")]

    @property
    def suffix(self) -> str:
        """The file name ending after the shard placeholder, e.g. ``.jsonl.gz``."""
        return self.template.rsplit("${" + SHARD + "}", 1)[1].rsplit("/", 1)[-1]

    def destination(self, fields: Mapping[str, Any]) -> str:
        """The template with every placeholder but ``${shard}`` filled in."""
        rendered = [_data_name(_render(name, room, fields), name) for name, room in self._names]
        if rendered[0] in RUN_OUTPUT_NAMES and rendered[0] != self._names[0][0]:
            rendered[0] = _hashed(rendered[0], rendered[0])
        return "/".join(rendered)

    @staticmethod
    def with_shard(destination: str, shard: int) -> str:
        return destination.replace("${" + SHARD + "}", f"{shard:05d}")


def _placement_problem(template: str) -> str | None:
    """What keeps ``template`` from naming files inside the output directory, if anything."""
    if "::" in template:
        return "holds '::', which chains filesystems in an fsspec URL: every file would be written to one place"
    scheme = _URL_SCHEME.search(template)
    if scheme:
        return f"holds a URL ({scheme.group()}...): give the place to write to as the output directory"
    if template.startswith("/"):
        return "is an absolute path"
    for name in template.split("/"):
        if name == "..":
            return "climbs out of the output directory with '..'"
        if name in ("", "."):
            return "has an empty or '.' folder name"
        if name.startswith((".", "_")):
            return f"has the name {name!r}, which readers skip as bookkeeping (it starts with '.' or '_')"
        if _value_room(name) < _MIN_VALUE_BYTES:
            return (
                f"has the name {name!r}, which could render longer than {MAX_NAME_BYTES} bytes: shorten its text "
                "or spread its placeholders over folders"
            )
    return None


def _value_room(name: str) -> int:
    """The bytes each placeholder value of ``name`` may render to, for the name to fit in MAX_NAME_BYTES.

    At most MAX_VALUE_BYTES; negative when the name's own text leaves no room.
    """
    keys = _PLACEHOLDER.findall(name)
    values = sum(key != SHARD for key in keys)
    fixed = len(_PLACEHOLDER.sub("", name).encode("utf-8")) + _SHARD_BYTES * (len(keys) - values)
    if values == 0:
        return MAX_VALUE_BYTES if fixed <= MAX_NAME_BYTES else -1
    return min(MAX_VALUE_BYTES, (MAX_NAME_BYTES - fixed) // values)


def _data_name(rendered: str, name: str) -> str:
    """``rendered`` with a hidden start that a value gave it replaced: ``.`` by ``%``, ``_`` by ``~``."""
    if rendered == name or not rendered.startswith((".", "_")):
        return rendered
    return {".": "%", "_": "~"}[rendered[0]] + rendered[1:]


def _hashed(start: str, value: str) -> str:
    """``start``, ``-`` and 16 hex digits of the SHA-256 of the whole ``value``."""
    return f"{start}-{hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()[:_HASH_CHARS]}"


def _render(name: str, room: int, fields: Mapping[str, Any]) -> str:
    """``name`` with its placeholders but ``${shard}`` filled from ``fields``, each value within ``room`` bytes."""

    def value(match: re.Match) -> str:
        key = match.group(1)
        return match.group(0) if key == SHARD else _name_part(fields.get(key), room)

    return _PLACEHOLDER.sub(value, name)


def _name_part(raw: Any, room: int) -> str:
    """``raw`` made safe for a file name and at most ``room`` bytes long."""
    text = "" if raw is None else str(raw)
    safe = _UNSAFE.sub("_", text)
    if safe.strip(".") == "":
        return MISSING_VALUE
    encoded = safe.encode("utf-8")
    if len(encoded) <= room:
        return safe
    # The hash is of the whole value, so two values that share their start still get different names;
    # "ignore" drops the bytes of a character the cut splits.
    return _hashed(encoded[: room - _HASH_CHARS - 1].decode("utf-8", "ignore"), text)
