"""What the engine and a job's kind share: one attempt of a task, how an attempt went wrong, and the open tasks."""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from beamtrove.execution.jobs.jobdir import ATTEMPT_FILE, JobDir
from beamtrove.execution.lease import Lease
from beamtrove.fs import write_local_atomically

__all__ = ["Attempt", "OpenTasks", "RedoFirst", "TaskFailed"]


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
        token: The token of the producer's done record whose file is damaged; None when what is damaged is a
            stage's listing, which is written again from the records when the stage is sealed again.
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


class OpenTasks:
    """Tasks in the order workers take them, each looked at (two ``stat`` calls) until it is seen finished.

    A worker asks for the open tasks after every task it runs: looking at every
    task each time would cost it as much as the job has tasks. Here a task seen
    with a done or failure record is not looked at again, and the open ones are
    looked at only as far as a worker goes to claim one, so a worker's looks
    cost, over the job, a few per task.

    Args:
        job: The job directory.
        tasks: The tasks, in order.
    """

    def __init__(self, job: JobDir, tasks: Iterable[str]):
        self._job = job
        self._tasks = list(tasks)
        self._head = 0
        self._finished: set[str] = set()
        #: The tasks seen with a failure record.
        self.failed: set[str] = set()

    def offered(self) -> Iterator[str] | None:
        """The tasks with neither a done nor a failure record, in order, looked at as they are taken from the
        iterator; None when none is left."""
        tasks = self._open()
        first = next(tasks, None)
        return None if first is None else itertools.chain([first], tasks)

    def _open(self) -> Iterator[str]:
        index = self._head
        while index < len(self._tasks):
            task = self._tasks[index]
            finished = task in self._finished or self._seen_finished(task)
            if finished and index == self._head:
                self._head += 1  # a finished start is never looked at again
            elif not finished:
                yield task
            index += 1

    def _seen_finished(self, task: str) -> bool:
        if self._job.failed_path(task).exists():
            self.failed.add(task)
        elif not self._job.done_path(task).exists():
            return False
        self._finished.add(task)
        return True
