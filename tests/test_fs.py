"""Input matching: globs, directories, URLs and errors before any work starts."""

from __future__ import annotations

import fsspec
import pytest

from beamtrove.fs import match_inputs


def test_globs_directories_and_files_sorted_and_deduplicated(data_dir):
    warc = data_dir / "warc"
    files = match_inputs(
        [str(warc / "dolma_*.warc.gz"), str(warc / "warcio-edge-cases"), str(warc / "dolma_wget_sample-0000.warc.gz")],
        suffixes=(".arc.gz",),
    )
    assert [f.name for f in files] == [
        "dolma_wget_sample-0000.warc.gz",
        "dolma_wget_sample-0001.warc.gz",
        "example.arc.gz",
    ]
    assert [f.url for f in files] == sorted(f.url for f in files)
    assert files[0].size == (warc / "dolma_wget_sample-0000.warc.gz").stat().st_size


def test_names_are_relative_to_where_the_pattern_starts(data_dir):
    files = match_inputs(str(data_dir / "warc" / "*" / "example.warc.gz"))
    assert [f.name for f in files] == ["warcio-edge-cases/example.warc.gz"]


def test_memory_urls_keep_their_protocol():
    fsspec.filesystem("memory").pipe("memory://beamtrove-fs-test/a/b.jsonl", b"{}\n")
    [file] = match_inputs("memory://beamtrove-fs-test/**/*.jsonl")
    assert (file.url, file.name, file.size) == ("memory:///beamtrove-fs-test/a/b.jsonl", "a/b.jsonl", 3)


def test_errors_name_what_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"'.*absent' does not exist"):
        match_inputs(str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="No files match"):
        match_inputs(str(tmp_path / "*.jsonl"))
    (tmp_path / "notes.txt").write_text("not a dataset")
    with pytest.raises(FileNotFoundError, match=r"No files ending in \.jsonl are under the directory"):
        match_inputs(str(tmp_path), suffixes=(".jsonl",))
