"""Live progress of a run: workers count what they do, the command that launched the run shows it.

Beam's local runners report metrics only when a run ends, so workers report
progress themselves. Every process that runs beamtrove steps keeps running
totals: the counters of each step (:class:`~beamtrove.metrics.StepMetrics`
adds to them) and the input files and bytes its readers finished (readers
call :func:`record_progress`).

* When the run was launched by :class:`ProgressBoard` on this machine (the
  DirectRunner, in one process or several, Prism, a local Flink worker), the
  board's address is in the environment every worker inherits, and each
  process sends its totals there at most twice a second, as one UDP datagram
  of cumulative values (a lost one is superseded by the next). The board adds
  up the latest totals of every process and shows inputs done of the total,
  documents read and kept, the rate and an ETA: one updating line on a
  terminal, a plain line every ``--progress_interval`` seconds otherwise.
* Elsewhere (Dataflow workers, a remote Flink task manager), each process
  logs its own totals every ``--progress_interval`` seconds instead.

Progress is only shown: nothing a run writes depends on it.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import os
import socket
import sys
import threading
import time
import uuid
from typing import TextIO

import orjson

__all__ = ["ProgressBoard", "ProgressTotals", "count_progress", "format_duration", "record_progress", "utc_timestamp"]

_LOGGER = logging.getLogger(__name__)

#: Where workers find the board: ``host:port:run``; set by :class:`ProgressBoard` for the run's duration.
PROGRESS_ADDRESS_VARIABLE = "BEAMTROVE_PROGRESS"
_SEND_EVERY = 0.5
_MAX_DATAGRAM = 60_000
# The run of a forked process: the one it first reports to.
_FIRST_REPORTED = object()


class _ProcessTotals:
    """This process's running totals, sent to the run's board or logged."""

    def __init__(self):
        self._lock = threading.Lock()
        # A worker process started for a run inherits the board's address: it counts for that run from the start.
        self._reset(os.environ.get(PROGRESS_ADDRESS_VARIABLE))
        self._socket: socket.socket | None = None
        self._process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # Seconds between this process's own log lines when no board shows the run: the readers' setting.
        self._log_interval = 10.0

    def _reset(self, run: str | object | None) -> None:
        self._run = run
        self.counters: dict[str, dict[str, int]] = {}
        self._reading: set[str] = set()
        self._files = 0
        self._bytes = 0
        self._started = time.monotonic()
        self._next_report = self._started + _SEND_EVERY

    def forked(self) -> None:
        """Makes the totals a new process's, in a child just forked.

        The child counts for the run it first reports to: a worker forked from
        :mod:`~beamtrove.execution.worker_zygote` is given its run's
        environment only after the fork.
        """
        self._lock = threading.Lock()
        self._socket = None
        self._process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._reset(_FIRST_REPORTED)

    def reset(self) -> None:
        """Forgets the totals: a new run starts in this process."""
        with self._lock:
            self._reset(os.environ.get(PROGRESS_ADDRESS_VARIABLE))

    def count(self, step: str, name: str, value: int) -> None:
        # Called for every counter increment of every step: only a dict update unless a report is due.
        counters = self.counters.get(step)
        if counters is None:
            counters = self.counters.setdefault(step, {})
        counters[name] = counters.get(name, 0) + value
        if time.monotonic() >= self._next_report:
            self._report()

    def finished_bytes(self, step: str, size: int, files: int, interval: float) -> None:
        with self._lock:
            self._log_interval = interval
            self._reading.add(step)
            self._files += files
            self._bytes += size
        # A finished file is sent at once: the board's count of inputs done is then never behind.
        if files or time.monotonic() >= self._next_report:
            self._report(board_now=bool(files))

    def _report(self, board_now: bool = False) -> None:
        address = os.environ.get(PROGRESS_ADDRESS_VARIABLE)
        with self._lock:
            if self._run is _FIRST_REPORTED:
                self._run = address
            now = time.monotonic()
            if now < self._next_report and not (board_now and address is not None and address == self._run):
                return
            if address != self._run:
                # Totals counted before this process learned of the run belong to no run it reports to.
                self._reset(address)
                return
            if address is None:
                # No board shows this run: the process logs its own totals, an interval apart.
                self._next_report = now + self._log_interval if self._log_interval > 0 else math.inf
                # Only a process that reads input says how far it got, from one interval after it started.
                if self._log_interval <= 0 or not self._reading or now - self._started < self._log_interval:
                    return
                message = self._log_line(now)
            else:
                self._next_report = now + _SEND_EVERY
                message = None
                datagram = orjson.dumps(
                    {"process": self._process, "files": self._files, "bytes": self._bytes, "steps": self.counters}
                )
        if message is not None:
            _LOGGER.info(message)
        else:
            self._send(address, datagram)

    def _log_line(self, now: float) -> str:
        read = sum(self.counters.get(step, {}).get("out", 0) for step in self._reading)
        elapsed = max(now - self._started, 1e-9)
        return (
            f"process {os.getpid()}: {read:,} documents read from {self._files} files, {self._bytes / 1e6:.1f} MB "
            f"({read / elapsed:.0f} documents/s, {self._bytes / 1e6 / elapsed:.1f} MB/s)"
        )

    def _send(self, address: str, datagram: bytes) -> None:
        host, port, _ = address.split(":", 2)
        if len(datagram) > _MAX_DATAGRAM:
            return
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._socket.sendto(address.encode() + b"\n" + datagram, (host, int(port)))
        except OSError:
            # The board is gone (the run is ending) or unreachable: progress is only shown.
            pass


_TOTALS = _ProcessTotals()
os.register_at_fork(after_in_child=_TOTALS.forked)


def count_progress(step: str, name: str, value: int) -> None:
    """Adds a counter increment of ``step`` to this process's progress totals."""
    _TOTALS.count(step, name, value)


def record_progress(step: str, size: int = 0, files: int = 0, interval: float = 10.0) -> None:
    """Adds input bytes (and whole files) a reader finished to this process's progress totals.

    Args:
        step: The reader's stats name.
        size: Bytes of input read since the last call.
        files: Input files finished since the last call.
        interval: Seconds between this process's own progress log lines when
            no board shows the run's progress; 0 or less turns them off.
    """
    _TOTALS.finished_bytes(step, size, files, interval)


def utc_timestamp() -> str:
    """Now, as every beamtrove record writes the time: ISO 8601 in UTC to the second (``2026-12-05T15:48:16+00:00``)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def format_duration(seconds: float) -> str:
    """``42 s``, ``3m 05s``, ``2h 07m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


@dataclasses.dataclass(frozen=True)
class ProgressTotals:
    """What a run has done so far, added up over its worker processes.

    Attributes:
        files: Input files finished.
        bytes: Input bytes read.
        read: Documents the reader produced.
        kept: Documents that passed the last per-document step so far.
        errors: Records that became dead letters.
    """

    files: int
    bytes: int
    read: int
    kept: int
    errors: int


class ProgressBoard:
    """Shows a run's progress while it runs, from the totals its worker processes send.

    Use it as a context manager around the run: it listens on a local UDP
    port, puts its address in the environment the run's workers inherit,
    and shows a line as the run goes. The line is rewritten in place on a
    terminal; elsewhere a new line is printed every ``interval`` seconds.

    Args:
        name: What the line starts with (the pipeline's name).
        total_files: Input files the run reads.
        total_bytes: Their size.
        read_step: The reader's stats name: its ``out`` is documents read.
        kept_step: The step whose ``out`` is documents kept so far; None when
            no step follows reading, or when what is kept is known only at
            the end (a step compares documents across the whole input).
        interval: Seconds between lines off a terminal; 0 or less shows nothing.
        stream: Where lines go; stderr by default.
    """

    def __init__(
        self,
        name: str,
        total_files: int,
        total_bytes: int,
        read_step: str,
        kept_step: str | None,
        interval: float = 10.0,
        stream: TextIO | None = None,
    ):
        self._name = name
        self._total_files = total_files
        self._total_bytes = total_bytes
        self._read_step = read_step
        self._kept_step = kept_step
        self._interval = interval
        self._stream = stream or sys.stderr
        self._live = self._stream.isatty()
        self._latest: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = 0.0
        self._first_bytes: tuple[float, int] | None = None
        self._shown = ""

    def __enter__(self) -> ProgressBoard:
        self._started = time.monotonic()
        if self._interval <= 0:
            return self
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        host, port = self._socket.getsockname()
        self._address = f"{host}:{port}:{uuid.uuid4().hex}"
        self._previous_address = os.environ.get(PROGRESS_ADDRESS_VARIABLE)
        os.environ[PROGRESS_ADDRESS_VARIABLE] = self._address
        _TOTALS.reset()
        if self._live:
            self._clear_line = _ClearLine(self._stream)
            for handler in logging.getLogger().handlers:
                if getattr(handler, "stream", None) is self._stream:
                    handler.addFilter(self._clear_line)
        self._threads = [
            threading.Thread(target=self._receive, name="beamtrove-progress-receive", daemon=True),
            threading.Thread(target=self._show_periodically, name="beamtrove-progress-show", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        if not self._threads:
            return
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._previous_address is None:
            os.environ.pop(PROGRESS_ADDRESS_VARIABLE, None)
        else:
            os.environ[PROGRESS_ADDRESS_VARIABLE] = self._previous_address
        if exc_type is None:
            # The reports sent as the run ended, then the line as the run left it.
            self._socket.setblocking(False)
            self._receive_waiting()
            self._show()
        self._socket.close()
        if self._live:
            for handler in logging.getLogger().handlers:
                handler.removeFilter(self._clear_line)
        if self._live and self._shown:
            # The line was rewritten in place: end it so what follows starts on a line of its own.
            self._stream.write("\n")
            self._stream.flush()

    def totals(self) -> ProgressTotals:
        """The run's totals so far, over every process that reported."""
        with self._lock:
            reports = list(self._latest.values())
        files = sum(report["files"] for report in reports)
        size = sum(report["bytes"] for report in reports)
        steps = [report["steps"] for report in reports]

        def total(step: str | None, name: str) -> int:
            return sum(counters.get(step, {}).get(name, 0) for counters in steps) if step else 0

        errors = sum(
            value
            for counters in steps
            for step in counters.values()
            for name, value in step.items()
            if name.startswith("errors.")
        )
        return ProgressTotals(files, size, total(self._read_step, "out"), total(self._kept_step, "out"), errors)

    def line(self, now: float | None = None) -> str:
        """The progress line as it stands."""
        now = time.monotonic() if now is None else now
        totals = self.totals()
        elapsed = now - self._started
        if self._total_bytes:
            done = min(totals.bytes / self._total_bytes, 1.0)
            size = f"{_megabytes(totals.bytes)}/{_megabytes(self._total_bytes)} MB ({done:.0%})"
        else:  # inputs listed with no size (a Common Crawl paths file): how many are done tells the progress
            done = min(totals.files / self._total_files, 1.0) if self._total_files else 0.0
            size = f"{_megabytes(totals.bytes)} MB ({done:.0%})"
        parts = [f"{self._name}: {totals.files:,}/{self._total_files:,} inputs", size]
        parts.append(f"{totals.read:,} documents read")
        if self._kept_step is not None:
            kept_share = f" ({totals.kept / totals.read:.1%})" if totals.read else ""
            parts.append(f"{totals.kept:,} kept{kept_share}")
        if totals.errors:
            parts.append(f"{totals.errors:,} errors")
        if elapsed >= 1:
            parts.append(f"{totals.read / elapsed:,.0f} documents/s")
        parts.append(f"{format_duration(elapsed)} elapsed")
        eta = self._eta(now, totals.bytes) if self._total_bytes else self._eta_by_files(elapsed, totals.files)
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        return " · ".join(parts)

    def _eta_by_files(self, elapsed: float, files: int) -> float | None:
        """Seconds left at the rate inputs were done so far, for inputs of unknown size."""
        if not files or files >= self._total_files or elapsed < 2:
            return None
        return (self._total_files - files) * elapsed / files

    def _eta(self, now: float, size: int) -> float | None:
        """Seconds left at the rate input bytes were read since the first report of any.

        Counting from the first report leaves out the run's start (workers
        starting, models loading), which is behind it by then.
        """
        if not self._total_bytes or size >= self._total_bytes or self._first_bytes is None:
            return None
        since, at_first = self._first_bytes
        if now - since < 2 or size <= at_first:
            return None
        return (self._total_bytes - size) * (now - since) / (size - at_first)

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                self._take(self._socket.recv(65536))
            except (TimeoutError, OSError):
                continue

    def _receive_waiting(self) -> None:
        while True:
            try:
                self._take(self._socket.recv(65536))
            except OSError:  # nothing left (BlockingIOError), or the socket is gone
                return

    def _take(self, datagram: bytes) -> None:
        """Keeps a process's report if it is one of this run's."""
        prefix = self._address.encode() + b"\n"
        if not datagram.startswith(prefix):
            return
        try:
            report = orjson.loads(datagram[len(prefix) :])
            process, size = report["process"], int(report["bytes"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return
        with self._lock:
            self._latest[process] = report
            if self._first_bytes is None and size:
                self._first_bytes = (time.monotonic(), sum(latest["bytes"] for latest in self._latest.values()))

    def _show_periodically(self) -> None:
        # A line right away, so a run shows it started; then every second live, every interval otherwise.
        wait = 0.0
        while not self._stop.wait(wait):
            self._show()
            wait = 1.0 if self._live else self._interval

    def _show(self) -> None:
        line = self.line()
        if self._live:
            self._stream.write("\r\x1b[K" + line)
        elif line != self._shown:
            self._stream.write(line + "\n")
        self._stream.flush()
        self._shown = line


class _ClearLine(logging.Filter):
    """Clears the progress line before a log line is written to the same terminal; the next tick redraws it."""

    def __init__(self, stream: TextIO):
        super().__init__()
        self._stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        self._stream.write("\r\x1b[K")
        return True


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f}"
