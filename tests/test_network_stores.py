"""Reading ``gs://`` and ``s3://`` through transient faults: real object store servers (fake-gcs-server, moto's)
behind tests/cc_server.py as a fault-injecting proxy, read with the clients a run uses (gcsfs, s3fs).

Who waits out a fault depends on the store's client, and beamtrove's layer (:class:`~beamtrove.network.
ResumingStream`) sees only what the client gives up on:

* gcsfs retries every GET itself, a 5xx, 429, a body cut short or a connection reset alike, six attempts in all
  with waits of 1-2, 2-3, 4-5, 8-9 and 16-17 seconds; it asks the same range again, the bytes it got are dropped.
  It gives up with the last error, which beamtrove's layer waits out too: gcsfs turns a 502 into a bare
  ``requests`` ProxyError that carries no status, so that one is told by its type.
* botocore retries 5xx answers (5 attempts, legacy mode, up to 1, 2, 4, 8 seconds apart), and s3fs the read of a
  body cut short or reset (5 attempts, 0.1 to 0.5 s apart), again of the whole range. What outlasts them reaches
  beamtrove's layer: a 5xx as ``http_<status>``, a cut body (cut short or reset, aiohttp says
  ClientPayloadError either way) as ``short_body``.

Neither client is given ``--read_timeout``: a body that stalls is waited on until the server closes it (a body cut
short, retried as above) or the client's own timeout ends it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import urllib.parse

import pytest

from beamtrove.fs import open_resuming
from beamtrove.network import RetryPolicy, transient_fault
from tests.cc_server import CCServer
from tests.conftest import jsonl_rows
from tests.servers import ObjectStore

_POLICY = RetryPolicy(first_wait=0.01, read_timeout=2)
_QUICK_RETRIES = ("--retry_wait", "0.01", "--read_timeout", "2")


def _stored(store: ObjectStore, local: pathlib.Path, key: str) -> tuple[str, str]:
    """Uploads ``local`` to a fresh bucket as ``key``; returns its URL and the proxy's path of its reads."""
    bucket_url = store.bucket()
    store.upload(local, f"{bucket_url}/{key}")
    bucket = bucket_url.split("://", 1)[1]
    if store.protocol == "gs":  # the JSON API's media download, the object's name URL-encoded as one segment
        return f"{bucket_url}/{key}", f"download/storage/v1/b/{bucket}/o/{urllib.parse.quote(key, safe='')}"
    return f"{bucket_url}/{key}", f"{bucket}/{key}"  # path-style S3


def _through(store: ObjectStore, proxy: CCServer) -> dict:
    """The storage options that send the store's client to the proxy."""
    if store.protocol == "gs":
        return {"endpoint_url": proxy.url}
    return {"client_kwargs": {"endpoint_url": proxy.url}}


def _read(store: ObjectStore, url: str, storage_options: dict) -> tuple[bytes, list[str]]:
    faults: list[str] = []
    with store.environment(), open_resuming(url, storage_options, _POLICY, on_retry=faults.append) as stream:
        return stream.read(), faults


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_what_gcsfs_raises_for_a_transient_answer_is_a_transient_fault(status):
    from gcsfs.retry import validate_response  # noqa: PLC0415 (gcsfs is an optional extra)

    with pytest.raises(Exception) as raised:
        validate_response(status, f"injected http_{status}".encode(), "bucket/object")
    assert transient_fault(raised.value) == f"http_{status}"


def _assert_each_fault_was_read_again_whole(requests: list[dict], object_path: str) -> None:
    """Every faulted GET of the object was followed by a clean GET of the same range, sent whole."""
    gets = [entry for entry in requests if entry["method"] == "GET" and entry["path"] == f"/{object_path}"]
    faulted = [index for index, entry in enumerate(gets) if entry["fault"]]
    assert faulted
    for index in faulted:
        assert any(
            later["range"] == gets[index]["range"] and not later["fault"] and later["bytes_sent"] == later["length"]
            for later in gets[index + 1 :]
        ), gets[index]


@pytest.mark.parametrize(
    "store_fixture", [pytest.param("gcs_server", marks=pytest.mark.slow, id="gs"), pytest.param("s3_server", id="s3")]
)
def test_faults_the_client_retries_leave_the_bytes_whole(store_fixture, request, cc_dump, tmp_path):
    # gs is slow: gcsfs waits 1-2, 2-3 and 4-5 s before its second, third and fourth attempts.
    store: ObjectStore = request.getfixturevalue(store_fixture)
    root, paths, _ = cc_dump
    local = root / paths[0]
    url, object_path = _stored(store, local, "warcs/a.warc.gz")
    rules = [
        {"path": object_path, "requests": [number], "fault": fault}
        for number, fault in enumerate(["http_503", "short_body", "reset"], start=1)
    ]
    with CCServer.start(log_path=tmp_path / "log.jsonl", schedule={"rules": rules}, upstream=store.endpoint) as proxy:
        data, faults = _read(store, url, _through(store, proxy))
        requests = proxy.records()
    assert data == local.read_bytes()
    # The client retried each fault itself (see the module's docstring): none reached beamtrove's layer.
    assert faults == []
    assert [entry["fault"] for entry in requests if entry["fault"]] == ["http_503", "short_body", "reset"]
    _assert_each_fault_was_read_again_whole(requests, object_path)


def test_faults_that_outlast_the_s3_client_are_waited_out_by_beamtrove(s3_server, cc_dump, tmp_path):
    root, paths, _ = cc_dump
    local = root / paths[1]
    url, object_path = _stored(s3_server, local, "warcs/b.warc.gz")
    # botocore's retries off, so that each 5xx reaches beamtrove's layer; s3fs still reads a cut body 5 times.
    rules = [
        {"path": object_path, "requests": [1], "fault": "http_503"},
        {"path": object_path, "requests": [2], "fault": "http_500"},
        {"path": object_path, "requests": [3, 4, 5, 6, 7], "faults": ["short_body", "reset"]},
    ]
    schedule = {"seed": 5, "retry_after": 0, "rules": rules}
    with CCServer.start(log_path=tmp_path / "log.jsonl", schedule=schedule, upstream=s3_server.endpoint) as proxy:
        storage_options = {**_through(s3_server, proxy), "config_kwargs": {"retries": {"total_max_attempts": 1}}}
        data, faults = _read(s3_server, url, storage_options)
        requests = proxy.records()
    assert data == local.read_bytes()
    assert faults == ["http_503", "http_500", "short_body"]
    assert [entry["request"] for entry in requests if entry["method"] == "GET" and not entry["fault"]] == [8]
    _assert_each_fault_was_read_again_whole(requests, object_path)


def _run(store: ObjectStore, input_url: str, output: pathlib.Path, endpoint: str) -> subprocess.CompletedProcess:
    """``beamtrove run fineweb`` in a new process whose ``protocol://`` URLs go to ``endpoint``."""
    env = {**os.environ, **store.env}
    env["STORAGE_EMULATOR_HOST" if store.protocol == "gs" else "AWS_ENDPOINT_URL_S3"] = endpoint
    command = [sys.executable, "-m", "beamtrove", "run", "fineweb", "--input", input_url, "--output", str(output)]
    return subprocess.run(
        [*command, *_QUICK_RETRIES], capture_output=True, text=True, timeout=600, env=env, check=False
    )


def _documents(output: pathlib.Path) -> dict[str, str]:
    return {row["id"]: row["text"] for row in jsonl_rows(output / "documents")}


@pytest.mark.slow
@pytest.mark.parametrize("store_fixture", ["gcs_server", "s3_server"], ids=["gs", "s3"])
def test_a_run_over_a_bucket_through_faults_keeps_every_document_of_the_local_run(
    store_fixture, request, cc_dump, tmp_path
):
    store: ObjectStore = request.getfixturevalue(store_fixture)
    root, paths, _ = cc_dump
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    for number, path in enumerate(paths):
        (warcs / f"part-{number:05d}.warc.gz").write_bytes((root / path).read_bytes())
    local_output = tmp_path / "local"
    local = _run(store, str(warcs), local_output, store.endpoint)
    assert local.returncode == 0, local.stderr
    bucket_url = store.bucket()
    store.upload(warcs, f"{bucket_url}/warcs")
    bucket = bucket_url.split("://", 1)[1]
    reads = f"download/storage/v1/b/{bucket}/o/warcs%2F" if store.protocol == "gs" else f"{bucket}/warcs/"
    # Each of the first three files faulted once, and about one read in ten besides.
    kinds = ["http_503", "short_body", "reset"]
    rules = [{"path": f"{reads}part-{n:05d}.warc.gz", "requests": [1], "fault": kind} for n, kind in enumerate(kinds)]
    rules.append({"path": f"{reads}*.warc.gz", "probability": 0.1, "faults": ["http_500", *kinds]})
    schedule = {"seed": 3, "retry_after": 0, "rules": rules}
    output = tmp_path / "out"
    with CCServer.start(log_path=tmp_path / "log.jsonl", schedule=schedule, upstream=store.endpoint) as proxy:
        result = _run(store, f"{bucket_url}/warcs/", output, proxy.url)
        requests = proxy.records()
    assert result.returncode == 0, result.stderr
    assert _documents(output) == _documents(local_output)
    assert len(_documents(output)) >= 5
    faulted = {entry["path"] for entry in requests if entry["fault"]}
    assert {f"/{reads}part-{n:05d}.warc.gz" for n in range(3)} <= faulted
    for path in faulted:
        _assert_each_fault_was_read_again_whole(requests, path.lstrip("/"))
    counters = json.loads((output / "stats.json").read_text())["steps"]["read"]["counters"]
    assert counters["files"] == len(paths)
    # The clients retried every fault themselves (see the module's docstring): beamtrove's layer counted none.
    assert not any(name.startswith(("retries.", "errors.")) for name in counters)
    assert not list((output / "dead_letters").glob("*"))
