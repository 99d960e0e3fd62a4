"""A local HTTP/1.1 server laid out like Common Crawl that injects network faults on a schedule.

A real process on a loopback port, for the tests and benchmarks of reading ``--dump`` over HTTP. Standard library
only, so that it runs as a script with any Python: ``python tests/cc_server.py ROOT [options]`` (or
``python -m tests.cc_server`` from the checkout). Tests start it through :class:`CCServer` and lay out its tree
with :func:`lay_out_common_crawl`.

The schedule (JSON, ``--schedule FILE`` or inline) is a list of rules tried in order on every GET of a file, the
first that fires giving the fault (HEAD is never faulted; a rule's path has no leading ``/``)::

    {"seed": 7, "retry_after": 1, "trickle_seconds": 5,
     "rules": [{"path": "crawl-data/*.warc.gz", "probability": 0.2, "faults": ["http_503", "reset"]},
               {"path": "crawl-data/CC-MAIN-TEST/segments/*/warc/*-00003.warc.gz", "requests": [2], "fault": "trickle"},
               {"path": "*-00007.warc.gz", "fault": "http_500"}]}

Whether a rule fires, and which of its faults, depends only on (seed, rule, path, the path's GET number), never
on timing. Every request is logged as one JSON line; see :class:`Handler`.

With ``--upstream http://HOST:PORT`` (and no root) it is instead a fault-injecting reverse proxy in front of that
server, an object store such as fake-gcs-server or moto's: every request (any method, path, query, headers and
body) is forwarded with http.client and its answer relayed, except that a GET a rule fires on gets its fault: an
HTTP error answered without asking the upstream, or the upstream's body cut short, reset or trickled. A rule's path
is matched against the request's path as sent, still URL-encoded, without its leading ``/`` or query. For an
object ``warcs/a.warc.gz`` in bucket ``b``:

* gcsfs (GCS JSON API) reads its bytes from ``download/storage/v1/b/b/o/warcs%2Fa.warc.gz`` (``?alt=media``, a
  ranged GET per read) and its metadata from ``storage/v1/b/b/o/warcs%2Fa.warc.gz``: the rule
  ``{"path": "download/storage/v1/b/b/o/warcs%2Fa.warc.gz"}`` faults the reads only
  (``download/*.warc.gz``: those of every WARC file).
* s3fs (S3, path-style) reads ``b/warcs/a.warc.gz`` (a ranged GET; its metadata is a HEAD, never faulted): the rule
  ``{"path": "b/warcs/a.warc.gz"}``.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import gzip
import http.client
import io
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

HTTP_FAULTS = {"http_429": 429, "http_500": 500, "http_502": 502, "http_503": 503, "http_504": 504}
# 429 and 503 carry Retry-After, as Common Crawl's CloudFront does; this one tests a client that must pick a delay.
NO_RETRY_AFTER = {"http_503_no_retry_after": 503}
CUT_FAULTS = {"reset", "short_body", "trickle"}
FAULTS = {*HTTP_FAULTS, *NO_RETRY_AFTER, *CUT_FAULTS}
TRICKLE_BYTES = 16
CHUNK = 1 << 16
# Headers of one hop, not relayed by the proxy (RFC 9110 7.6.1); the length it sets itself, and Expect it answered.
HOP_HEADERS = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "content-length", "expect",
}  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """One line of the schedule.

    Attributes:
        path: A glob (fnmatch: ``*`` also crosses ``/``) over the request's path without its leading ``/``.
        faults: The faults to choose among; one is picked per faulted request.
        requests: The 1-based GET numbers of a path the rule applies to; empty means every GET.
        probability: The chance that the rule fires on a GET it applies to.
    """

    path: str
    faults: tuple[str, ...]
    requests: frozenset[int] = frozenset()
    probability: float = 1.0

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        """A rule from its JSON object: ``path``, ``fault`` or ``faults``, optional ``requests``, ``probability``."""
        faults = tuple(raw["faults"]) if "faults" in raw else (raw["fault"],)
        unknown = set(faults) - FAULTS
        if unknown or not faults:
            raise ValueError(f"unknown faults {sorted(unknown)} in {raw}: choose among {sorted(FAULTS)}")
        return cls(raw["path"], faults, frozenset(raw.get("requests", ())), float(raw.get("probability", 1.0)))


@dataclass
class Schedule:
    """The faults to inject, and the per-path GET counts that make them deterministic."""

    rules: list[Rule] = field(default_factory=list)
    seed: int = 0
    retry_after: int = 1
    trickle_seconds: float = 5.0
    _gets: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Schedule:
        """A schedule from its JSON object (see the module's docstring)."""
        return cls(
            rules=[Rule.parse(rule) for rule in raw.get("rules", ())],
            seed=int(raw.get("seed", 0)),
            retry_after=int(raw.get("retry_after", 1)),
            trickle_seconds=float(raw.get("trickle_seconds", 5.0)),
        )

    def next_get(self, path: str) -> tuple[int, str | None]:
        """Counts a GET of ``path``; returns its number (from 1) and the fault it gets, if any."""
        with self._lock:
            number = self._gets[path] = self._gets.get(path, 0) + 1
        for index, rule in enumerate(self.rules):
            if not fnmatch.fnmatchcase(path, rule.path) or (rule.requests and number not in rule.requests):
                continue
            # A string seed goes through SHA-512: the same draw on every run, whatever PYTHONHASHSEED says.
            draw = random.Random(f"{self.seed}|{index}|{path}|{number}")
            if draw.random() < rule.probability:
                return number, draw.choice(rule.faults)
        return number, None


def byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """The ``(start, end_exclusive)`` a Range header asks for, None to send everything, "unsatisfiable" for 416.

    Only single ranges (``bytes=N-``, ``bytes=N-M``, ``bytes=-S``); anything else is ignored, as RFC 9110 allows.
    """
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (header or "").strip())
    if not match or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # the last S bytes
        return (max(size - int(last), 0), size) if int(last) else "unsatisfiable"
    start = int(first)
    end = min(int(last) + 1, size) if last else size
    if start >= size or end <= start:
        return "unsatisfiable"
    return start, end


class Handler(BaseHTTPRequestHandler):
    """Serves files under the server's root, faults as scheduled, logs each request.

    A log line: ``{"time", "method", "path", "range", "request", "status", "fault", "length", "bytes_sent",
    "error"}``: ``path`` as requested (query removed), ``range`` the Range header or null, ``request`` the path's
    GET number (null for HEAD), ``length`` the Content-Length sent (null when none), ``bytes_sent`` the body bytes
    written, ``error`` the exception when the client went away first (else null). A line is written before the
    client can see the response end (its last byte, the close, or the stall of a trickle), so it is in the log by
    the time the client has finished with the request. As a proxy (``--upstream``) it logs every request so, with
    ``path`` as sent (still URL-encoded) and ``request`` null for all but GETs.
    """

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in separate writes: no delayed-ACK wait between them
    server: CommonCrawlServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the JSON log says everything."""

    def do_HEAD(self) -> None:
        self.respond(head=True)

    def do_GET(self) -> None:
        self.respond(head=False)

    def do_POST(self) -> None:
        self.respond(head=False)

    def do_PUT(self) -> None:
        self.respond(head=False)

    def do_PATCH(self) -> None:
        self.respond(head=False)

    def do_DELETE(self) -> None:
        self.respond(head=False)

    def respond(self, head: bool) -> None:
        """Answers a request: the file, a 404, a 416 or a scheduled fault; as a proxy, the upstream's answer."""
        if self.server.upstream is None and self.command not in ("GET", "HEAD"):
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        path = urllib.parse.urlsplit(self.path).path
        entry: dict[str, Any] = {
            "time": time.time(),
            "method": self.command,
            "path": path,
            "range": self.headers.get("Range"),
            "request": None,
            "status": None,
            "fault": None,
            "length": None,
            "bytes_sent": 0,
            "error": None,
        }
        try:
            if self.server.upstream is None:
                self.serve(path, head, entry)
            else:
                self.relay(path, entry)
        except (ConnectionError, TimeoutError) as error:  # the client went away
            self.close_connection = True
            if not entry.pop("logged", False):
                entry["error"] = type(error).__name__
                self.server.log(entry)

    def serve(self, path: str, head: bool, entry: dict[str, Any]) -> None:
        file = self.server.file_at(path)
        if file is None:
            self.send_small(404, b"Not Found\n", entry)
            return
        fault = None
        if not head:
            entry["request"], fault = self.server.schedule.next_get(path.lstrip("/"))
            entry["fault"] = fault
        if fault in HTTP_FAULTS or fault in NO_RETRY_AFTER:
            status = HTTP_FAULTS.get(fault) or NO_RETRY_AFTER[fault]
            extra = {"Retry-After": str(self.server.schedule.retry_after)} if fault in ("http_429", "http_503") else {}
            self.send_small(status, f"injected {fault}\n".encode(), entry, extra)
            return
        size = file.stat().st_size
        wanted = byte_range(entry["range"], size) if self.server.ranges else None
        if wanted == "unsatisfiable":
            entry["fault"] = None  # not injected: the 416 is the answer
            self.send_small(416, b"Range Not Satisfiable\n", entry, {"Content-Range": f"bytes */{size}"})
            return
        start, end = wanted or (0, size)
        self.send_response(206 if wanted else 200)
        entry["status"] = 206 if wanted else 200
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        entry["length"] = end - start
        if self.server.ranges:
            self.send_header("Accept-Ranges", "bytes")
        if wanted:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        if head:  # logged before the answer leaves, as every answer is
            self.server.log(entry)
            self.end_headers()
            return
        self.end_headers()
        with file.open("rb") as body:
            body.seek(start)
            self.send_body(body, end - start, fault, entry)

    def relay(self, path: str, entry: dict[str, Any]) -> None:
        """Forwards the request to the upstream and relays its answer, or the scheduled fault of a GET."""
        fault = None
        if self.command == "GET":
            entry["request"], fault = self.server.schedule.next_get(path.lstrip("/"))
            entry["fault"] = fault
        body = self.read_request_body()
        if fault in HTTP_FAULTS or fault in NO_RETRY_AFTER:  # answered here: the upstream never sees the request
            status = HTTP_FAULTS.get(fault) or NO_RETRY_AFTER[fault]
            extra = {"Retry-After": str(self.server.schedule.retry_after)} if fault in ("http_429", "http_503") else {}
            self.send_small(status, f"injected {fault}\n".encode(), entry, extra)
            return
        upstream = http.client.HTTPConnection(self.server.upstream.hostname, self.server.upstream.port, timeout=60)
        try:
            headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_HEADERS}
            # As the client sent it: the Host a request was signed for (S3) is the proxy's.
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                upstream.putheader(name, value)
            if body or self.command in ("POST", "PUT", "PATCH"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            try:
                answer = upstream.getresponse()
            except (OSError, http.client.HTTPException) as error:
                entry["error"] = f"upstream: {type(error).__name__}: {error}"
                self.send_small(502, b"upstream failed\n", entry)
                return
            self.relay_answer(answer, fault, entry)
        finally:
            upstream.close()

    def relay_answer(self, answer: http.client.HTTPResponse, fault: str | None, entry: dict[str, Any]) -> None:
        """Sends the upstream's answer on: its status and headers, its body streamed (or cut as ``fault`` says)."""
        self.send_response_only(answer.status, answer.reason)
        entry["status"] = answer.status
        for name, value in answer.getheaders():
            if name.lower() not in HOP_HEADERS:
                self.send_header(name, value)
        length = answer.getheader("Content-Length")
        if self.command == "HEAD" or answer.status in (204, 304) or answer.status < 200:
            if length is not None:  # HEAD: the length of the body a GET would get
                self.send_header("Content-Length", length)
            entry["length"] = int(length) if length is not None else None
            self.server.log(entry)
            self.end_headers()
            return
        if length is None:  # chunked, or ended by the close: sent on de-chunked, with its length
            data = answer.read()
            body: BinaryIO = io.BytesIO(data)
            count = len(data)
        else:
            body, count = answer, int(length)
        self.send_header("Content-Length", str(count))
        entry["length"] = count
        if not count:  # the headers end the answer: logged before they leave
            self.server.log(entry)
            self.end_headers()
            return
        self.end_headers()
        self.send_body(body, count, fault, entry)

    def read_request_body(self) -> bytes:
        """The request's body, whole: by its Content-Length, or de-chunked."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after a chunk
            while self.rfile.readline().strip():  # trailers, up to the empty line
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_body(self, body: BinaryIO, count: int, fault: str | None, entry: dict[str, Any]) -> None:
        """Sends ``count`` bytes of ``body``, or the part of them a fault lets through, then ends as it says."""
        sent = {None: count, "short_body": count // 2, "reset": count // 2}.get(fault, min(TRICKLE_BYTES, count))
        while sent - entry["bytes_sent"] > CHUNK:
            self.wfile.write(body.read(CHUNK))
            entry["bytes_sent"] += CHUNK
        last = body.read(sent - entry["bytes_sent"])
        entry["bytes_sent"] = sent
        self.server.log(entry)
        entry["logged"] = True
        self.wfile.write(last)
        self.wfile.flush()
        if fault == "trickle":
            time.sleep(self.server.schedule.trickle_seconds)
        if fault == "reset":
            self.reset_connection()
        elif fault:
            self.close_connection = True  # a clean close: FIN after a body shorter than its Content-Length

    def reset_connection(self) -> None:
        """Closes the socket with an RST: linger 0, and none of the orderly shutdown socketserver would do."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        os.close(self.connection.detach())
        self.close_connection = True

    def send_small(self, status: int, body: bytes, entry: dict[str, Any], headers: dict[str, str] | None = None):
        """A short answer with its body (none to HEAD); the connection stays open, as after any complete answer."""
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        # Logged before the headers leave: a client that gives up on this answer finds it in the log.
        entry.update(status=status, length=len(body), bytes_sent=0 if self.command == "HEAD" else len(body))
        self.server.log(entry)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class CommonCrawlServer(ThreadingHTTPServer):
    """The server: its root (or the upstream it proxies), its schedule, whether it honours Range, and its log."""

    daemon_threads = True  # a trickling thread must not hold the process at exit

    def __init__(
        self,
        address: tuple[str, int],
        root: pathlib.Path | None,
        schedule: Schedule,
        log_path: pathlib.Path | None,
        ranges: bool,
        upstream: str | None = None,
    ):
        super().__init__(address, Handler)
        self.root = root.resolve() if root is not None else None
        # The server proxied to, ``http://HOST:PORT``; None serves the root.
        self.upstream = urllib.parse.urlsplit(upstream) if upstream else None
        self.schedule = schedule
        self.ranges = ranges
        self.log_file = log_path.open("a", encoding="utf-8") if log_path else None
        self.log_lock = threading.Lock()

    def file_at(self, path: str) -> pathlib.Path | None:
        """The regular file a URL path names under the root, or None (also for folders: no listings)."""
        file = (self.root / urllib.parse.unquote(path).lstrip("/")).resolve()
        return file if file.is_relative_to(self.root) and file.is_file() else None

    def log(self, entry: dict[str, Any]) -> None:
        """Appends one request's line, flushed at once so that a reader of the file sees it."""
        if self.log_file:
            with self.log_lock:
                self.log_file.write(json.dumps(entry) + "\n")
                self.log_file.flush()


def load_schedule(value: str | None) -> Schedule:
    """A schedule from inline JSON or from the JSON file that ``value`` names; none: no faults."""
    if not value:
        return Schedule()
    text = value if value.lstrip().startswith("{") else pathlib.Path(value).read_text()
    return Schedule.parse(json.loads(text))


def main(argv: list[str] | None = None) -> int:
    """Serves until SIGTERM or SIGINT. Prints ``http://HOST:PORT`` on its first stdout line once it answers."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=pathlib.Path, nargs="?", help="the folder served, holding crawl-data/")
    parser.add_argument("--upstream", help="proxy to this server, http://HOST:PORT, instead of serving a root")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (default): a free port, printed on start")
    parser.add_argument("--schedule", help="the fault schedule: a JSON file, or JSON inline")
    parser.add_argument("--log", type=pathlib.Path, help="appends one JSON line per request here")
    parser.add_argument("--no-ranges", action="store_true", help="ignore Range: always 200, no Accept-Ranges")
    args = parser.parse_args(argv)
    if (args.root is None) == (args.upstream is None):
        parser.error("give either a root to serve or --upstream to proxy, not both")
    server = CommonCrawlServer(
        (args.host, args.port),
        args.root,
        load_schedule(args.schedule),
        args.log,
        ranges=not args.no_ranges,
        upstream=args.upstream,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    stop.wait()
    # No server.shutdown(): it waits out serve_forever's poll; the daemon thread ends with the process.
    server.server_close()
    return 0


class CCServer:
    """A server process started by a test: ``with CCServer.start(root, schedule={...}) as server: server.url``.

    Attributes:
        process: The server's process.
        url: ``http://127.0.0.1:PORT``, without a trailing slash: the ``--cc_base``.
        log_path: Its JSON-lines request log.
    """

    def __init__(self, process: subprocess.Popen, url: str, log_path: pathlib.Path):
        self.process = process
        self.url = url
        self.log_path = log_path

    @classmethod
    def start(
        cls,
        root: pathlib.Path | None = None,
        log_path: pathlib.Path | None = None,
        schedule: dict[str, Any] | None = None,
        ranges: bool = True,
        timeout: float = 10.0,
        upstream: str | None = None,
    ) -> CCServer:
        """Starts the server on a free loopback port and returns once it answers.

        Args:
            root: The folder served; None with ``upstream``.
            log_path: Where the request log goes; default ``<root>/../cc-server-<pid>.jsonl`` beside the root (in
                the temporary folder for a proxy).
            schedule: The fault schedule's JSON object (see the module's docstring); None: no faults.
            ranges: False starts it with ``--no-ranges``.
            timeout: Seconds to wait for it to answer.
            upstream: ``http://HOST:PORT``: a proxy to that server (see the module's docstring), not a file server.

        Raises:
            RuntimeError: It exited or stayed silent for ``timeout`` seconds.
        """
        beside = pathlib.Path(root).parent if root is not None else pathlib.Path(tempfile.gettempdir())
        log_path = pathlib.Path(log_path or beside / f"cc-server-{os.getpid()}-{time.monotonic_ns()}.jsonl")
        command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--log", str(log_path)]
        command += [str(root)] if root is not None else []
        command += ["--upstream", upstream] if upstream else []
        if schedule is not None:
            command += ["--schedule", json.dumps(schedule)]
        if not ranges:
            command.append("--no-ranges")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        # The first line comes once it is serving; a thread reads it so that a silent server cannot hang the test.
        first_line: list[str] = []
        reader = threading.Thread(target=lambda: first_line.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not first_line or not first_line[0].startswith("http://"):
            process.kill()
            process.wait()
            raise RuntimeError(f"the Common Crawl test server did not start (exit status {process.returncode})")
        return cls(process, first_line[0].strip(), log_path)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def records(self) -> list[dict[str, Any]]:
        """The request log so far, one dict per request in the order they were logged."""
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def stop(self) -> None:
        """Ends the process (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()

    def __enter__(self) -> CCServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# Segments and files are named as in CC-MAIN-2024-22: the segment a crawl time in ms with a 2-digit suffix, a file
# its fetch window (start and end, 3 hours apart) and its 5-digit number within the dump.
FIRST_SEGMENT = datetime.datetime(2024, 5, 17, 23, 31, 22, 216000, tzinfo=datetime.UTC)
SEGMENT_STEP = datetime.timedelta(hours=3, minutes=7, seconds=41)


def lay_out_common_crawl(
    warcs: pathlib.Path | Iterable[pathlib.Path], root: pathlib.Path, dump: str = "CC-MAIN-TEST", segments: int = 3
) -> list[str]:
    """Copies WARC files into a Common Crawl tree under ``root`` and writes the dump's ``warc.paths.gz``.

    The files go, in order, into ``segments`` segment folders (consecutive runs of files, as near equal as can be):
    ``crawl-data/<dump>/segments/1715988682216.39/warc/CC-MAIN-20240517233122-20240518023122-00000.warc.gz``.

    Args:
        warcs: The WARC files, or a folder whose ``*.warc.gz`` files are taken in name order.
        root: The folder the server will serve (created if absent).
        dump: The dump's name, the ``--dump`` of the run.
        segments: How many segment folders (at most one per file).

    Returns:
        The paths relative to ``root``, in Common Crawl's order, exactly as ``warc.paths.gz`` lists them:
        the i-th is the copy of the i-th WARC file.
    """
    files = sorted(pathlib.Path(warcs).glob("*.warc.gz")) if isinstance(warcs, str | os.PathLike) else list(warcs)
    if not files:
        raise ValueError(f"no WARC files in {warcs}")
    segments = max(1, min(segments, len(files)))
    paths = []
    for number, source in enumerate(files):
        segment = number * segments // len(files)
        start = FIRST_SEGMENT + segment * SEGMENT_STEP
        window = f"{start:%Y%m%d%H%M%S}-{start + datetime.timedelta(hours=3):%Y%m%d%H%M%S}"
        folder = f"crawl-data/{dump}/segments/{round(start.timestamp() * 1000)}.{39 + segment}/warc"
        path = f"{folder}/CC-MAIN-{window}-{number:05d}.warc.gz"
        (root / folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / path)
        paths.append(path)
    with gzip.open(root / "crawl-data" / dump / "warc.paths.gz", "wt", encoding="utf-8") as listing:
        listing.write("".join(f"{path}\n" for path in paths))
    return paths


if __name__ == "__main__":
    sys.exit(main())
