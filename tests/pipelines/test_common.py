"""What pipelines share: their inputs and readers, and where they write."""

from __future__ import annotations

import csv
import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.fs import InputFile, write_input_ranges
from beamtrove.pipelines.common import (
    document_reader,
    documents_sink,
    input_files,
    reader_settings,
    row_reader,
    warc_reader,
)
from beamtrove.transforms.readers import ReadCsv, ReadJsonl, ReadWarc
from tests.conftest import require


def test_the_input_is_the_patterns_or_the_listed_ranges_never_both(data_dir, tmp_path):
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    assert input_files(PipelineOptions(["--input", warc, "--input", "b"])) == [warc, "b"]
    assert input_files(PipelineOptions([])) == []
    ranges = tmp_path / "ranges.json"
    write_input_ranges([InputFile(warc, "w.warc.gz", 10)], str(ranges))
    assert input_files(PipelineOptions(["--input_ranges", str(ranges)])) == [InputFile(warc, "w.warc.gz", 10)]
    with pytest.raises(ValueError, match="--input_ranges replaces --input"):
        input_files(PipelineOptions(["--input_ranges", str(ranges), "--input", warc]))
    ranges.write_text(json.dumps([{"path": warc}]))
    with pytest.raises(ValueError, match="is not a list of input files with url, name and size"):
        input_files(PipelineOptions(["--input_ranges", str(ranges)]))


def test_readers_follow_the_input_format_and_the_common_options(data_dir):
    warc = str(require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"))
    options = PipelineOptions(["--input", warc, "--skip", "2", "--limit", "5", "--progress_interval", "0"])
    assert reader_settings(options) == {"skip": 2, "limit": 5, "progress_interval": 0.0}
    reader = document_reader(options)
    assert isinstance(reader, ReadWarc) and [file.url for file in reader.files] == [warc]
    assert isinstance(warc_reader(options), ReadWarc)
    with pytest.raises(ValueError, match=r"reads extracted text \(JSONL, Parquet or CSV\), not WARC files"):
        row_reader(options)
    with pytest.raises(ValueError, match="--text_key and --id_key apply to JSONL, Parquet and CSV input, not WARC"):
        document_reader(PipelineOptions(["--input", warc, "--id_key", "url"]))
    with pytest.raises(ValueError, match="No input given: pass --input"):
        row_reader(PipelineOptions([]))


def test_the_reader_is_the_input_formats(movie_reviews, tmp_path):
    rows = [{"text": text, "review": name} for name, text in list(movie_reviews.items())[:5]]
    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    with (tmp_path / "reviews.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, ["text", "review"])
        writer.writeheader()
        writer.writerows(rows)
    assert isinstance(document_reader(PipelineOptions(["--input", str(tmp_path / "reviews.jsonl")])), ReadJsonl)
    assert isinstance(document_reader(PipelineOptions(["--input", str(tmp_path / "reviews.csv")])), ReadCsv)
    # A directory needs its format named; only the files of that format are read.
    with pytest.raises(ValueError, match="Cannot tell the input format"):
        document_reader(PipelineOptions(["--input", str(tmp_path)]))
    chosen = document_reader(PipelineOptions(["--input", str(tmp_path), "--input_format", "csv", "--id_key", "review"]))
    assert isinstance(chosen, ReadCsv) and [file.name for file in chosen.files] == ["reviews.csv"]


def test_documents_go_to_the_documents_folder_of_the_output():
    sink = documents_sink(PipelineOptions(["--max_file_size", "1000"]), "gs://bucket/run")
    assert (sink.label, sink.documents_dir) == ("WriteDocuments", "gs://bucket/run/documents")
    assert sink.transform._max_file_size == 1000 and sink.transform._template.template == "part-${shard}.jsonl.gz"
