"""Output names: the stems of per-input outputs and where each kind of output goes."""

from __future__ import annotations

from beamtrove.fs import InputFile
from beamtrove.layout import (
    completion_marker,
    input_dead_letters,
    input_documents,
    input_excluded,
    input_stem,
    write_clusters,
    write_excluded,
)


def test_input_stem_keeps_the_relative_path_and_drops_extensions():
    assert input_stem(InputFile("/d/a/x.warc.gz", "a/x.warc.gz", 1)) == "a--x"
    assert input_stem(InputFile("/d/x.jsonl", "x.jsonl", 1)) == "x"
    assert input_stem(
        InputFile("/d/CC-MAIN-2024-22/seg.1/part.warc.zst", "CC-MAIN-2024-22/seg.1/part.warc.zst", 1)
    ) == ("CC-MAIN-2024-22--seg.1--part")
    # Only one extension after a compression suffix goes: the rest of a dotted name is the input's.
    assert input_stem(InputFile("gs://b/p/v1.2.parquet", "p/v1.2.parquet", 1)) == "p--v1.2"


def test_per_input_outputs_live_in_the_folders_of_a_whole_run():
    assert input_documents("a--x") == "documents/a--x.jsonl.gz"
    assert input_excluded("url_filter", "a--x") == "excluded/url_filter/a--x.jsonl.gz"
    assert input_dead_letters("a--x") == "dead_letters/a--x.jsonl"
    assert completion_marker("a--x") == "_completed/a--x.json"
    assert (write_excluded("c4_quality"), write_clusters("minhash")) == (
        "write_excluded_c4_quality",
        "write_clusters_minhash",
    )
