"""How many worker processes a DirectRunner run gets when its command line does not say.

``beamtrove run`` on the DirectRunner, with neither ``--direct_running_mode``
nor ``--direct_num_workers`` given, runs its pipeline in Beam's
multi_processing mode with ``--direct_num_workers 0``, which beamtrove reads
as: one SDK worker process per core this process may run on, no more than the
memory available holds at :data:`WORKER_MEMORY` each
(:func:`~beamtrove.processes.machine_workers`), no more than the input's units
of work (its files: one file is read by one worker), and one per
:data:`INPUT_PER_WORKER` bytes of input (a worker's start, about a second of
CPU, and the moves of data between processes pay only on enough work). When
that leaves one worker, the pipeline runs in memory in the command's own
process, as Beam's default does. ``--direct_num_workers 0`` given by hand is
bounded the same way; any other ``--direct_running_mode`` or
``--direct_num_workers`` is used as given.

This module imports no Beam: the command line asks it whether a run will fork
SDK workers before it imports Beam, to start their zygote early
(:func:`workers_foreseen`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from beamtrove.configuration import options_named
from beamtrove.processes import machine_workers

__all__ = [
    "DEFAULT_DIRECT_WORKERS",
    "INPUT_PER_WORKER",
    "WORKER_MEMORY",
    "default_workers",
    "direct_workers_given",
    "option_values",
    "workers_foreseen",
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


def direct_workers_given(argv: Sequence[str]) -> bool:
    """Whether ``argv`` names the DirectRunner's running mode or worker count (``--direct_num_workers`` or
    ``--direct-num-workers``, with its value after ``=`` or apart)."""
    return not options_named(argv).isdisjoint(_WORKER_OPTIONS)


def default_workers(units_of_work: int | None = None, input_bytes: int | None = None) -> int:
    """How many SDK workers a run gets by default: as many as :func:`~beamtrove.processes.machine_workers` allows at
    :data:`WORKER_MEMORY` each, no more than ``units_of_work``, one per :data:`INPUT_PER_WORKER` of
    ``input_bytes``; at least one. What is not known (None) does not bound it."""
    bounds = [machine_workers(WORKER_MEMORY)[0]]
    if units_of_work is not None:
        bounds.append(units_of_work)
    if input_bytes is not None:
        bounds.append(input_bytes // INPUT_PER_WORKER)
    return max(1, min(bounds))


def option_values(argv: Sequence[str], option: str) -> list[str]:
    """The values ``argv`` gives ``option`` (such as ``--input``), in order: ``--input X`` or ``--input=X``."""
    found = []
    for at, argument in enumerate(argv):
        flag, equals, value = argument.partition("=")
        if flag == option:
            found.extend([value] if equals else argv[at + 1 : at + 2])
    return found


def _local_files(pattern: str) -> list[str]:
    """The files a local input names: itself, those below it (a directory), or those its glob matches."""
    files = []
    for path in glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]:
        if os.path.isdir(path):
            files += [os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names]
        elif os.path.isfile(path):
            files.append(path)
    return files


def workers_foreseen(argv: Sequence[str]) -> int:
    """The SDK workers a run of ``argv`` that leaves the count to beamtrove will likely get, known before Beam is
    imported: bounded by its input when every ``--input`` is a local path (its files and their bytes, without
    the reader's choice of files), else by the machine alone. The count is settled once the input is matched.
    """
    inputs = option_values(argv, "--input")
    if not inputs or any("://" in pattern for pattern in inputs):
        return default_workers()
    files = [file for pattern in inputs for file in _local_files(pattern)]
    return default_workers(len(files), sum(map(_size, files)))


def _size(path: str) -> int:
    # A file gone since it was listed counts for nothing: the run that follows says what became of it.
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
