"""The CPU-time limit of filters and formatters: per thread, on CPU time, in the main thread and in others."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from beamtrove.transforms.cpu_time import CpuTimeLimit, CpuTimeLimitExceeded


def _spin() -> None:
    while True:
        pass


def _outcome(limit: CpuTimeLimit, function, *args):
    try:
        return limit.run(function, *args)
    except CpuTimeLimitExceeded as exc:
        return f"timeout: {exc}"


def _in_thread(function):
    """What ``function()`` returns in a new thread, as a Prism or multi_processing SDK worker runs a DoFn."""
    results = []
    thread = threading.Thread(target=lambda: results.append(function()))
    thread.start()
    thread.join()
    return results[0]


def test_a_call_that_spins_is_cut_short_and_the_next_call_runs_in_full():
    limit = CpuTimeLimit(0.1, "spin")
    assert _outcome(limit, _spin) == "timeout: spin used more than 0.1 s of CPU time"
    assert _outcome(limit, sum, range(1000)) == 499500


def test_a_call_in_a_thread_that_is_not_the_main_one_is_cut_short():
    limit = CpuTimeLimit(0.1, "spin")
    assert _in_thread(lambda: [_outcome(limit, _spin), _outcome(limit, len, "abc")]) == [
        "timeout: spin used more than 0.1 s of CPU time",
        3,
    ]


def test_waiting_and_other_threads_busy_meanwhile_do_not_count():
    limit = CpuTimeLimit(0.1, "wait")
    stop = threading.Event()
    # Another thread of the same process keeps a core busy the whole time: the process's CPU time grows, the
    # waiting thread's does not.
    busy = threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)])
    busy.start()
    try:
        assert _outcome(limit, lambda: time.sleep(0.5) or "waited") == "waited"
    finally:
        stop.set()
        busy.join()


def test_a_call_that_catches_what_interrupts_it_is_still_a_timeout():
    limit = CpuTimeLimit(0.1, "swallow")

    def swallow():
        # As a bare ``except:`` in a library would.
        with contextlib.suppress(BaseException):
            _spin()
        return "carried on"

    def rewrap():
        try:
            _spin()
        except BaseException as exc:
            raise RuntimeError("a library's own error") from exc

    assert _outcome(limit, swallow) == "timeout: swallow used more than 0.1 s of CPU time"
    assert _outcome(limit, rewrap) == "timeout: swallow used more than 0.1 s of CPU time"
    # A call's own error within its time is its own.
    with pytest.raises(ZeroDivisionError):
        limit.run(lambda: 1 / 0)


def test_threads_each_get_their_own_time():
    limit = CpuTimeLimit(0.3, "spin")
    results = {}

    def work(name, function):
        results[name] = _outcome(limit, function)

    threads = [threading.Thread(target=work, args=("spinner", _spin))] + [
        threading.Thread(target=work, args=(f"quick-{number}", lambda: sum(range(100_000)))) for number in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {
        "spinner": "timeout: spin used more than 0.3 s of CPU time",
        **{f"quick-{number}": 4999950000 for number in range(3)},
    }


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf")])
def test_a_limit_that_is_not_a_positive_number_of_seconds_is_refused(seconds):
    with pytest.raises(ValueError, match="positive number of seconds"):
        CpuTimeLimit(seconds)
