"""Reading through transient faults of a real HTTP server (tests/cc_server.py, its own process)."""

from __future__ import annotations

import random
import socket
import urllib.error
import urllib.request

import pytest

from beamtrove.fs import open_at, open_resuming
from beamtrove.network import ReadGaveUp, RetryPolicy, transient_fault, with_retries
from tests.cc_server import CCServer

# Waits kept short: the faults cost what a real retry costs, not seconds of sleep.
_QUICK = RetryPolicy(attempts=4, first_wait=0.01, max_wait=0.05, read_timeout=1.0)


def _read_through(url: str, policy: RetryPolicy = _QUICK) -> tuple[bytes, list[str]]:
    faults: list[str] = []
    with open_resuming(url, policy=policy, on_retry=faults.append) as stream:
        return stream.read(), faults


def test_every_transient_fault_is_waited_out_and_the_bytes_are_those_of_a_clean_read(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    kinds = ["http_429", "http_500", "http_502", "http_503", "http_503_no_retry_after", "http_504"]
    kinds += ["reset", "short_body", "trickle"]
    # The i-th file meets the i-th fault on its first request, and a short body again on its second.
    rules = [{"path": path, "requests": [1], "fault": kind} for path, kind in zip(paths, kinds, strict=False)]
    rules.append({"path": paths[0], "requests": [2], "fault": "short_body"})
    schedule = {"retry_after": 0, "trickle_seconds": 2, "rules": rules}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        for path, kind in zip(paths, kinds, strict=False):
            data, faults = _read_through(f"{server.url}/{path}")
            assert data == (root / path).read_bytes()
            expected = {"http_503_no_retry_after": "http_503", "trickle": "timeout"}.get(kind, kind)
            assert faults == ([expected, "short_body"] if path == paths[0] else [expected])
        requests = server.records()
    # A body cut short is continued from the byte reached, not read again.
    cut = [entry for entry in requests if entry["fault"] in ("reset", "short_body")]
    for entry in cut:
        following = next(
            later for later in requests if later["path"] == entry["path"] and later["time"] > entry["time"]
        )
        assert following["status"] == 206
        assert int(following["range"].removeprefix("bytes=").rstrip("-")) <= entry["bytes_sent"]


def test_a_server_that_ignores_ranges_is_read_again_and_what_was_read_passed_over(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    schedule = {"retry_after": 0, "rules": [{"path": paths[1], "requests": [1, 2], "fault": "short_body"}]}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule, ranges=False) as server:
        data, faults = _read_through(f"{server.url}/{paths[1]}")
        requests = server.records()
    assert data == (root / paths[1]).read_bytes()
    assert faults == ["short_body", "short_body"]
    # Each cut asked for the rest of the file and got all of it again.
    assert [entry["status"] for entry in requests] == [200, 200, 200]
    assert requests[0]["range"] is None
    assert [entry["range"] for entry in requests[1:]] == [f"bytes={cut['bytes_sent']}-" for cut in requests[:2]]


def test_a_file_that_keeps_failing_is_given_up_at_the_byte_reached(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    size = (root / paths[2]).stat().st_size
    # A short body first, then nothing but errors: the file is given up where the short body stopped.
    schedule = {
        "retry_after": 0,
        "rules": [
            {"path": paths[2], "requests": [1], "fault": "short_body"},
            {"path": paths[2], "fault": "http_500"},
        ],
    }
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        with pytest.raises(ReadGaveUp) as gave_up:
            _read_through(f"{server.url}/{paths[2]}")
        requests = server.records()
    reached = requests[0]["bytes_sent"]
    assert 0 < reached < size
    assert gave_up.value.offset == reached
    assert gave_up.value.fault == "http_500"
    assert f"at byte {reached} after 4 attempts" in str(gave_up.value)
    # The policy's 4 faults in a row with no byte read between them: the cut, then 3 errors.
    assert [entry["fault"] for entry in requests] == ["short_body", "http_500", "http_500", "http_500"]


def test_final_answers_are_not_retried(cc_dump, tmp_path):
    root, _, _ = cc_dump
    with CCServer.start(root, tmp_path / "log.jsonl") as server:
        with pytest.raises(FileNotFoundError, match="HTTP 404"):
            _read_through(f"{server.url}/crawl-data/CC-MAIN-TEST/no-such.warc.gz")
        assert len(server.records()) == 1


def test_the_wait_is_what_the_server_asks_for_within_the_longest_wait(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    schedule = {"retry_after": 7, "rules": [{"path": paths[3], "fault": "http_503"}]}
    server = CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule)
    with server, pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"{server.url}/{paths[3]}", timeout=5)
    assert transient_fault(answer.value) == "http_503"
    rng = random.Random(0)
    assert RetryPolicy().wait(1, answer.value, rng) == 7.0
    assert RetryPolicy(max_wait=3).wait(1, answer.value, rng) == 3.0
    # Without Retry-After: doubling from the first wait, less up to half of it.
    waits = [RetryPolicy(first_wait=1, max_wait=60).wait(failures, OSError(), rng) for failures in (1, 2, 3, 8)]
    assert 0.5 <= waits[0] <= 1 and 1 <= waits[1] <= 2 and 2 <= waits[2] <= 4 and 30 <= waits[3] <= 60


def test_a_listing_is_retried_but_a_refused_connection_is_not():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise urllib.error.HTTPError("http://x", 503, "Slow Down", {"Retry-After": "0"}, None)
        return "listed"

    faults = []
    assert with_retries(flaky, "list x", _QUICK, faults.append) == "listed"
    assert faults == ["http_503", "http_503"]

    def refused():
        calls.append(1)
        return open_at(f"http://127.0.0.1:{refused_port}/x", 0)

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        refused_port = probe.getsockname()[1]
    calls.clear()
    with pytest.raises(urllib.error.URLError) as failure:
        with_retries(refused, "list x", _QUICK)
    assert transient_fault(failure.value) == "refused"
    assert len(calls) == 1
