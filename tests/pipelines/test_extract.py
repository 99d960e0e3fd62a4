"""The extract pipeline: WARC pages to their main text, nothing filtered."""

from __future__ import annotations

import json
import pathlib
import shutil

from beamtrove.cli import main
from beamtrove.pipelines import pipeline_spec
from tests.conftest import jsonl_rows, make_warc_set, require


def test_extract_pipeline_keeps_every_page_with_text(data_dir, tmp_path):
    warc = data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"
    assert main(["run", "extract", "--input", str(warc), "--output", str(tmp_path)]) == 0
    steps = json.loads((tmp_path / "stats.json").read_text())["steps"]
    rows = jsonl_rows(tmp_path / "documents")
    assert (
        len(rows)
        == steps["extract"]["counters"]["out"]
        == steps["read"]["counters"]["out"]
        - steps["extract"]["counters"].get("dropped.empty", 0)
        - sum(v for k, v in steps["extract"]["counters"].items() if k.startswith("errors."))
    )
    assert all("<html" not in row["text"].lower() for row in rows)


def test_extract_is_shard_safe_resumable_and_takes_the_extraction_options():
    spec = pipeline_spec("extract")
    assert spec.shard_safe and spec.resumable and spec.read_label == "read"
    assert [c.__name__ for c in spec.option_classes] == [
        "ExtractionOptions",
        "ResumeOptions",
        "SummaryStatsOptions",
        "WordSplitterOptions",
        "BeamtroveOptions",
    ]


def test_warc_files_cut_inside_their_gzip_header_are_dead_letters_and_the_others_read_whole(data_dir, tmp_path):
    # Such a file read as one with no records: no dead letter, nothing in the stats (a cut .jsonl.gz was one).
    whole, damaged = tmp_path / "whole", tmp_path / "damaged"
    make_warc_set(whole, "--records", "12", "--files", "1", "--seed", "48")
    (whole / "manifest.jsonl").unlink()
    for name in ("cc-main-2024-22_whirlwind.warc.gz", "cc-main-2024-22_whirlwind.warc.wet.gz"):
        shutil.copy(require(data_dir / "warc" / name), whole / name)
    shutil.copytree(whole, damaged)
    cuts = {"resiliparse": 1, "clueweb": 3, "dolma": 9, "made": 10}  # the gzip header is 10 bytes long
    sources = {
        "resiliparse": data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz",
        "clueweb": data_dir / "warc" / "clueweb09-ja_quirk.warc.gz",
        "dolma": data_dir / "warc" / "dolma_wget_sample-0000.warc.gz",
        "made": whole / "part-00000.warc.gz",
    }
    for name, size in cuts.items():
        (damaged / f"cut-{name}.warc.gz").write_bytes(require(sources[name]).read_bytes()[:size])

    for folder in (whole, damaged):
        assert main(["run", "extract", "--input", str(folder), "--output", str(folder.with_suffix(".out"))]) == 0
    documents = [
        sorted((row["id"], row["text"], pathlib.Path(row["metadata"]["file_path"]).name) for row in rows)
        for rows in (jsonl_rows(folder.with_suffix(".out") / "documents") for folder in (whole, damaged))
    ]
    assert documents[1] == documents[0] and len(documents[0]) > 10
    dead = jsonl_rows(damaged.with_suffix(".out") / "dead_letters")
    assert sorted((row["reason"], row["file"], row["offset"]) for row in dead) == sorted(
        ("truncated", str(damaged / f"cut-{name}.warc.gz"), size) for name, size in cuts.items()
    )
    reads = [
        json.loads((folder.with_suffix(".out") / "stats.json").read_text())["steps"]["read"]["counters"]
        for folder in (whole, damaged)
    ]
    assert reads[1]["in"] == reads[0]["in"] + len(cuts) and reads[1]["errors.truncated"] == len(cuts)
