"""Whose memory a Python process holds over a run: beamtrove's code or the runner's, traced with memray.

A process's peak memory mixes what beamtrove's DoFns keep (groups, buffers,
open files) with what the runner keeps for them: the DirectRunner's
in-memory PCollections, the gRPC messages of a portable runner's data plane.
``run_traced`` runs a ``beamtrove`` command under memray
(``pip install memray``; it records every allocation's Python stack), and
``peak_by_owner`` charges each allocation to the innermost frame that
belongs to beamtrove, to the runner (``apache_beam.runners`` and gRPC), or to
module loading, then gives each owner's own peak over the run: the most it
held at any one moment, whenever that was.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import pathlib
import subprocess
import sys

from benchmarks.common import command_failed

__all__ = ["BEAMTROVE", "IMPORTS", "OTHER", "RUNNER", "peak_by_owner", "run_traced"]

BEAMTROVE = "beamtrove"
RUNNER = "runner"
IMPORTS = "imports"
OTHER = "other"
_STACK_FRAMES = 64


def _package_dir(name: str) -> str:
    return os.path.join(importlib.util.find_spec(name).submodule_search_locations[0], "")


def _owner(frames: list[tuple[str, str, int]], beamtrove: str, runners: tuple[str, ...]) -> str:
    # Innermost first: numpy or hashlib called by a DoFn is the DoFn's memory.
    for _, filename, _ in frames:
        if filename.startswith("<frozen importlib"):
            return IMPORTS
        if filename.startswith(runners):
            return RUNNER
        if filename.startswith(beamtrove):
            return BEAMTROVE
    return OTHER


def run_traced(command: list[str], trace: pathlib.Path, log: pathlib.Path) -> None:
    """Runs ``beamtrove ...`` (``command``) under memray, recording to ``trace``, its output in ``log``.

    Raises:
        RuntimeError: memray is missing or the command failed.
    """
    if importlib.util.find_spec("memray") is None:
        raise RuntimeError("tracing memory needs memray: pip install memray")
    if command[0] != "beamtrove":
        raise ValueError(f"run_traced runs beamtrove commands (got {command[0]!r}).")
    trace.unlink(missing_ok=True)
    traced = [sys.executable, "-m", "memray", "run", "-q", "-o", str(trace), "-m", "beamtrove", *command[1:]]
    with log.open("w") as out:
        code = subprocess.run(traced, check=False, stdout=out, stderr=subprocess.STDOUT).returncode
    if code:
        raise command_failed("memray run -m beamtrove", code, log)


def peak_by_owner(trace: pathlib.Path) -> dict[str, int]:
    """Each owner's peak bytes over the traced run, at memray's snapshot resolution (10 ms by default)."""
    from memray import FileReader  # noqa: PLC0415 - an optional tool, not a dependency

    beamtrove = _package_dir("beamtrove")
    runners = (_package_dir("apache_beam.runners"), _package_dir("grpc"))
    records, snapshots = FileReader(str(trace)).get_temporal_high_water_mark_allocation_records(merge_threads=True)
    # Per owner, the bytes that became live (+) and were freed (-) before each snapshot.
    changes: dict[str, list[int]] = collections.defaultdict(lambda: [0] * (len(snapshots) + 1))
    for record in records:
        owned = changes[_owner(record.stack_trace(max_stacks=_STACK_FRAMES), beamtrove, runners)]
        for interval in record.intervals:
            freed = interval.deallocated_before_snapshot
            owned[interval.allocated_before_snapshot] += interval.n_bytes
            owned[len(snapshots) if freed is None else freed] -= interval.n_bytes
    peaks = {}
    for owner, deltas in changes.items():
        live = peak = 0
        for delta in deltas:
            live += delta
            peak = max(peak, live)
        peaks[owner] = peak
    return peaks
