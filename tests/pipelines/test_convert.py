"""The convert pipeline: runner modes agree, formats round-trip."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq

from beamtrove.cli import main
from beamtrove.fs import InputFile
from beamtrove.input_ranges import write_input_ranges


def _jsonl_rows(directory):
    rows = []
    for path in sorted(directory.glob("part-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            rows.extend(json.loads(line) for line in lines)
    return sorted(rows, key=lambda row: row["id"])


def test_in_memory_and_multi_processing_give_identical_documents(faults_set, tmp_path):
    warcs, _ = faults_set
    outputs = {}
    for mode, extra in {
        "in_memory": ["--direct_running_mode=in_memory"],
        "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    }.items():
        out = tmp_path / mode
        assert (
            main(["run", "convert", "--input", str(warcs), "--input_format", "warc", "--output", str(out), *extra]) == 0
        )
        outputs[mode] = _jsonl_rows(out)
        stats = json.loads((out / "stats.json").read_text())["steps"]
        assert stats["read"]["counters"]["out"] == stats["write"]["counters"]["out"] == 160
    assert len(outputs["in_memory"]) == 160
    assert outputs["in_memory"] == outputs["multi_processing"]


def test_warc_to_parquet_to_jsonl_keeps_every_document(data_dir, tmp_path):
    warc = data_dir / "warc" / "clueweb09-ja_quirk.warc.gz"
    assert main(["run", "convert", "--input", str(warc), "--output", str(tmp_path / "direct")]) == 0
    assert (
        main(["run", "convert", "--input", str(warc), "--output", str(tmp_path / "pq"), "--output_format", "parquet"])
        == 0
    )
    assert pq.read_metadata(next((tmp_path / "pq").glob("part-*.parquet"))).num_rows == 29
    assert (
        main(["run", "convert", "--input", str(tmp_path / "pq" / "*.parquet"), "--output", str(tmp_path / "back")]) == 0
    )
    assert _jsonl_rows(tmp_path / "back") == _jsonl_rows(tmp_path / "direct")


def test_input_ranges_read_parts_of_files_and_exclude_input(faults_set, tmp_path, capsys):
    warcs, _ = faults_set
    files = sorted(warcs.glob("*.warc.gz"))
    ranges = tmp_path / "inputs.json"
    write_input_ranges([InputFile(str(path), path.name, path.stat().st_size) for path in files[1:]], str(ranges))
    both = ["run", "convert", "--input_ranges", str(ranges), "--input_format", "warc", "--output"]
    assert main([*both, str(tmp_path / "listed")]) == 0
    assert (
        main(
            [
                "run",
                "convert",
                "--input",
                str(files[1]),
                "--input",
                str(files[2]),
                "--output",
                str(tmp_path / "globbed"),
            ]
        )
        == 0
    )
    assert _jsonl_rows(tmp_path / "listed") == _jsonl_rows(tmp_path / "globbed")
    assert main([*both, str(tmp_path / "x"), "--input", str(files[0])]) == 2
    assert "--input_ranges replaces --input" in capsys.readouterr().err
