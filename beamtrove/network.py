"""Transient faults of networks and object stores: which they are, how long to wait, and reading through them.

Over tens of thousands of files, a store answering 503 or a connection cut
halfway through a body is certain; neither may cost a run a file, nor a
record twice. :func:`transient_fault` names a fault worth another attempt
(``http_503``, ``reset``, ``short_body``, ``timeout``, ...), whatever client
raised it (urllib, aiohttp under fsspec, gcsfs, s3fs), and :class:`RetryPolicy`
says how long to wait before it: the server's ``Retry-After`` when it gives
one, else an exponential backoff with jitter. :class:`ResumingStream` reads a
file as one seekable stream that reopens where a fault cut it, at the byte
reached (a ``Range`` request over HTTP); from a server that ignores ranges it
reads the file again and passes over what was already read, so the bytes
handed over are those of one clean read. Only a file that keeps failing
without progress is given up (:class:`ReadGaveUp`), at the byte reached.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import http.client
import io
import logging
import random
import socket
import time
from collections.abc import Callable
from typing import BinaryIO, NamedTuple, TypeVar

__all__ = [
    "Opened",
    "ReadGaveUp",
    "ResumingStream",
    "RetryPolicy",
    "transient_fault",
    "with_retries",
]

_LOGGER = logging.getLogger(__name__)
_T = TypeVar("_T")

# What servers answer when they are busy or briefly broken; anything else (404, 403, ...) is final.
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# The bytes at a file's start kept for seeks back to it.
_HEAD_BYTES = 1 << 16
# Bytes passed over in one read when a server that ignores ranges sends the file from its start again.
_SKIP_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How a read waits out transient faults.

    Attributes:
        attempts: Attempts in a row that make no progress before a file is
            given up; a read that gets some bytes starts the count again, so
            a long file survives any number of faults spread over it.
        first_wait: Seconds before the second attempt; each further one
            waits twice as long, up to ``max_wait``, less a random part of
            up to half (jitter, so that workers do not return together).
        max_wait: Longest wait between attempts, ``Retry-After`` included.
        read_timeout: Seconds a connection may stay silent before it counts
            as a fault (``timeout``) and is reopened.
    """

    attempts: int = 8
    first_wait: float = 1.0
    max_wait: float = 60.0
    read_timeout: float = 60.0

    def __post_init__(self):
        if self.attempts < 1 or self.first_wait < 0 or self.max_wait < 0 or self.read_timeout <= 0:
            raise ValueError(
                f"A retry policy needs attempts >= 1, waits >= 0 and a read timeout > 0 (got {self}); check "
                "--read_attempts and --read_timeout."
            )

    def wait(self, failures: int, fault: BaseException, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th fault in a row, ``fault``."""
        asked = _retry_after(fault)
        if asked is not None:
            return min(asked, self.max_wait)
        backoff = min(self.first_wait * 2 ** (failures - 1), self.max_wait)
        return backoff * rng.uniform(0.5, 1.0)


class ReadGaveUp(Exception):
    """A file kept failing without progress: it is given up at the byte reached.

    Attributes:
        url: The file.
        offset: The byte of the file as stored that reading had reached.
        fault: The last fault's name (``http_503``, ``reset``, ...).
    """

    def __init__(self, url: str, offset: int, attempts: int, fault: str, error: BaseException):
        message = (
            f"gave up reading {url} at byte {offset} after {attempts} attempts without progress; last fault "
            f"{fault}: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
        )
        super().__init__(message)
        self.url, self.offset, self.fault, self.message = url, offset, fault, message


def _chain(error: BaseException):
    """``error`` and the errors it was raised from or during (fsspec turns a failed HTTP request into a
    FileNotFoundError raised from it)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _status(error: BaseException) -> int | None:
    """The HTTP status an error carries (urllib's ``code``, aiohttp's ``status``, gcsfs's ``code``, botocore's
    response), if any."""
    for name in ("status", "code", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    return None


# Client errors told by their type's name, so that no client library is imported to classify them.
_FAULT_NAMES = {
    "ClientPayloadError": "short_body",
    "ContentLengthError": "short_body",
    "IncompleteReadError": "short_body",
    "ResponseStreamingError": "short_body",
    "ServerDisconnectedError": "reset",
    "ClientOSError": "reset",
    "ServerConnectionError": "reset",
    "ClientConnectorError": "refused",
    "ClientConnectionError": "reset",
    "EndpointConnectionError": "refused",
    "ConnectionClosedError": "reset",
    "ServerTimeoutError": "timeout",
    "ReadTimeoutError": "timeout",
    "ConnectTimeoutError": "timeout",
    # gcsfs raises requests' ProxyError, without the status, for a 502 answer.
    "ProxyError": "http_502",
}


def transient_fault(error: BaseException) -> str | None:
    """The name of the transient fault ``error`` is, worth another attempt; None when it is final.

    Names: ``http_<status>`` for 408, 429 and 5xx answers, ``short_body`` for a
    body that ended before its length, ``reset`` for a connection reset or
    closed, ``refused`` for one that could not be made, ``timeout`` for a
    silent one.
    """
    for link in _chain(error):
        status = _status(link)
        if status is not None:
            return f"http_{status}" if status in _TRANSIENT_STATUSES else None
        if isinstance(link, http.client.IncompleteRead):
            return "short_body"
        if isinstance(link, (TimeoutError, socket.timeout)):
            return "timeout"
        if isinstance(link, ConnectionRefusedError):
            return "refused"
        if isinstance(link, (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine)):
            return "reset"
        for kind in type(link).__mro__:
            if kind.__name__ in _FAULT_NAMES:
                return _FAULT_NAMES[kind.__name__]
        if type(link).__name__ == "URLError":  # urllib wraps what the socket raised, kept in ``reason``
            reason = getattr(link, "reason", None)
            if isinstance(reason, BaseException):
                return transient_fault(reason)
    return None


def _retry_after(error: BaseException) -> float | None:
    """The seconds a server asked to wait (``Retry-After``: seconds or an HTTP date), if it asked."""
    for link in _chain(error):
        headers = getattr(link, "headers", None)
        value = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") else None
        if value is None:
            continue
        value = str(value).strip()
        if value.isdigit():
            return float(value)
        try:
            return max(email.utils.parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
        except (TypeError, ValueError):
            return None
    return None


def with_retries(
    call: Callable[[], _T],
    what: str,
    policy: RetryPolicy | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> _T:
    """``call()``, attempted again after each transient fault, up to the policy's attempts.

    For requests that move no body (a listing, a file's size): their last
    fault is raised as it is. A connection refused is raised at once: these
    requests are a run's first, and a store that nothing answers for is far
    more often a wrong endpoint than a blip (a file's stream, reopened
    mid-read, waits it out).

    Args:
        call: The request.
        what: What it does, for the log (``list gs://bucket/crawl``).
        policy: How to wait; the default policy when None.
        on_retry: Called with the fault's name before each new attempt.
    """
    backoff = _Backoff(policy or RetryPolicy(), on_retry, wait_out_refusals=False)
    while True:
        try:
            return call()
        except Exception as error:
            if not backoff.wait_out(error, what):
                raise


class _Backoff:
    """The faults in a row of one file or request, and the wait before each next attempt.

    Attributes:
        failures: Faults since the last progress.
        fault: The last fault's name; None when it was final.
    """

    def __init__(self, policy: RetryPolicy, on_retry: Callable[[str], None] | None, *, wait_out_refusals: bool):
        self.policy = policy
        self._on_retry = on_retry
        self._wait_out_refusals = wait_out_refusals
        self._rng = random.Random()
        self.failures = 0
        self.fault: str | None = None

    def progressed(self) -> None:
        """Some bytes came: the next fault is the first in a row."""
        self.failures = 0

    def wait_out(self, error: BaseException, where: str) -> bool:
        """Counts the fault ``error``, says so and waits before the next attempt; False, without waiting, when
        ``error`` is final or the policy's attempts in a row are spent."""
        self.fault = transient_fault(error)
        if self.fault is None or (self.fault == "refused" and not self._wait_out_refusals):
            self.fault = None
            return False
        self.failures += 1
        if self.failures >= self.policy.attempts:
            return False
        wait = self.policy.wait(self.failures, error, self._rng)
        _LOGGER.info(
            "%s: %s (attempt %d of %d); again in %.1f s.", where, self.fault, self.failures, self.policy.attempts, wait
        )
        if self._on_retry is not None:
            self._on_retry(self.fault)
        time.sleep(wait)
        return True


class Opened(NamedTuple):
    """A file opened for reading from a byte on.

    Attributes:
        stream: Its bytes, from ``start`` on.
        start: Where ``stream`` starts: the byte asked for, or 0 from a server
            that ignores ranges.
        size: The file's size, when the store told it.
    """

    stream: BinaryIO
    start: int
    size: int | None


class ResumingStream(io.RawIOBase):
    """A file read as one seekable stream that reopens where a transient fault cut it.

    ``open_at(offset)`` opens the file at ``offset``
    (:func:`beamtrove.fs.open_at`). Reading reopens at the byte reached after
    a fault and a wait (:class:`RetryPolicy`); a stream that starts before
    that byte (a server ignoring ranges) has what was already read passed
    over. A seek moves a seekable stream, and reopens any other one at the
    next read; the file's first 64 KiB are kept, so reading its start again
    (as parsers do to tell its format) reopens nothing. A connection refused
    is waited out too, unless ``wait_out_refusals`` is False (for a file read
    when a run is built, where nothing answering is a wrong endpoint far more
    often than a blip, as :func:`with_retries` takes it).

    Raises (from reads):
        ReadGaveUp: The policy's attempts in a row failed without progress.
    """

    def __init__(
        self,
        url: str,
        open_at: Callable[[int], Opened],
        policy: RetryPolicy | None = None,
        on_retry: Callable[[str], None] | None = None,
        *,
        wait_out_refusals: bool = True,
    ):
        self.url = url
        self._open_at = open_at
        self._backoff = _Backoff(policy or RetryPolicy(), on_retry, wait_out_refusals=wait_out_refusals)
        self._stream: BinaryIO | None = None
        # Where the open stream stands, and where the reader is: they differ until a seek or a skip is caught up.
        self._stream_position = 0
        self._position = 0
        self._size: int | None = None
        # The file's first bytes, kept: parsers read a file's start and seek back to it, which would cost a stream
        # that cannot seek another request.
        self._head = bytearray()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence == io.SEEK_END:
            offset += self._known_size()
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._position = offset
        return offset

    def readinto(self, buffer) -> int:
        # Filled whole unless the file ends, as a buffered file fills it: readers such as pyarrow's take a short
        # read for the end of the file.
        with memoryview(buffer) as view, view.cast("B") as space:
            filled = 0
            while filled < len(space) and (read := self._read_some(space[filled:])):
                filled += read
            return filled

    def _read_some(self, buffer) -> int:
        """Reads what one read of the head or of the stream gives into ``buffer``; 0 at the end of the file."""
        if self._position < len(self._head):
            with memoryview(buffer) as view:
                served = self._head[self._position : self._position + len(view)]
                view[: len(served)] = served
            self._position += len(served)
            return len(served)
        while True:
            if self._size is not None and self._position >= self._size:
                return 0
            try:
                stream = self._stream_at_position()
                read = stream.readinto(buffer)
            except Exception as error:
                self._fault(error)
                continue
            if not read and self._size is not None and self._position < self._size:
                self._fault(http.client.IncompleteRead(b"", self._size - self._position))
                continue
            if self._position == len(self._head) < _HEAD_BYTES:
                with memoryview(buffer) as view:
                    self._head += view[: min(read, _HEAD_BYTES - self._position)]
            self._position += read
            self._stream_position += read
            if read:
                self._backoff.progressed()
            return read

    def close(self) -> None:
        self._drop_stream()
        super().close()

    def _known_size(self) -> int:
        """The file's size, learnt by opening it when no answer has told it yet."""
        while self._size is None:
            try:
                self._stream_at_position()
            except Exception as error:
                self._fault(error)
                continue
            if self._size is not None:
                break
            if not self._stream.seekable():
                raise OSError(f"{self.url}: the server does not tell the file's size, so no seek from its end")
            self._size = self._stream.seek(0, io.SEEK_END)
            self._stream.seek(self._stream_position)
        return self._size

    def _stream_at_position(self) -> BinaryIO:
        """An open stream standing at the reader's position: moved, reopened or read forward to it."""
        if self._stream is not None and self._stream_position != self._position:
            if self._stream.seekable():
                self._stream.seek(self._position)
                self._stream_position = self._position
            elif not 0 < self._position - self._stream_position <= _SKIP_CHUNK:
                self._drop_stream()
        if self._stream is None:
            opened = self._open_at(self._position)
            self._stream, self._stream_position = opened.stream, opened.start
            if opened.size is not None:
                self._size = opened.size
        while self._stream_position < self._position:
            skipped = self._stream.read(min(self._position - self._stream_position, _SKIP_CHUNK))
            if not skipped:
                raise http.client.IncompleteRead(b"", self._position - self._stream_position)
            self._stream_position += len(skipped)
        return self._stream

    def _fault(self, error: Exception) -> None:
        """Waits out a transient fault, ready to reopen; raises a final one, or gives the file up."""
        self._drop_stream()
        if self._backoff.wait_out(error, f"{self.url} at byte {self._position}"):
            return
        if self._backoff.fault is None:
            raise error
        raise ReadGaveUp(self.url, self._position, self._backoff.failures, self._backoff.fault, error) from error

    def _drop_stream(self) -> None:
        if self._stream is not None:
            # A broken connection may fail to close; it is dropped all the same.
            with contextlib.suppress(Exception):
                self._stream.close()
            self._stream = None
