"""The files of a Common Crawl dump, from its paths file on a real HTTP server laid out like Common Crawl."""

from __future__ import annotations

import pytest

from beamtrove.commoncrawl import DumpFiles, parse_line_range
from tests.cc_server import CCServer


def test_the_files_listed_are_the_paths_files_in_its_order_through_faults(cc_dump, tmp_path):
    root, paths, _ = cc_dump
    paths_file = "crawl-data/CC-MAIN-TEST/warc.paths.gz"
    schedule = {
        "retry_after": 0,
        "rules": [
            {"path": paths_file, "requests": [1], "fault": "http_503"},
            {"path": paths_file, "requests": [2], "fault": "short_body"},
        ],
    }
    with CCServer.start(root, tmp_path / "log.jsonl", schedule=schedule) as server:
        files = DumpFiles("CC-MAIN-TEST", server.url).list_files()
        requests = server.records()
    assert [file.name for file in files] == paths
    assert [file.url for file in files] == [f"{server.url}/{path}" for path in paths]
    # The paths file only: no file of the dump is touched to list them.
    assert [(entry["path"], entry["fault"]) for entry in requests] == [
        (f"/{paths_file}", "http_503"),
        (f"/{paths_file}", "short_body"),
        (f"/{paths_file}", None),
    ]


def test_a_selection_is_a_range_then_a_sample_that_a_larger_count_extends(cc_dump):
    _, paths, _ = cc_dump
    assert DumpFiles("CC-MAIN-TEST", start=3, end=7).select(paths) == paths[3:7]
    assert DumpFiles("CC-MAIN-TEST", start=10).select(paths) == paths[10:]
    samples = {count: DumpFiles("CC-MAIN-TEST", count=count, seed=5).select(paths) for count in (1, 3, 6, 12, 20)}
    assert [len(sample) for sample in samples.values()] == [1, 3, 6, 12, 12]
    for smaller, larger in ((1, 3), (3, 6), (6, 12)):
        assert set(samples[smaller]) < set(samples[larger])
    # In the paths file's order, and another seed draws other files.
    assert samples[6] == [path for path in paths if path in samples[6]]
    assert DumpFiles("CC-MAIN-TEST", count=6, seed=6).select(paths) != samples[6]
    in_range = DumpFiles("CC-MAIN-TEST", start=2, end=8, count=3, seed=5).select(paths)
    assert len(in_range) == 3 and set(in_range) <= set(paths[2:8])
    with pytest.raises(ValueError, match="lists 12 files: the range of lines 12: starts past its end"):
        DumpFiles("CC-MAIN-TEST", start=12).select(paths)


def test_a_dump_that_is_not_there_is_named_with_what_to_check(cc_dump, tmp_path):
    root, _, _ = cc_dump
    with CCServer.start(root, tmp_path / "log.jsonl") as server, pytest.raises(FileNotFoundError) as missing:
        DumpFiles("CC-MAIN-2099-01", server.url).list_files()
    assert str(missing.value) == (
        f"Common Crawl has no dump CC-MAIN-2099-01 under {server.url}: {server.url}/crawl-data/CC-MAIN-2099-01/"
        "warc.paths.gz is not found. Check --dump (dump names are listed at "
        "https://data.commoncrawl.org/crawl-data/index.html) and --cc_base."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0:100", (0, 100)), ("5000:", (5000, None)), (":30", (0, 30)), (" 7:8 ", (7, 8))],
)
def test_line_ranges_read_as_python_slices(text, expected):
    assert parse_line_range(text) == expected


@pytest.mark.parametrize(("text", "message"), [("10:10", "is empty"), ("a:b", "is not a range"), ("-1:", "not a")])
def test_a_wrong_line_range_says_how_to_write_one(text, message):
    with pytest.raises(ValueError, match=message):
        parse_line_range(text)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dump": "../up"}, "must be one folder name"),
        ({"dump": "CC-MAIN-TEST", "kind": "arc"}, "one of warc, wet, wat"),
        ({"dump": "CC-MAIN-TEST", "count": 0}, "--cc_files must be at least 1"),
    ],
)
def test_an_impossible_selection_is_refused_as_it_is_made(settings, message):
    with pytest.raises(ValueError, match=message):
        DumpFiles(**settings)
