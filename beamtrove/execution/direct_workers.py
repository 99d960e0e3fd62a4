"""How many worker processes a DirectRunner run gets when its command line does not say.

``beamtrove run`` on the DirectRunner, with neither ``--direct_running_mode``
nor ``--direct_num_workers`` given, runs its pipeline in Beam's
multi_processing mode with ``--direct_num_workers 0``, which beamtrove reads
as: one SDK worker process per core this process may run on
(``os.sched_getaffinity``), no more than the memory available holds at
:data:`WORKER_MEMORY` each (the kernel's ``MemAvailable``, or less when the
process's cgroup allows less), no more than the input's units of work (its
files: one file is read by one worker), and one per
:data:`INPUT_PER_WORKER` bytes of input (a worker's start, about a second of
CPU, and the moves of data between processes pay only on enough work). When
that leaves one worker, the pipeline runs in memory in the command's own
process, as Beam's default does. ``--direct_num_workers 0`` given by hand is bounded the same way; any
other ``--direct_running_mode`` or ``--direct_num_workers`` is used as given.

This module imports no Beam: the command line asks it whether a run will fork
SDK workers before it imports Beam, to start their zygote early.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence

__all__ = [
    "DEFAULT_DIRECT_WORKERS",
    "INPUT_PER_WORKER",
    "WORKER_MEMORY",
    "available_memory",
    "default_workers",
    "direct_workers_given",
    "usable_cores",
]

#: The ``--direct_num_workers`` of a run that named no worker count: as many as the machine and the input allow.
DEFAULT_DIRECT_WORKERS = 0

#: Memory set aside for each SDK worker, bytes: about three times what a fineweb worker held at its peak (0.28 GiB
#: of PSS, its URL lists and language model shared with the other workers, on make_warc.py 1200 records; the whole
#: run, 2 workers, 0.79 GiB), leaving room for the runner's process and bundles of larger documents.
WORKER_MEMORY = 1 << 30

#: Bytes of input each worker of a run that left the count to beamtrove gets at least.
INPUT_PER_WORKER = 8 << 20

_WORKER_OPTIONS = ("direct_running_mode", "direct_num_workers")
_CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")
# What a cgroup v1 memory limit reads when there is none: the largest page-aligned signed 64-bit number.
_NO_V1_LIMIT = 1 << 62


def direct_workers_given(argv: Sequence[str]) -> bool:
    """Whether ``argv`` names the DirectRunner's running mode or worker count (``--direct_num_workers`` or
    ``--direct-num-workers``, with its value after ``=`` or apart)."""
    return any(
        argument.startswith("--") and argument[2:].split("=", 1)[0].replace("-", "_") in _WORKER_OPTIONS
        for argument in argv
    )


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes this process may still take: the kernel's ``MemAvailable``, or less when a cgroup allows less.

    None when neither says (not Linux).
    """
    bounds = [bound for bound in (_mem_available(), *_cgroup_room()) if bound is not None]
    return min(bounds, default=None)


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> list[int | None]:
    """What each memory cgroup this process is in leaves under its limit, from its own up to the root."""
    try:
        lines = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    room = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            root, limit_file, usage_file = _CGROUP_ROOT, "memory.max", "memory.current"
        elif "memory" in controllers.split(","):  # cgroup v1
            root, limit_file, usage_file = _CGROUP_ROOT / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        folder = root / path.lstrip("/")
        for level in (folder, *folder.parents):
            if not level.is_relative_to(root):
                break
            room.append(_room(level / limit_file, level / usage_file))
    return room


def _room(limit_file: pathlib.Path, usage_file: pathlib.Path) -> int | None:
    try:
        limit = limit_file.read_text().strip()
        if limit == "max" or int(limit) >= _NO_V1_LIMIT:
            return None
        return max(0, int(limit) - int(usage_file.read_text()))
    except (OSError, ValueError):
        return None


def default_workers(units_of_work: int | None = None, input_bytes: int | None = None) -> int:
    """How many SDK workers a run gets by default: one per usable core, as many as the available memory holds at
    :data:`WORKER_MEMORY` each, no more than ``units_of_work``, one per :data:`INPUT_PER_WORKER` of
    ``input_bytes``; at least one. What is not known (None) does not bound it."""
    bounds = [usable_cores()]
    memory = available_memory()
    if memory is not None:
        bounds.append(memory // WORKER_MEMORY)
    if units_of_work is not None:
        bounds.append(units_of_work)
    if input_bytes is not None:
        bounds.append(input_bytes // INPUT_PER_WORKER)
    return max(1, min(bounds))
