"""The extraction limit counts CPU time, which machine load changes little; a backstop ends hangs.

The backstop does not count time the extraction process spent waiting for a CPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import time

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.extractors import Extract, ExtractionTimeout, Extractor
from beamtrove.transforms.extractors.base import _Sandbox, wall_clock_backstop
from tests.conftest import busy_processes, run_and_collect

# PBKDF2 rounds that take OpenSSL roughly a CPU second here, measured once (one C call, no Python in between).
_ROUNDS_PER_CPU_SECOND = None
_MAX_PBKDF2_ROUNDS = 2**31 - 1  # hashlib refuses more


def _pbkdf2_rounds(cpu_seconds: float) -> int:
    global _ROUNDS_PER_CPU_SECOND  # noqa: PLW0603 - measured once per test session
    if _ROUNDS_PER_CPU_SECOND is None:
        started = time.process_time()
        hashlib.pbkdf2_hmac("sha256", b"page", b"salt", 200_000)
        _ROUNDS_PER_CPU_SECOND = 200_000 / max(time.process_time() - started, 1e-3)
    return max(1, min(int(_ROUNDS_PER_CPU_SECOND * cpu_seconds), _MAX_PBKDF2_ROUNDS))


def _burn_cpu(seconds: float) -> None:
    """Keeps the CPU busy in Python for ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class _Scripted(Extractor):
    """Does what the page says, then answers the extraction process's pid.

    ``sleep S`` waits S wall-clock seconds without using the CPU, ``burn S`` uses S CPU seconds in Python,
    ``c-call N`` runs one C call of N PBKDF2 rounds, ``spin`` never ends, ``swallow`` spins but catches
    whatever interrupts it and answers as if nothing happened, and ``die-once PATH`` ends its process the first
    time (when PATH does not exist yet).
    """

    name = "scripted"

    def extract(self, html: str) -> str:
        action, _, argument = html.partition(" ")
        if action == "sleep":
            time.sleep(float(argument))
        elif action == "burn":
            _burn_cpu(float(argument))
        elif action == "c-call":
            hashlib.pbkdf2_hmac("sha256", b"page", b"salt", int(argument))
        elif action == "spin":
            _burn_cpu(float("inf"))
        elif action == "die-once" and not os.path.exists(argument):
            open(argument, "w").close()
            os._exit(1)
        elif action == "swallow":
            # An extractor that hides whatever interrupts it, as a bare ``except:`` in a library would.
            with contextlib.suppress(BaseException):
                _burn_cpu(float("inf"))
        return str(os.getpid())


@pytest.fixture
def sandbox():
    """Makes sandboxes of ``_Scripted`` with ``sandbox(cpu_limit, backstop=None)``; closes them afterwards."""
    made = []

    def make(cpu_limit: float, backstop: float | None = None) -> _Sandbox:
        made.append(_Sandbox(_Scripted(), cpu_limit, backstop))
        return made[-1]

    yield make
    for box in made:
        box.close()


def _outcome(box: _Sandbox, page: str) -> str:
    try:
        return box.extract(page)
    except ExtractionTimeout as exc:
        return f"timeout: {exc}"


def test_a_page_waiting_longer_than_its_limit_without_using_cpu_is_kept():
    documents = [Document(text="sleep 0.4", id=f"sleeper-{number}") for number in range(3)]

    def build(pipeline):
        kept = pipeline | beam.Create(documents) | "extract" >> Extract(_Scripted(), timeout=0.1)
        assert_that(kept | beam.Map(lambda d: d.id), equal_to([d.id for d in documents]))

    assert run_and_collect(build)["extract"]["counters"] == {"in": 3, "out": 3}


def test_a_page_using_more_cpu_than_its_limit_is_a_timeout_dead_letter():
    documents = [Document(text="spin", id="spinner"), Document(text="burn 0.05", id="quick")]

    def build(pipeline):
        kept, dead_letters = (
            pipeline | beam.Create(documents) | "extract" >> Extract(_Scripted(), timeout=0.2).with_dead_letters()
        )
        assert_that(kept | beam.Map(lambda d: d.id), equal_to(["quick"]))
        assert_that(
            dead_letters | beam.Map(lambda d: (d.record_id, d.reason, d.message)),
            equal_to([("spinner", "timeout", "extraction used more than 0.2 s of CPU time")]),
            label="DeadLetters",
        )

    counters = run_and_collect(build)["extract"]["counters"]
    assert counters == {"in": 2, "out": 1, "errors.timeout": 1}


def test_cpu_time_spent_in_one_long_c_call_counts(sandbox):
    # The interruption can only happen once the C call is back in Python; the CPU time it used still counts.
    box = sandbox(cpu_limit=0.05)
    assert _outcome(box, f"c-call {_pbkdf2_rounds(0.5)}") == "timeout: extraction used more than 0.05 s of CPU time"


def test_each_page_gets_its_own_cpu_time_in_the_same_process(sandbox):
    box = sandbox(cpu_limit=0.25)
    # Together the pages use several times the limit; each alone stays under it.
    pids = {box.extract("burn 0.1") for _ in range(6)}
    assert len(pids) == 1, "the extraction process was not reused between pages"


def test_the_page_after_a_cpu_timeout_is_extracted_with_its_full_cpu_time(sandbox):
    box = sandbox(cpu_limit=0.2)
    first_pid = box.extract("burn 0.01")
    assert _outcome(box, "spin") == "timeout: extraction used more than 0.2 s of CPU time"
    second_pid = box.extract("burn 0.15")
    # The interrupted process is replaced: its extractor may have been stopped mid-update.
    assert second_pid != first_pid
    assert box.extract("burn 0.15") == second_pid


def test_an_extractor_that_swallows_the_interruption_still_times_out(sandbox):
    box = sandbox(cpu_limit=0.1)
    assert _outcome(box, "swallow") == "timeout: extraction used more than 0.1 s of CPU time"
    assert box.extract("burn 0.01").isdigit()


def test_a_page_stuck_in_one_c_call_is_a_cpu_timeout_long_before_the_backstop(sandbox):
    # One C call of minutes: the CPU-time interruption waits for it in vain; the worker sees the CPU it uses.
    box = sandbox(cpu_limit=0.05)
    started = time.monotonic()
    outcome = _outcome(box, f"c-call {_pbkdf2_rounds(600)}")
    assert outcome == "timeout: extraction used more than 0.05 s of CPU time"
    assert time.monotonic() - started < 10, "ended by the 30 s backstop, not by the CPU it used"
    assert box.extract("burn 0.01").isdigit()


def test_a_sleeping_page_past_the_backstop_is_a_timeout(sandbox):
    box = sandbox(cpu_limit=0.05, backstop=0.5)
    assert _outcome(box, "sleep 600") == "timeout: extraction did not finish within the 0.5 s backstop"
    assert box.extract("sleep 0.1").isdigit()


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="time spent waiting for a CPU is Linux's")
def test_a_page_starved_of_cpu_past_the_backstop_is_kept(sandbox):
    # Six busy processes per core leave the extraction process a seventh of a core: its 0.3 CPU seconds take
    # about 2 s of wall-clock time, twice the backstop, all but 0.3 s of it waiting for a CPU.
    box = sandbox(cpu_limit=1.0, backstop=1.0)
    box.extract("burn 0")
    with busy_processes(6 * os.cpu_count()):
        started = time.monotonic()
        outcome = _outcome(box, "burn 0.3")
        took = time.monotonic() - started
    assert took > 1.0, f"the page was not starved ({took:.2f} s): the test checks nothing"
    assert outcome.isdigit(), outcome


def test_a_page_sent_to_a_process_that_died_between_pages_goes_to_a_new_process(sandbox):
    box = sandbox(cpu_limit=1.0)
    first_pid = box.extract("burn 0")
    os.kill(int(first_pid), signal.SIGKILL)
    box._process.join()
    # The sandbox checks that its process lives before sending; this is a death just after that check.
    box._process.is_alive = lambda: True
    assert box.extract("burn 0") not in {first_pid, ""}


def test_a_process_that_dies_on_a_page_once_does_not_cost_the_page(sandbox, tmp_path):
    # A page that kills its process every time is a process_died dead letter (tests/.../test_base.py); one death
    # the page did not cause must not decide what is kept.
    box = sandbox(cpu_limit=1.0)
    first_pid = box.extract("burn 0")
    assert box.extract(f"die-once {tmp_path / 'died'}") not in {first_pid, ""}
    assert (tmp_path / "died").exists()


def test_the_backstop_is_thirty_times_the_cpu_limit_and_at_least_thirty_seconds():
    assert wall_clock_backstop(0.1) == 30.0
    assert wall_clock_backstop(1.0) == 30.0
    assert wall_clock_backstop(4.0) == 120.0
