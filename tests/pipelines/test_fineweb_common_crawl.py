"""``beamtrove run fineweb --dump`` over a real HTTP server laid out like Common Crawl (tests/cc_server.py) that fails
about one request in ten in every way a network does, against the same run over the local files."""

from __future__ import annotations

import collections
import hashlib
import json

import pytest

from beamtrove.execution.dataflow.template import flex_template_spec
from tests.cc_server import CCServer
from tests.conftest import beamtrove, jsonl_rows

_DUMP = "CC-MAIN-TEST"
# Retries that cost what a real one costs but a short wait, and a silent connection noticed in a second.
_QUICK_RETRIES = ("--retry_wait", "0.01", "--read_timeout", "1")
_FAULT_KINDS = ["http_429", "http_500", "http_502", "http_503", "http_503_no_retry_after", "http_504"]
_FAULT_KINDS += ["reset", "short_body", "trickle"]
# What the reader names each fault it meets.
_COUNTED_AS = {"http_503_no_retry_after": "http_503", "trickle": "timeout"}


def _documents(output) -> dict[str, str]:
    return {row["id"]: row["text"] for row in jsonl_rows(output / _DUMP / "documents")}


def _read_counters(output) -> dict[str, int]:
    stats = json.loads((output / _DUMP / "stats.json").read_text())
    return stats["steps"]["read"]["counters"]


@pytest.fixture(scope="module")
def local_run(cc_dump, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """The run over the dump's files on the local disk, what every run over the network must keep: each document's
    id, with the path of its file in the paths file and its text."""
    root, _, _ = cc_dump
    output = tmp_path_factory.mktemp("local") / "out"
    warcs = str(root / "crawl-data" / _DUMP / "segments" / "*" / "warc" / "*.warc.gz")
    result = beamtrove("run", "fineweb", "--input", warcs, "--dump", _DUMP, "--output", str(output))
    assert result.returncode == 0, result.stderr
    rows = jsonl_rows(output / _DUMP / "documents")
    return {row["id"]: (row["metadata"]["file_path"].removeprefix(f"{root}/"), row["text"]) for row in rows}


@pytest.mark.slow
def test_a_dump_read_through_faults_keeps_every_document_of_the_local_run(cc_dump, local_run, tmp_path):
    root, paths, _ = cc_dump
    # Every kind of fault on a file's first request, about one request in ten faulted besides, and the paths file
    # unavailable once. (Retry-After: 0, to keep the test short: that a wait asked for is waited is
    # tests/test_network.py's.)
    rules = [{"path": path, "requests": [1], "fault": kind} for path, kind in zip(paths, _FAULT_KINDS, strict=False)]
    rules.append({"path": "crawl-data/*.warc.gz", "probability": 0.1, "faults": _FAULT_KINDS})
    rules.append({"path": f"crawl-data/{_DUMP}/warc.paths.gz", "requests": [1], "fault": "http_503"})
    schedule = {"seed": 3, "retry_after": 0, "trickle_seconds": 2, "rules": rules}
    output = tmp_path / "out"
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        result = beamtrove(
            "run", "fineweb", "--dump", _DUMP, "--cc_base", server.url, "--output", str(output), *_QUICK_RETRIES
        )
        requests = server.records()
    assert result.returncode == 0, result.stderr
    assert _documents(output) == {doc_id: text for doc_id, (_, text) in local_run.items()}
    assert len(local_run) >= 5
    faults = collections.Counter(
        f"retries.{_COUNTED_AS.get(entry['fault'], entry['fault'])}"
        for entry in requests
        if entry["fault"] and entry["path"].endswith(".warc.gz")
    )
    assert set(faults) == {f"retries.{_COUNTED_AS.get(kind, kind)}" for kind in _FAULT_KINDS}
    counters = _read_counters(output)
    assert {name: value for name, value in counters.items() if name.startswith("retries.")} == faults
    assert counters["files"] == 12
    assert not any(name.startswith("errors.") for name in counters)
    assert not list((output / _DUMP / "dead_letters").glob("*"))


@pytest.mark.slow
def test_a_selection_reads_its_files_only_and_one_that_keeps_failing_is_one_dead_letter(cc_dump, local_run, tmp_path):
    root, paths, _ = cc_dump
    # A sample of 3 of lines 2:10 whose first file keeps failing and whose others hold documents the local run kept.
    kept_from = {path for path, _ in local_run.values()}
    seed = next(seed for seed in range(100) if set(_sample(paths[2:10], 3, seed)[1:]) & kept_from)
    chosen = _sample(paths[2:10], 3, seed)
    broken = chosen[0]
    selection = ("--cc_range", "2:10", "--cc_files", "3", "--cc_seed", str(seed))
    schedule = {"retry_after": 0, "rules": [{"path": broken, "fault": "http_500"}]}
    output = tmp_path / "out"
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        result = beamtrove(
            "run", "fineweb", "--dump", _DUMP, "--cc_base", server.url, "--output", str(output), "--read_attempts",
            "3", *selection, *_QUICK_RETRIES,
        )  # fmt: skip
        requests = server.records()
    assert result.returncode == 0, result.stderr
    read = {entry["path"].lstrip("/") for entry in requests if entry["path"].endswith(".warc.gz")}
    assert read == set(chosen)
    assert [entry["fault"] for entry in requests if entry["path"] == f"/{broken}"] == ["http_500"] * 3
    # The other files' documents, exactly as the local run kept them.
    expected = {doc_id: text for doc_id, (path, text) in local_run.items() if path in chosen and path != broken}
    assert _documents(output) == expected
    assert expected
    [dead_letter] = jsonl_rows(output / _DUMP / "dead_letters")
    assert (dead_letter["reason"], dead_letter["file"], dead_letter["offset"]) == (
        "network_failed",
        f"{server.url}/{broken}",
        0,
    )
    assert "after 3 attempts without progress; last fault http_500" in dead_letter["message"]
    assert _read_counters(output)["errors.network_failed"] == 1


def _sample(paths: list[str], count: int, seed: int) -> list[str]:
    """The sample a selection draws, computed here as its documentation says: the smallest hashes with the seed, in
    the paths file's order."""
    drawn = set(sorted(paths, key=lambda path: hashlib.sha256(f"{seed}\0{path}".encode()).digest())[:count])
    return [path for path in paths if path in drawn]


def test_the_dump_and_its_selection_are_parameters_of_the_template():
    spec = flex_template_spec("fineweb", "gcr.io/project/beamtrove:1")
    parameters = {parameter["name"]: parameter for parameter in spec["metadata"]["parameters"]}
    for name in ("dump", "cc_base", "cc_range", "cc_files", "cc_seed", "read_attempts", "retry_wait", "read_timeout"):
        assert parameters[name]["isOptional"] is True
    assert "paths file" in parameters["cc_range"]["helpText"]
