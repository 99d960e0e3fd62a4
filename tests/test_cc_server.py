"""The Common Crawl test server (tests/cc_server.py), seen by real HTTP clients over loopback."""

from __future__ import annotations

import collections
import concurrent.futures
import gzip
import http.client
import re
import time

import pytest

from tests.cc_server import CCServer, lay_out_common_crawl

DUMP_FILE = re.compile(r"crawl-data/CC-MAIN-TEST/segments/\d{13}\.\d{2}/warc/CC-MAIN-\d{14}-\d{14}-\d{5}\.warc\.gz")


def get(server: CCServer, path: str, headers: dict[str, str] | None = None, method: str = "GET", timeout: float = 5):
    """One request on a new connection: ``(status, headers, body)``; the body read raises what the server caused."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request(method, "/" + path.lstrip("/"), headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


def test_the_tree_and_its_paths_file_list_the_same_files(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    listed = gzip.decompress((root / "crawl-data/CC-MAIN-TEST/warc.paths.gz").read_bytes()).decode().splitlines()
    on_disk = sorted(str(path.relative_to(root)) for path in root.glob("crawl-data/*/segments/*/warc/*.warc.gz"))
    assert listed == paths == on_disk
    assert len(paths) == 12
    assert all(DUMP_FILE.fullmatch(path) for path in paths)
    assert len({path.split("/")[3] for path in paths}) == 3

    again = tmp_path / "again"
    copies = lay_out_common_crawl([root / path for path in paths], again, dump="CC-MAIN-2024-22", segments=5)
    assert len({path.split("/")[3] for path in copies}) == 5
    for copy, path in zip(copies, paths, strict=True):
        assert (again / copy).read_bytes() == (root / path).read_bytes()


def test_files_are_served_with_ranges(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    data = (root / paths[0]).read_bytes()
    size = len(data)
    with CCServer.start(root, tmp_path / "log.jsonl") as server:
        status, headers, body = get(server, paths[0])
        assert (status, headers["Content-Length"], headers["Accept-Ranges"], body) == (200, str(size), "bytes", data)
        status, headers, body = get(server, paths[0], method="HEAD")
        assert (status, headers["Content-Length"], body) == (200, str(size), b"")
        status, headers, body = get(server, paths[0], {"Range": "bytes=100-"})
        assert (status, headers["Content-Range"], body) == (206, f"bytes 100-{size - 1}/{size}", data[100:])
        status, headers, body = get(server, paths[0], {"Range": "bytes=10-19"})
        assert (status, headers["Content-Range"], body) == (206, f"bytes 10-19/{size}", data[10:20])
        assert get(server, paths[0], {"Range": f"bytes={size}-"})[0] == 416
        listing = get(server, "crawl-data/CC-MAIN-TEST/warc.paths.gz")[2]
        assert gzip.decompress(listing).decode().splitlines() == paths
        for missing in ("nowhere.warc.gz", "crawl-data/CC-MAIN-TEST/", "crawl-data", "/../../etc/passwd", "/"):
            assert get(server, missing)[0] == 404, missing
        records = server.records()
    assert [(r["method"], r["range"], r["status"], r["request"], r["bytes_sent"]) for r in records[:5]] == [
        ("GET", None, 200, 1, size),
        ("HEAD", None, 200, None, 0),
        ("GET", "bytes=100-", 206, 2, size - 100),
        ("GET", "bytes=10-19", 206, 3, 10),
        ("GET", f"bytes={size}-", 416, 4, len(b"Range Not Satisfiable\n")),
    ]
    assert records[0] == {
        "time": records[0]["time"],
        "method": "GET",
        "path": "/" + paths[0],
        "range": None,
        "request": 1,
        "status": 200,
        "fault": None,
        "length": size,
        "bytes_sent": size,
        "error": None,
    }
    assert len(records) == 11


def test_no_ranges_sends_the_whole_file(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    data = (root / paths[1]).read_bytes()
    with CCServer.start(root, tmp_path / "log.jsonl", ranges=False) as server:
        status, headers, body = get(server, paths[1], {"Range": "bytes=100-"})
    assert (status, body) == (200, data)
    assert "Accept-Ranges" not in headers
    assert "Content-Range" not in headers


def test_http_faults_by_request_number(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    kinds = ["http_429", "http_500", "http_502", "http_503", "http_503_no_retry_after", "http_504"]
    rules = [{"path": paths[2], "requests": [number], "fault": kind} for number, kind in enumerate(kinds, 1)]
    with CCServer.start(root, tmp_path / "log.jsonl", schedule={"retry_after": 3, "rules": rules}) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        answers = []
        for _ in range(len(kinds) + 1):  # one kept-alive connection: an error answer leaves it usable
            connection.request("GET", "/" + paths[2])
            response = connection.getresponse()
            answers.append((response.status, response.getheader("Retry-After"), len(response.read())))
        connection.close()
        faults = [record["fault"] for record in server.records()]
    assert answers[:-1] == [
        (429, "3", len(b"injected http_429\n")),
        (500, None, len(b"injected http_500\n")),
        (502, None, len(b"injected http_502\n")),
        (503, "3", len(b"injected http_503\n")),
        (503, None, len(b"injected http_503_no_retry_after\n")),
        (504, None, len(b"injected http_504\n")),
    ]
    assert answers[-1] == (200, None, (root / paths[2]).stat().st_size)
    assert faults == [*kinds, None]


def test_a_short_body_is_continued_with_a_range(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    data = (root / paths[3]).read_bytes()
    schedule = {"rules": [{"path": paths[3], "requests": [1], "fault": "short_body"}]}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        with pytest.raises(http.client.IncompleteRead) as cut:
            get(server, paths[3])
        got = cut.value.partial
        status, _, rest = get(server, paths[3], {"Range": f"bytes={len(got)}-"})
        records = server.records()
    assert (len(got), status, got + rest) == (len(data) // 2, 206, data)
    assert [(r["range"], r["status"], r["fault"], r["length"], r["bytes_sent"]) for r in records] == [
        (None, 200, "short_body", len(data), len(data) // 2),
        (f"bytes={len(got)}-", 206, None, len(data) - len(got), len(data) - len(got)),
    ]


def test_a_reset_cuts_the_connection(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    size = (root / paths[4]).stat().st_size
    schedule = {"rules": [{"path": paths[4], "requests": [1], "fault": "reset"}]}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        with pytest.raises((ConnectionResetError, http.client.IncompleteRead)):
            get(server, paths[4])
        assert get(server, paths[4])[2] == (root / paths[4]).read_bytes()
        records = server.records()
    assert [(r["fault"], r["bytes_sent"]) for r in records] == [("reset", size // 2), (None, size)]


def test_a_trickle_stalls_past_the_read_timeout(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    schedule = {"trickle_seconds": 3, "rules": [{"path": paths[5], "requests": [1], "fault": "trickle"}]}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            get(server, paths[5], timeout=0.3)
        assert time.monotonic() - start < 2
        records = server.records()
    assert [(r["status"], r["fault"], r["bytes_sent"]) for r in records] == [(200, "trickle", 16)]


def test_a_path_can_fail_on_every_request(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    schedule = {"rules": [{"path": "*-00006.warc.gz", "fault": "http_500"}]}
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        assert [get(server, paths[6])[0] for _ in range(5)] == [500] * 5
        assert get(server, paths[6], method="HEAD")[0] == 200  # only GETs are faulted
        assert get(server, paths[7])[0] == 200


def faulted_requests(root, paths, log_path, seed: int) -> set[tuple[str, int, str]]:
    """The (path, GET number, fault) a seeded schedule picks when 4 threads GET each file 4 times, file by file."""
    rule = {"path": "crawl-data/*.warc.gz", "probability": 0.3, "faults": ["http_500", "http_503", "http_429"]}

    def read_four_times(path: str) -> None:
        for _ in range(4):
            get(server, path)

    with CCServer.start(root, log_path, schedule={"seed": seed, "retry_after": 0, "rules": [rule]}) as server:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(read_four_times, paths))
        records = server.records()
    assert collections.Counter(r["request"] for r in records) == {number: len(paths) for number in (1, 2, 3, 4)}
    return {(r["path"], r["request"], r["fault"]) for r in records if r["fault"]}


def test_the_seeded_schedule_faults_the_same_requests_every_run(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    first = faulted_requests(root, paths, tmp_path / "first.jsonl", seed=5)
    assert 0 < len(first) < 4 * len(paths)
    assert len({fault for _, _, fault in first}) > 1
    assert faulted_requests(root, paths, tmp_path / "second.jsonl", seed=5) == first
    assert faulted_requests(root, paths, tmp_path / "other.jsonl", seed=6) != first


def test_a_proxy_relays_the_upstream_and_faults_as_scheduled(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    data = (root / paths[0]).read_bytes()
    rules = [{"path": paths[0], "requests": [2], "fault": "http_503"}]
    rules.append({"path": paths[0], "requests": [3], "fault": "short_body"})
    with (
        CCServer.start(root, tmp_path / "upstream.jsonl") as upstream,
        CCServer.start(log_path=tmp_path / "proxy.jsonl", schedule={"rules": rules}, upstream=upstream.url) as proxy,
    ):
        status, headers, body = get(proxy, paths[0], {"Range": "bytes=10-"})
        assert (status, headers["Content-Range"], body) == (206, f"bytes 10-{len(data) - 1}/{len(data)}", data[10:])
        status, headers, body = get(proxy, paths[0], method="HEAD")
        assert (status, headers["Content-Length"], body) == (200, str(len(data)), b"")
        assert get(proxy, "crawl-data/absent.warc.gz")[0] == 404
        assert get(proxy, paths[0])[0] == 503
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        connection.request("GET", f"/{paths[0]}")
        response = connection.getresponse()
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        connection.close()
        assert cut.value.partial == data[: len(data) // 2]
        # A PUT is relayed too, body and all: the file server answers it 501.
        assert get(proxy, paths[0], method="PUT")[0] == 501
        proxied, upstream_saw = proxy.records(), upstream.records()
    assert [(entry["method"], entry["status"], entry["fault"]) for entry in proxied] == [
        ("GET", 206, None), ("HEAD", 200, None), ("GET", 404, None), ("GET", 503, "http_503"),
        ("GET", 200, "short_body"), ("PUT", 501, None),
    ]  # fmt: skip
    # The 503 was the proxy's own answer; everything else reached the upstream.
    assert [entry["method"] for entry in upstream_saw] == ["GET", "HEAD", "GET", "GET"]
    assert proxied[4]["bytes_sent"] == len(data) // 2


@pytest.mark.parametrize("store_fixture", ["gcs_server", "s3_server"], ids=["gs", "s3"])
def test_a_proxy_relays_writes_to_an_object_store(store_fixture, request, tmp_path):
    from beamtrove.fs import filesystem  # noqa: PLC0415 (fsspec is for this test only)

    store = request.getfixturevalue(store_fixture)
    bucket = store.bucket()
    with CCServer.start(log_path=tmp_path / "proxy.jsonl", upstream=store.endpoint) as proxy, store.environment():
        options = (
            {"endpoint_url": proxy.url} if store.protocol == "gs" else {"client_kwargs": {"endpoint_url": proxy.url}}
        )
        through_proxy, path = filesystem(f"{bucket}/a/b.txt", options)
        through_proxy.pipe_file(path, b"written through the proxy\n")
        methods = {entry["method"] for entry in proxy.records()}
        direct, _ = filesystem(bucket)
        assert direct.cat_file(path) == b"written through the proxy\n"
    assert methods & {"POST", "PUT"}
