"""Periodic "records read" log lines from worker processes.

Beam's local runners report metrics only when a run ends; long local runs still
need a sign of life. Readers feed :func:`record_progress`, which logs, at most
once per interval and per worker process, how many records and bytes this
process has read and at which rate. It works on every runner because it only
writes to the worker's log.
"""

from __future__ import annotations

import logging
import os
import threading
import time

__all__ = ["record_progress"]

_LOGGER = logging.getLogger(__name__)


class _ProgressLog:
    def __init__(self):
        self._lock = threading.Lock()
        self._records = 0
        self._bytes = 0
        self._files = 0
        self._start = None
        self._next_report = 0.0

    def add(self, records: int, size: int, files: int, interval: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self._start is None:
                self._start = now
                self._next_report = now + interval
            self._records += records
            self._bytes += size
            self._files += files
            if now < self._next_report:
                return
            self._next_report = now + interval
            elapsed = max(now - self._start, 1e-9)
            records_total, bytes_total, files_total = self._records, self._bytes, self._files
        _LOGGER.info(
            "process %d: %s records read from %d files, %.1f MB (%.0f records/s, %.1f MB/s)",
            os.getpid(),
            f"{records_total:,}",
            files_total,
            bytes_total / 1e6,
            records_total / elapsed,
            bytes_total / 1e6 / elapsed,
        )


_PROGRESS = _ProgressLog()


def record_progress(records: int = 0, size: int = 0, files: int = 0, interval: float = 10.0) -> None:
    """Counts work done by this process and logs a progress line when due.

    Args:
        records: Records read since the last call.
        size: Bytes read since the last call.
        files: Files finished since the last call.
        interval: Seconds between log lines; 0 or less disables logging.
    """
    if interval > 0:
        _PROGRESS.add(records, size, files, interval)
