"""One attempt of a task, as the engine hands it to the job's kind, and how a kind says an attempt went wrong."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import orjson

from beamtrove.execution.jobs.jobdir import ATTEMPT_FILE
from beamtrove.execution.lease import Lease
from beamtrove.fs import write_local_atomically

__all__ = ["Attempt", "RedoFirst", "TaskFailed"]


class TaskFailed(Exception):
    """An attempt failed; it is retried until the task runs out of attempts.

    Attributes:
        error: Why, for the attempt's record and the worker's line.
        details: More for the attempt's record (a traceback).
    """

    def __init__(self, error: str, **details: Any):
        super().__init__(error)
        self.error = error
        self.details = details


class RedoFirst(Exception):
    """A file or record a task would read is damaged or outdated: its producer must run again first.

    Attributes:
        task: The producer.
        token: The token of the producer's done record found damaged (None when it had none).
    """

    def __init__(self, task: str, token: str | None, message: str):
        super().__init__(message)
        self.task = task
        self.token = token


@dataclasses.dataclass
class Attempt:
    """One attempt of a task: its directory, its record (``attempt.json``) and the lock its worker holds.

    Attributes:
        directory: The attempt's directory.
        record: Its record, as :meth:`save` last wrote it.
        lock: The task's lock.
        beat_every: Seconds between renewals of the lock while the attempt runs (:meth:`beating`).
    """

    directory: pathlib.Path
    record: dict[str, Any]
    lock: Lease
    beat_every: float

    def beating(self):
        """Keeps the task's lock fresh within the block: a kind's run waits on its work in one.

        A kind starts any process it forks before the block: a fork must not catch the heartbeat's thread.
        """
        return self.lock.heartbeat(self.beat_every)

    def save(self, **fields: Any) -> None:
        """Adds ``fields`` to the attempt's record and writes it."""
        self.record.update(fields)
        write_local_atomically(self.directory / ATTEMPT_FILE, orjson.dumps(self.record))
