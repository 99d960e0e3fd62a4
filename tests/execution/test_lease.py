"""The lease and its one staleness rule, with real processes racing on real files, and on object store servers."""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import re
import socket
import subprocess
import threading
import time

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from beamtrove.execution.lease import (
    Claim,
    heartbeats_paused,
    lease_state,
    read_claim,
    remove_stale,
    stale_reason,
    take_lease,
)
from beamtrove.fs import filesystem

_HOST = socket.gethostname()


def _dead_pid() -> int:
    """A pid that ran on this host and has exited."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def _left(path, record: dict | bytes, age: float = 0.0) -> None:
    """Leaves a claim at ``path`` as another process would have, last renewed ``age`` s ago (the file's time)."""
    path.write_bytes(record if isinstance(record, bytes) else json.dumps(record).encode())
    renewed = time.time() - age
    os.utime(path, (renewed, renewed))


def test_a_claim_of_a_dead_process_on_this_host_is_stale_at_once(tmp_path):
    path = tmp_path / "task.lock"
    _left(path, {"host": _HOST, "pid": _dead_pid(), "token": "old", "heartbeat": time.time()})
    assert lease_state(path, 3600) == ("stale", json.loads(path.read_text()))
    lease = take_lease(path, {"host": _HOST, "pid": os.getpid()}, 3600)
    assert lease is not None and lease.took_over == "its process is gone" and lease.replaced.record["token"] == "old"
    assert lease.owned() and json.loads(path.read_text())["token"] == lease.token
    # A claim of this very process is one it left behind: a process holds a lease on a path once.
    assert stale_reason(read_claim(path), 3600) == "it was this process's"
    # The same pid under another host's name is that host's process: judged by its renewal alone.
    assert stale_reason(read_claim(path), 3600, host="elsewhere") is None


def test_a_claim_of_another_host_is_stale_only_once_not_renewed_for_the_timeout(tmp_path):
    path = tmp_path / "task.lock"
    claim = {"host": "elsewhere", "pid": 1, "token": "theirs"}
    # Where the store keeps times, they tell the last renewal: an old heartbeat in a fresh file is no matter.
    _left(path, {**claim, "heartbeat": time.time() - 600}, age=50)
    assert lease_state(path, 60)[0] == "running"
    assert take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60) is None
    assert not remove_stale(path, 60)
    assert json.loads(path.read_text())["token"] == "theirs", "a live owner's claim is left alone"
    _left(path, {**claim, "heartbeat": time.time()}, age=61)
    assert lease_state(path, 60)[0] == "stale"
    lease = take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60)
    assert lease is not None and lease.took_over == "no heartbeat for 60 s"
    # A lease taken without a timeout takes only a free one.
    lease.release()
    _left(path, {**claim, "heartbeat": time.time()}, age=3600)
    assert take_lease(path, {"host": _HOST, "pid": os.getpid()}, None) is None


@pytest.mark.parametrize("data", [b"", b"\x00\xff garbage", b'{"host": "elsewhere", "pid": 4'])
def test_an_unreadable_claim_is_judged_by_the_age_of_its_file(tmp_path, data):
    path = tmp_path / "task.lock"
    _left(path, data, age=30)
    # Maybe a claim its owner is writing right now.
    assert lease_state(path, 60) == ("running", None)
    assert take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60) is None
    assert path.read_bytes() == data
    _left(path, data, age=90)
    assert lease_state(path, 60) == ("stale", None)
    lease = take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60)
    assert lease is not None and lease.took_over == "it was last written 90 s ago, over the 60 s timeout"


def test_on_a_store_without_modification_times_the_heartbeat_inside_tells(monkeypatch):
    def no_times(self, path):
        raise NotImplementedError

    monkeypatch.setattr(MemoryFileSystem, "modified", no_times)
    fs = fsspec.filesystem("memory")
    url = "memory://no-times/owner.json"
    fs.pipe("/no-times/owner.json", json.dumps({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 30}).encode())
    assert lease_state(url, 60)[0] == "running"
    fs.pipe("/no-times/owner.json", json.dumps({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 90}).encode())
    assert lease_state(url, 60)[0] == "stale"
    # Unreadable, and no time kept: nothing tells its age, so it is never taken over.
    fs.pipe("/no-times/owner.json", b"")
    assert read_claim(url) == Claim(None, None)
    assert lease_state(url, 0) == ("running", None)
    assert take_lease(url, {"host": _HOST, "pid": os.getpid()}, 0) is None


def test_the_heartbeat_renews_the_claim_while_it_runs_and_until_release(tmp_path):
    path = tmp_path / "task.lock"
    lease = take_lease(path, {"host": "elsewhere", "pid": 1}, 60)
    _left(path, lease.claim, age=120)
    with lease.heartbeat(0.05) as held:
        assert held is lease
        time.sleep(0.3)
        assert lease_state(path, 60)[0] == "running"
    _left(path, lease.claim, age=120)
    time.sleep(0.3)
    assert lease_state(path, 60)[0] == "stale", "no beat once the block ended"
    # Left running, the beat lasts until the lease is released.
    lease.heartbeat(0.05)
    time.sleep(0.3)
    assert lease_state(path, 60)[0] == "running"
    lease.release()
    assert not path.exists() and not lease.owned()
    lease.release()


def _heartbeat_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("heartbeat-")]


def test_heartbeats_paused_run_no_thread_and_beat_again_after(tmp_path):
    path = tmp_path / "task.lock"
    lease = take_lease(path, {"host": "elsewhere", "pid": 1}, 60)
    # Another test of this process may hold a lease whose heartbeat still beats: a pause stops it too.
    with lease.heartbeat(0.05):
        assert _heartbeat_threads().count("heartbeat-task.lock") == 1
        with heartbeats_paused():
            # What a process about to fork needs: no thread of its own that the fork could catch holding a lock.
            assert _heartbeat_threads() == []
            _left(path, lease.claim, age=120)
            time.sleep(0.3)
            assert lease_state(path, 60)[0] == "stale", "no beat while paused"
        time.sleep(0.3)
        assert lease_state(path, 60)[0] == "running", "the beat goes on after the pause"
    assert "heartbeat-task.lock" not in _heartbeat_threads()
    with heartbeats_paused():
        pass
    assert "heartbeat-task.lock" not in _heartbeat_threads(), "a heartbeat stopped is not started again by a pause"
    lease.release()


def test_a_lease_taken_over_is_neither_renewed_nor_removed_by_its_old_owner(tmp_path):
    path = tmp_path / "task.lock"
    lease = take_lease(path, {"host": "elsewhere", "pid": 1}, 60)
    with lease.heartbeat(0.05):
        _left(path, lease.claim, age=120)
        newer = take_lease(path, {"host": "other", "pid": 2}, 60)
        assert newer is not None and newer.took_over == "no heartbeat for 60 s"
        _left(path, newer.claim, age=120)
        time.sleep(0.3)
        assert lease_state(path, 60)[0] == "stale", "the old owner's beat stopped with its claim"
    lease.release()
    assert newer.owned()


def _released_in_a_child(lease) -> None:
    lease.release()  # its parent's: nothing
    os._exit(0)


def test_a_forked_child_does_not_release_its_parents_lease(tmp_path):
    path = tmp_path / "task.lock"
    lease = take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60)
    child = multiprocessing.get_context("fork").Process(target=_released_in_a_child, args=(lease,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0 and lease.owned()


def _race(path: str, start, done, results) -> None:
    start.wait()
    lease = take_lease(path, {"host": _HOST, "pid": os.getpid()}, 60)
    results.put(None if lease is None else (os.getpid(), lease.took_over))
    # Alive until every racer has tried: a winner gone would be a dead process's claim, stale at once.
    done.wait(timeout=60)


def _racers(path, count: int = 8) -> list:
    """What each of ``count`` processes racing to take the lease at ``path`` got: None, or (pid, took_over)."""
    context = multiprocessing.get_context("fork")
    start, done, results = context.Event(), context.Event(), context.Queue()
    processes = [context.Process(target=_race, args=(str(path), start, done, results)) for _ in range(count)]
    for process in processes:
        process.start()
    time.sleep(0.5)  # let every process reach the start line
    start.set()
    got = [results.get(timeout=60) for _ in processes]
    done.set()
    for process in processes:
        process.join(timeout=60)
    return got


def test_of_processes_racing_for_a_free_lease_exactly_one_takes_it(tmp_path):
    path = tmp_path / "task.lock"
    won = [result for result in _racers(path) if result is not None]
    assert len(won) == 1 and won[0][1] is None
    assert json.loads(path.read_text())["pid"] == won[0][0]


@pytest.mark.parametrize(
    ("left", "why"),
    [
        ("a dead process's", "its process is gone"),
        ("an old one", "no heartbeat for 60 s"),
        ("unreadable and old", "it was last written 60[01] s ago, over the 60 s timeout"),
    ],
)
def test_of_processes_racing_for_a_stale_lease_exactly_one_takes_it_over(tmp_path, left, why):
    path = tmp_path / "task.lock"
    if left == "a dead process's":
        _left(path, {"host": _HOST, "pid": _dead_pid(), "token": "old"})
    elif left == "an old one":
        _left(path, {"host": "elsewhere", "pid": 1, "token": "old"}, age=600)
    else:
        _left(path, b"", age=600)
    got = _racers(path)
    won = [result for result in got if result is not None]
    assert len(won) == 1, got
    assert json.loads(path.read_text())["pid"] == won[0][0]
    # One racer removed the stale claim under the guard; it says why when it also created the new one (another,
    # finding the path free right then, may create it first).
    assert won[0][1] is None or re.fullmatch(why, won[0][1]), won
    assert not path.with_suffix(".takeover").exists()


# Slow: the default suite takes the output lock, a lease, on both servers (tests/execution/test_output_stores.py).
@pytest.mark.slow
def test_a_lease_on_an_object_store(store):
    url = f"{store.bucket()}/lease/owner.json"
    lease = take_lease(url, {"host": "elsewhere", "pid": 1}, 60)
    assert lease is not None and lease.owned()
    assert take_lease(url, {"host": _HOST, "pid": os.getpid()}, 60) is None
    state, record = lease_state(url, 60)
    assert state == "running" and record["token"] == lease.token
    # A renewal writes the claim again: the store's time of it moves, and the heartbeat inside.
    first = read_claim(url)
    with lease.heartbeat(0.3):
        time.sleep(1.5)  # S3 keeps times to the second
    renewed = read_claim(url)
    assert renewed.written > first.written and renewed.record["heartbeat"] > first.record["heartbeat"]
    # Not renewed for the timeout: taken over, and the old owner can no longer remove it.
    time.sleep(1.2)
    newer = take_lease(url, {"host": _HOST, "pid": os.getpid()}, 1)
    assert newer is not None and newer.took_over == "no heartbeat for 1 s"
    lease.release()
    assert newer.owned()
    newer.release()
    assert lease_state(url, 60) == ("free", None)
    fs, path = filesystem(url)
    assert not fs.exists(path) and not fs.exists(path.replace("owner.json", "owner.takeover"))


def test_an_unreadable_claim_on_a_memory_store_is_judged_by_its_time():
    fs = fsspec.filesystem("memory")
    fs.pipe("/unreadable-lease/owner.json", b"")
    url = "memory://unreadable-lease/owner.json"
    assert lease_state(url, 60) == ("running", None)
    fs.store["/unreadable-lease/owner.json"].modified = datetime.datetime.now(datetime.UTC) - datetime.timedelta(
        seconds=600
    )
    lease = take_lease(url, {"host": _HOST, "pid": os.getpid()}, 60)
    assert lease is not None and lease.took_over.startswith("it was last written 600 s ago")
    lease.release()
    assert not fs.exists("/unreadable-lease/owner.json")
