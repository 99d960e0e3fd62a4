"""The open tasks a worker is offered: in order, finished ones looked at no more, on a real job directory."""

from __future__ import annotations

import pytest

from beamtrove.execution.jobs import JobDir, prepare_job
from beamtrove.execution.jobs.jobdir import write_once
from beamtrove.execution.jobs.task import OpenTasks


@pytest.fixture
def job(review_jsonl, tmp_path) -> JobDir:
    prepare_job(tmp_path / "job", "convert", [str(review_jsonl)], 6)
    return JobDir(tmp_path / "job")


def _finish(job: JobDir, task: str, *, failed: bool = False) -> None:
    path = job.failed_path(task) if failed else job.done_path(task)
    record = {"task": task, "host": "h", "pid": 1, "records": 0, "error": "x"}
    assert write_once(path, record)


class _Looks:
    """The records of the job looked at: its paths of done and failure records asked for, as they are."""

    def __init__(self, job: JobDir, monkeypatch):
        self.tasks: list[str] = []
        for name in ("done_path", "failed_path"):
            real = getattr(job, name)
            monkeypatch.setattr(job, name, self._counting(real))

    def _counting(self, real):
        def path(task):
            self.tasks.append(task)
            return real(task)

        return path


def test_open_tasks_come_in_order_and_a_finished_one_is_looked_at_no_more(job, monkeypatch):
    tasks = [f"shard-{k:05d}" for k in range(6)]
    open_tasks = OpenTasks(job, tasks)
    assert list(open_tasks.offered()) == tasks
    _finish(job, "shard-00000")
    _finish(job, "shard-00002", failed=True)
    _finish(job, "shard-00003")
    looks = _Looks(job, monkeypatch)
    offered = open_tasks.offered()
    assert next(offered) == "shard-00001"  # looked at lazily: what a worker claims first
    assert list(offered) == ["shard-00004", "shard-00005"]
    assert open_tasks.failed == {"shard-00002"}
    looks.tasks.clear()
    assert list(open_tasks.offered()) == ["shard-00001", "shard-00004", "shard-00005"]
    # The second look passes over the three finished tasks: only the open ones are looked at (failed, then done).
    assert looks.tasks == [task for task in ("shard-00001", "shard-00004", "shard-00005") for _ in range(2)]
    for task in ("shard-00001", "shard-00004", "shard-00005"):
        _finish(job, task)
    assert open_tasks.offered() is None
