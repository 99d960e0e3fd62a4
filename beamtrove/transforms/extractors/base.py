"""The extractor contract and the ``Extract`` transform.

An :class:`Extractor` turns a document's raw HTML into plain text. ``Extract``
runs one on every document with a per-document time limit: the extraction
happens in a child process that is killed and replaced when it overruns, so a
pathological page costs at most the limit and never stalls a worker. This works
on every runner because it relies on neither signals nor the worker's threads.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import multiprocessing
import os
import time
from typing import ClassVar

import apache_beam as beam
from apache_beam import pvalue

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.layout import DEAD_LETTERS
from beamtrove.metrics import StepMetrics

__all__ = ["Extract", "ExtractionTimeout", "Extractor"]

_PARENT_CHECK_SECONDS = 5.0
_START_ATTEMPTS = 3
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
    """An extraction overran its time limit and its process was killed."""


class ExtractionProcessDied(Exception):
    """The extraction process ended without answering (killed, out of memory...)."""


def _serve(extractor: Extractor, connection, parent_pid: int) -> None:
    extractor.setup()
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
        try:
            connection.send((True, extractor.extract(html) or ""))
        except Exception as exc:  # the parent decides what a failure means
            connection.send((False, DeadLetter.describe(exc)))


class _ChildFailure(Exception):
    """The extractor raised in the extraction process; the message describes the original exception."""


class _Sandbox:
    """A long-lived child process that extracts one document at a time."""

    def __init__(self, extractor: Extractor, timeout: float):
        self._extractor = extractor
        self._timeout = timeout
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
                target=_serve, args=(self._extractor, child_end, os.getpid()), daemon=True
            )
            try:
                self._process.start()
            finally:
                child_end.close()
            # Loading models can take far longer than one document may.
            startup_limit = max(60.0, self._timeout)
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
        if self._process is not None and not self._process.is_alive():
            self.close()
        if self._process is None:
            self._start()
        try:
            self._connection.send(html)
        except OSError as exc:  # the process died between two documents
            self.close()
            raise ExtractionProcessDied(f"the extraction process died ({exc})") from None
        deadline = time.monotonic() + self._timeout
        while not self._connection.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self.close()
                raise ExtractionTimeout(f"extraction took longer than {self._timeout:g} s")
            if not self._process.is_alive():
                exit_code = self._process.exitcode
                self.close()
                raise ExtractionProcessDied(f"the extraction process died (exit code {exit_code})")
        try:
            succeeded, result = self._connection.recv()
        except EOFError:
            self.close()
            raise ExtractionProcessDied("the extraction process died mid-answer") from None
        if not succeeded:
            raise _ChildFailure(result)
        return result

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
    timeout, a crash of the extraction process or an extractor exception makes
    a dead letter (``errors.timeout``, ``errors.process_died``,
    ``errors.failed``). The result is the kept documents, or with
    :meth:`with_dead_letters` a ``(documents, dead_letters)`` pair.

    Args:
        extractor: The extractor to run.
        timeout: Seconds one document may take; ``None`` extracts in the worker
            process with no limit (only for extractors that cannot hang).
        step: Stats name of the step.
    """

    def __init__(self, extractor: Extractor, timeout: float | None = 1.0, step: str = "extract"):
        super().__init__()
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds or None, not {timeout!r}.")
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
