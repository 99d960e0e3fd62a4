"""The extractor contract and the ``Extract`` transform.

An :class:`Extractor` turns a document's raw HTML into plain text. ``Extract``
runs one on every document with a per-document limit on the CPU time its
extraction uses. The extraction happens in a child process: the child interrupts
a page that used up its CPU time, and the worker kills and replaces a child that
uses up its CPU time inside one C call (where the interruption cannot reach it)
or that has not answered within a generous backstop of time spent neither
working nor waiting for a CPU (a deadlock, a blocked read). A limit on CPU time
rather than wall-clock time keeps the output all but independent of the
machine's load: a page is not cut short because other processes took the CPU.
The signal that measures CPU time is handled in the child only, so this works
on every runner and leaves the worker's signals and threads alone.
"""

from __future__ import annotations

import abc
import dataclasses
import gc
import logging
import math
import multiprocessing
import os
import signal
import time
from typing import ClassVar

import apache_beam as beam
from apache_beam import pvalue

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.layout import DEAD_LETTERS
from beamtrove.metrics import StepMetrics

__all__ = ["Extract", "ExtractionTimeout", "Extractor", "wall_clock_backstop"]

_PARENT_CHECK_SECONDS = 5.0
_START_ATTEMPTS = 3
_BACKSTOP_FACTOR = 30.0
_BACKSTOP_MIN_SECONDS = 30.0
# CPU seconds, beyond its limit, that a page stuck in one C call may use before its process is killed: the
# page is a timeout either way, so this only bounds the CPU it wastes.
_C_CALL_GRACE_SECONDS = 1.0
_LOGGER = logging.getLogger(__name__)


class Extractor(abc.ABC):
    """Turns HTML into the main text of the page.

    Subclasses are plain picklable configuration; :meth:`setup` loads what is
    heavy once per process that extracts.
    """

    name: ClassVar[str]

    def setup(self) -> None:  # noqa: B027 - optional hook
        """Prepares the extractor in the process that will call :meth:`extract`."""

    @abc.abstractmethod
    def extract(self, html: str) -> str:
        """The main text of ``html``; an empty string when there is none."""


class ExtractionTimeout(Exception):
    """An extraction used up its CPU time, or overran the wall-clock backstop and its process was killed."""


class ExtractionProcessDied(Exception):
    """The extraction process ended without answering (killed, out of memory...)."""


class _ChildFailure(Exception):
    """The extractor raised in the extraction process; the message describes the original exception."""


def wall_clock_backstop(cpu_limit: float) -> float:
    """Seconds after which an unanswered page is a timeout, not counting time its process waited for a CPU.

    Time spent waiting for a CPU is known on Linux (``/proc/<pid>/schedstat``);
    elsewhere the backstop counts all wall-clock time.

    Args:
        cpu_limit: CPU seconds one page may use.

    Returns:
        ``max(30, 30 * cpu_limit)``.
    """
    return max(_BACKSTOP_MIN_SECONDS, _BACKSTOP_FACTOR * cpu_limit)


def _scheduler_seconds(pid: int) -> tuple[float, float] | None:
    """(Seconds on a CPU, seconds runnable but waiting for one) of process ``pid``; None where Linux does not say."""
    try:
        with open(f"/proc/{pid}/schedstat") as stats:
            on_cpu, waiting, _ = stats.read().split()
        return int(on_cpu) / 1e9, int(waiting) / 1e9
    except (OSError, ValueError):
        return None


class _CpuTimeExceeded(BaseException):
    """Interrupts the extraction of a page that used up its CPU time.

    A ``BaseException``, so that an extractor's ``except Exception`` does not swallow it.
    """


class _CpuTimeLimit:
    """Limits the CPU time of each page the extraction process extracts.

    ``ITIMER_PROF`` counts the user and system time of this process, also while
    it runs C code such as lxml's parser; its signal handler interrupts the page
    once control is back in Python (what never comes back is the backstop's).
    The timer fires once per page: an extractor that catches the interruption
    and carries on still has the page counted as used up, and the backstop ends
    it if it never returns.

    Args:
        seconds: CPU seconds one page may use.
    """

    def __init__(self, seconds: float):
        self._seconds = seconds
        self._armed = False
        self.used_up = False
        signal.signal(signal.SIGPROF, self._interrupt)

    def __enter__(self) -> _CpuTimeLimit:
        self.used_up = False
        self._armed = True
        signal.setitimer(signal.ITIMER_PROF, self._seconds)
        return self

    def __exit__(self, *exc_info) -> None:
        remaining, _ = signal.setitimer(signal.ITIMER_PROF, 0)
        # The timer ran out even when its handler has not run yet or the extractor caught what it raised.
        self.used_up = self.used_up or remaining == 0
        self._armed = False

    def _interrupt(self, signum, frame) -> None:
        # A signal of the previous page that arrives once it is over must not touch the next one.
        if self._armed:
            self.used_up = True
            raise _CpuTimeExceeded


# What the extraction process answers for a page: (outcome, text or failure description).
_EXTRACTED = "extracted"
_FAILED = "failed"
_CPU_TIME_USED_UP = "cpu_time_used_up"


def _extract_page(extractor: Extractor, html: str, limit: _CpuTimeLimit) -> tuple[str, str]:
    """Extracts one page within its CPU time; the answer the extraction process sends."""
    try:
        with limit:
            answer = (_EXTRACTED, extractor.extract(html) or "")
    except _CpuTimeExceeded:
        answer = (_CPU_TIME_USED_UP, "")
    except Exception as exc:  # the parent decides what a failure means
        answer = (_FAILED, DeadLetter.describe(exc))
    # Whatever the extractor made of the interruption, a page past its CPU time is a timeout.
    return (_CPU_TIME_USED_UP, "") if limit.used_up else answer


def _serve(extractor: Extractor, connection, parent_pid: int, cpu_limit: float) -> None:
    # A Ctrl-C reaches every process of the terminal's group: the worker decides what it means and ends this one.
    # The process starts with SIGINT blocked (see _Sandbox._start): one that came since is dropped, not raised.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    extractor.setup()
    # The objects inherited from the worker and the extractor's setup live as long as this process.
    # Frozen, they are left out of garbage collections, which would otherwise charge some page, one
    # that depends on the pages before it, a tenth of a second or more of CPU time.
    gc.freeze()
    limit = _CpuTimeLimit(cpu_limit)
    connection.send(None)
    while True:
        # Sibling extraction processes inherit each other's pipe ends, so a
        # dead worker may never show as end-of-file: watch the parent itself.
        while not connection.poll(_PARENT_CHECK_SECONDS):
            if os.getppid() != parent_pid:
                return
        try:
            html = connection.recv()
        except EOFError:
            return
        connection.send(_extract_page(extractor, html, limit))


class _Sandbox:
    """A long-lived child process that extracts one document at a time.

    Args:
        extractor: The extractor the child runs.
        cpu_limit: CPU seconds one document may use.
        backstop: Wall-clock seconds after which a document that has not been
            answered is a timeout and the child is replaced; by default
            :func:`wall_clock_backstop` of ``cpu_limit``.
    """

    def __init__(self, extractor: Extractor, cpu_limit: float, backstop: float | None = None):
        self._extractor = extractor
        self._cpu_limit = cpu_limit
        self._backstop = wall_clock_backstop(cpu_limit) if backstop is None else backstop
        # A forked child inherits the imported extractor and starts at once.
        # Spawn and forkserver children would re-import the user's __main__
        # script, re-running an unguarded pipeline in every extraction process.
        self._context = multiprocessing.get_context("fork")
        self._process = None
        self._connection = None

    def _start(self) -> None:
        # A child forked while the worker's gRPC threads hold locks can die before it answers; a new fork
        # usually does not, so a page is not lost to that.
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._connection, child_end = self._context.Pipe()
            self._process = self._context.Process(
                target=_serve, args=(self._extractor, child_end, os.getpid(), self._cpu_limit), daemon=True
            )
            # Blocked while forking, so that a Ctrl-C between the fork and the child's ignoring it is not a
            # KeyboardInterrupt traceback in the child: the child ignores it, this process gets it once unblocked.
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                self._process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                child_end.close()
            # Loading models can take far longer than one document may.
            startup_limit = max(60.0, self._backstop)
            if not self._connection.poll(startup_limit):
                self.close()
                raise ExtractionProcessDied(f"the extraction process did not start within {startup_limit:g} s")
            try:
                self._connection.recv()
                return
            except EOFError:
                self._process.join(5)
                exit_code = self._process.exitcode
                self.close()
                _LOGGER.warning("extraction process died while starting (exit code %s), attempt %d", exit_code, attempt)
        raise ExtractionProcessDied(f"the extraction process died while starting, {_START_ATTEMPTS} times")

    def extract(self, html: str) -> str:
        """The text the child extracts from ``html``.

        Raises:
            ExtractionTimeout: The page used up its CPU time or overran the backstop.
            ExtractionProcessDied: The child ended without answering.
            _ChildFailure: The extractor raised.
        """
        self._send(html)
        try:
            return self._answer()
        except ExtractionProcessDied as died:
            # A child can die of its own accord (forked while the worker's threads held a lock), which would make
            # what is kept a matter of chance: the page is charged only when a new child dies on it too.
            _LOGGER.warning("extraction process died on a page (%s); giving the page to a new one", died)
        self._send(html)
        return self._answer()

    def _answer(self) -> str:
        """The child's answer for the page just sent; raises as :meth:`extract`."""
        self._wait_for_answer()
        try:
            outcome, result = self._connection.recv()
        except (EOFError, OSError):  # OSError: a connection reset by the dying child
            self.close()
            raise ExtractionProcessDied("the extraction process died mid-answer") from None
        if outcome == _CPU_TIME_USED_UP:
            # The interruption may have left the extractor's state half updated: the next page gets a new child.
            self.close()
            raise ExtractionTimeout(f"extraction used more than {self._cpu_limit:g} s of CPU time")
        if outcome == _FAILED:
            raise _ChildFailure(result)
        return result

    def _send(self, html: str) -> None:
        # A child that died between two documents never received this one: rather than charge the
        # document with a death it did not cause, it goes to a new child, once.
        for attempt in range(1, 3):
            if self._process is not None and not self._process.is_alive():
                self.close()
            if self._process is None:
                self._start()
            try:
                self._connection.send(html)
                return
            except OSError as exc:
                self.close()
                if attempt == 2:
                    raise ExtractionProcessDied(f"the extraction process died ({exc})") from None
                _LOGGER.warning("extraction process died between two documents (%s); starting a new one", exc)

    def _wait_for_answer(self) -> None:
        # Neither check counts time the child spent waiting for a CPU, so a busy machine ends no page sooner.
        started = time.monotonic()
        scheduled_at_start = _scheduler_seconds(self._process.pid)
        on_cpu = waited = 0.0
        while not self._connection.poll(min(1.0, max(0.0, self._backstop - (time.monotonic() - started - waited)))):
            if not self._process.is_alive():
                exit_code = self._process.exitcode
                self.close()
                raise ExtractionProcessDied(f"the extraction process died (exit code {exit_code})")
            scheduled = _scheduler_seconds(self._process.pid)
            if scheduled_at_start is not None and scheduled is not None:
                on_cpu, waited = scheduled[0] - scheduled_at_start[0], scheduled[1] - scheduled_at_start[1]
            if on_cpu >= self._cpu_limit + _C_CALL_GRACE_SECONDS:
                self.close()
                raise ExtractionTimeout(f"extraction used more than {self._cpu_limit:g} s of CPU time")
            if time.monotonic() - started - waited >= self._backstop:
                self.close()
                raise ExtractionTimeout(f"extraction did not finish within the {self._backstop:g} s backstop")

    def close(self) -> None:
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if process is None:
            return
        connection.close()
        if process.pid is not None:
            process.kill()
            process.join(5)


class _InProcess:
    """Extraction in the worker itself, for extractors that need no time limit."""

    def __init__(self, extractor: Extractor):
        self._extractor = extractor
        extractor.setup()

    def extract(self, html: str) -> str:
        return self._extractor.extract(html) or ""

    def close(self) -> None:
        pass


class _ExtractFn(beam.DoFn):
    def __init__(self, extractor: Extractor, timeout: float | None, step: str):
        self._extractor = extractor
        self._timeout = timeout
        self._step = step
        self._metrics = StepMetrics(step)

    def setup(self):
        if self._timeout is None:
            self._runner = _InProcess(self._extractor)
        else:
            self._runner = _Sandbox(self._extractor, self._timeout)

    def process(self, document: Document):
        self._metrics.received()
        try:
            text = self._runner.extract(document.text)
        except ExtractionTimeout as exc:
            yield self._dead_letter(document, "timeout", str(exc))
            return
        except ExtractionProcessDied as exc:
            yield self._dead_letter(document, "process_died", str(exc))
            return
        except _ChildFailure as exc:
            yield self._dead_letter(document, "failed", str(exc))
            return
        except Exception as exc:  # any extractor bug becomes a dead letter
            yield self._dead_letter(document, "failed", DeadLetter.describe(exc))
            return
        if not text:
            self._metrics.dropped("empty")
            return
        self._metrics.emitted()
        self._metrics.observe("doc_chars", len(text))
        yield dataclasses.replace(document, text=text)

    def _dead_letter(self, document: Document, reason: str, message: str):
        self._metrics.errored(reason)
        return pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter.of_document(self._step, reason, message, document))

    def teardown(self):
        runner = getattr(self, "_runner", None)
        if runner is not None:
            runner.close()


class Extract(beam.PTransform):
    """Replaces each document's HTML with the text an :class:`Extractor` finds.

    Documents whose extraction is empty are dropped (``dropped.empty``); a
    timeout, a crash of the extraction process on the page (twice: a page
    whose first process dies goes to a new one) or an extractor exception
    makes a dead letter (``errors.timeout``, ``errors.process_died``,
    ``errors.failed``). The result is the kept documents, or with
    :meth:`with_dead_letters` a ``(documents, dead_letters)`` pair.

    The limit is on CPU time, which machine load changes little, so the same
    input keeps the same documents on a busy machine as on an idle one (a page
    within a quarter of the limit may still tip over it: 12 busy processes on 2
    cores raised pages' CPU time by 19% in all and up to 26% for one page
    here). A document is a timeout when its extraction uses more than
    ``timeout`` CPU seconds (user and system time of the extraction process,
    C code such as lxml's parser included), or when it has not finished after
    :func:`wall_clock_backstop` (``max(30, 30 * timeout)``) seconds of neither
    working nor waiting for a CPU: a hang in a blocked call. Either way the
    extraction process is replaced and the next document is extracted as
    usual.

    Args:
        extractor: The extractor to run.
        timeout: CPU seconds one document's extraction may use; ``None``
            extracts in the worker process with no limit (only for extractors
            that cannot hang).
        step: Stats name of the step.
    """

    def __init__(self, extractor: Extractor, timeout: float | None = 1.0, step: str = "extract"):
        super().__init__()
        # A NaN timeout would make every page a timeout.
        if timeout is not None and not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be positive, finite seconds or None, not {timeout!r}.")
        self._extractor = extractor
        self._timeout = timeout
        self._step = step
        self._dead_letters = False

    def with_dead_letters(self) -> Extract:
        """Makes the transform return ``(documents, dead_letters)``."""
        self._dead_letters = True
        return self

    def step_fn(self) -> beam.DoFn:
        """The DoFn this transform applies, for running the step inside another DoFn."""
        return _ExtractFn(self._extractor, self._timeout, self._step)

    def expand(self, documents):
        outputs = documents | beam.ParDo(self.step_fn()).with_outputs(DEAD_LETTERS, main="documents")
        return (outputs.documents, outputs[DEAD_LETTERS]) if self._dead_letters else outputs.documents
