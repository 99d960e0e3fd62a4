"""The completion marker of one input of a resumable run: its format, in one place.

:class:`~beamtrove.transforms.per_input.ProcessInputs` writes a marker once an
input's outputs are in place; :mod:`beamtrove.execution.resume` reads it back
before the next run into the same output. The marker names the input, the
configuration it was completed with (``config_sha256``), each output's records,
bytes and SHA-256, the counts of what the input's records became and the
counters of every step, and carries a checksum of itself
(:data:`MARKER_CHECKSUM`) so that a marker edited by hand or cut short is told
from a whole one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from beamtrove.fs import InputFile
from beamtrove.progress import utc_timestamp

__all__ = ["MARKER_CHECKSUM", "completion_marker_record", "marker_checksum", "parse_marker", "record_sha256"]

#: The field of a completion marker holding :func:`marker_checksum`.
MARKER_CHECKSUM = "marker_sha256"


def record_sha256(record: Mapping[str, Any]) -> str:
    """The SHA-256 of a JSON record, the same whatever the order of its keys."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def marker_checksum(marker: Mapping[str, Any]) -> str:
    """The SHA-256 of a completion marker's fields but :data:`MARKER_CHECKSUM`: tells a marker edited by hand."""
    return record_sha256({key: value for key, value in marker.items() if key != MARKER_CHECKSUM})


def completion_marker_record(
    file: InputFile,
    config_sha256: str,
    outputs: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, Any],
    counters: Mapping[str, Any],
) -> dict[str, Any]:
    """The marker of ``file``, completed now, checksum included.

    Args:
        file: The input.
        config_sha256: Identifies the run's configuration.
        outputs: Each output's path under the run's output -> its ``records``, ``bytes`` and ``sha256``.
        counts: Records read, documents kept, and excluded and dead letters per step.
        counters: Every step's counters over this input.
    """
    marker = {
        "input": file.url,
        "name": file.name,
        "size": file.size,
        "config_sha256": config_sha256,
        "completed_at": utc_timestamp(),
        "outputs": dict(outputs),
        "counts": dict(counts),
        "counters": dict(counters),
    }
    marker[MARKER_CHECKSUM] = marker_checksum(marker)
    return marker


def parse_marker(data: bytes) -> tuple[dict | None, str]:
    """The marker in ``data`` when it is whole and unedited, else None and what is wrong with it."""
    try:
        marker = json.loads(data)
    except ValueError as exc:
        return None, f"is not valid JSON ({exc})"
    if not isinstance(marker, dict) or not isinstance(marker.get("outputs"), dict):
        return None, "is not a completion marker"
    if marker.get(MARKER_CHECKSUM) != marker_checksum(marker):
        return None, "does not match its checksum (edited, or written by an older beamtrove)"
    return marker, ""
