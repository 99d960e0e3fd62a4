"""What pipelines share: their inputs and readers, and where they write."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.cli import main
from beamtrove.fs import InputFile
from beamtrove.input_ranges import write_input_ranges
from beamtrove.network import RetryPolicy
from beamtrove.pipelines.common import (
    document_reader,
    documents_sink,
    input_files,
    reader_settings,
    row_reader,
    warc_reader,
)
from beamtrove.transforms.readers import ReadCsv, ReadJsonl, ReadWarc
from tests.conftest import jsonl_rows, require


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
    assert reader_settings(options) == {
        "skip": 2,
        "limit": 5,
        "progress_interval": 0.0,
        "retries": RetryPolicy(attempts=8, first_wait=1.0, read_timeout=60.0),
    }
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
    assert (sink.label, sink.documents_dir) == ("write_documents", "gs://bucket/run/documents")
    assert sink.transform._max_file_size == 1000 and sink.transform._template.template == "part-${shard}.jsonl.gz"


def _run(pipeline: str, *args: str) -> int:
    return main(["run", pipeline, *args, "--progress_interval", "0"])


def _read_counters(output) -> dict:
    return json.loads((output / "stats.json").read_text())["steps"]["read"]["counters"]


@pytest.fixture(scope="module")
def kept_nothing(review_jsonl, tmp_path_factory):
    """A filter run over the 600 reviews that kept none: its folder holds excluded/ and dead_letters/ only."""
    output = tmp_path_factory.mktemp("kept-nothing") / "run"
    assert _run("filter", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(output),
                "--steps", "fineweb_quality") == 0  # fmt: skip
    assert sorted(path.name for path in output.iterdir()) == ["dead_letters", "excluded", "report.html", "stats.json"]
    return output


@pytest.mark.parametrize("pipeline", [("convert",), ("filter", "--steps", "pii"), ("dedup", "--dedup", "exact")])
def test_a_run_that_kept_nothing_is_an_empty_input_never_its_exclusions_or_dead_letters(
    kept_nothing, tmp_path, caplog, pipeline
):
    output = tmp_path / "out"
    # No --input_format: a run's documents are JSONL, even when it kept none.
    assert _run(pipeline[0], "--input", str(kept_nothing), *pipeline[1:], "--output", str(output)) == 0
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warnings == [
        f"Input {str(kept_nothing)!r} is the output of a beamtrove run that kept no document, so it is an empty "
        "input: what it set aside (dead_letters/, excluded/) is not read; name such a folder "
        f"({kept_nothing / 'dead_letters'}) to read it."
    ]
    # No counter: nothing read, and no no_match dead letter when the run starts; nothing written but the run's books.
    assert _read_counters(output) == {"in": 0, "out": 0}
    assert sorted(path.name for path in output.iterdir()) == ["report.html", "stats.json"]


def test_beside_another_input_a_run_that_kept_nothing_adds_nothing(kept_nothing, review_jsonl, movie_reviews, tmp_path):
    output = tmp_path / "out"
    assert _run("convert", "--input", str(review_jsonl), "--input", str(kept_nothing), "--output", str(output)) == 0
    counters = _read_counters(output)
    # The 3 files of reviews, their 600 rows and malformed one: not one of the 600 excluded/ rows or the dead letter.
    assert (counters["in"], counters["out"], counters["errors.malformed_json"], counters["files"]) == (601, 600, 1, 3)
    assert sorted(row["text"] for row in jsonl_rows(output)) == sorted(list(movie_reviews.values())[:600])


def test_what_a_run_set_aside_is_read_when_named_outright(kept_nothing, tmp_path):
    output = tmp_path / "dropped"
    assert _run("convert", "--input", str(kept_nothing / "excluded"), "--output", str(output)) == 0
    assert _read_counters(output)["out"] == 600


@pytest.fixture(scope="module")
def converted(review_jsonl, tmp_path_factory) -> dict:
    """The 600 reviews converted to JSONL and to Parquet: documents in the run's folder itself, beside dead_letters/."""
    runs = {}
    for output_format in ("jsonl", "parquet"):
        output = tmp_path_factory.mktemp("converted") / output_format
        assert _run("convert", "--input", str(review_jsonl), "--input_format", "jsonl", "--output", str(output),
                    "--output_format", output_format) == 0  # fmt: skip
        assert (output / "dead_letters" / "part-00000.jsonl").is_file()
        runs[output_format] = output
    return runs


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_a_run_writing_documents_into_its_folder_is_read_without_its_dead_letters(converted, tmp_path, output_format):
    run = converted[output_format]
    output = tmp_path / "again"
    # No --input_format: the format is that of the documents, not of the dead letters beside them.
    assert _run("convert", "--input", str(run), "--output", str(output)) == 0
    counters = _read_counters(output)
    assert (counters["in"], counters["out"]) == (600, 600)
    assert not (output / "dead_letters").exists()
    assert sorted(row["id"] for row in jsonl_rows(output)) == sorted(_ids(run, output_format))


def _ids(run, output_format: str) -> list[str]:
    if output_format == "jsonl":
        return [row["id"] for row in jsonl_rows(run)]
    return pq.read_table(run / "part-00000.parquet", columns=["id"]).column("id").to_pylist()


@pytest.mark.slow
def test_the_folder_of_dump_runs_stands_for_the_documents_they_kept(data_dir, tmp_path):
    output = tmp_path / "fineweb"
    assets = ["--lid_model", str(require(data_dir / "models" / "lid176" / "lid.176.ftz")),
              "--url_blocklist", str(require(data_dir / "blocklists" / "ut1"))]  # fmt: skip
    warcs = str(require(data_dir / "warc") / "*.warc.gz")
    assert _run("fineweb", "--input", warcs, "--output", str(output), "--dump", "CC-MAIN-2024-22",
                "--extractor", "resiliparse", "--extract_timeout", "0", *assets) == 0  # fmt: skip
    run = output / "CC-MAIN-2024-22"
    kept = jsonl_rows(run / "documents")
    assert kept and (run / "excluded").is_dir()

    assert _run("convert", "--input", str(output), "--output", str(tmp_path / "copy")) == 0
    assert sorted(row["id"] for row in jsonl_rows(tmp_path / "copy")) == sorted(row["id"] for row in kept)


@pytest.mark.parametrize("empty", ["", " ", "\t"])
def test_an_empty_input_is_refused_not_read_as_the_current_directory(
    movie_reviews, tmp_path, monkeypatch, capsys, empty
):
    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in movie_reviews.values()))
    monkeypatch.chdir(tmp_path)
    for given in (["--input", empty], [f"--input={empty}"], ["--input", "reviews.jsonl", "--input", empty]):
        assert _run("convert", *given, "--input_format", "jsonl", "--output", "out") == 2
        message = capsys.readouterr().err
        assert message.startswith(f"beamtrove: error: An input path is empty ({empty!r}), which would read the current")
        assert message.count("\n") == 1
        assert sorted(path.name for path in tmp_path.iterdir()) == ["reviews.jsonl"]


def test_files_and_folders_named_outright_are_read_whatever_their_names_hold(movie_reviews, tmp_path):
    texts = list(movie_reviews.values())
    (tmp_path / "crawl[1].jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:5]))
    (tmp_path / "run [old]").mkdir()
    (tmp_path / "run [old]" / "part.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[5:8]))
    for number, (given, expected) in enumerate((("crawl[1].jsonl", texts[:5]), ("run [old]", texts[5:8]))):
        output = tmp_path / f"out-{number}"
        assert _run("convert", "--input", str(tmp_path / given), "--output", str(output)) == 0
        assert [row["text"] for row in jsonl_rows(output)] == expected
