"""ReadCsv on real text with quoted multi-line fields."""

from __future__ import annotations

import csv
import gzip
import io
import zlib

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.transforms.readers import ReadCsv
from tests.conftest import run_and_collect


def test_quoted_multiline_text_and_malformed_rows(tmp_path, udhr_texts):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["id", "text", "lang"])
    writer.writerow(["d1", udhr_texts["eng"], "eng"])
    writer.writerow(["d2", udhr_texts["rus"], "rus", "an extra field"])
    writer.writerow(["d3", udhr_texts["ell_monotonic"], "ell_monotonic"])
    writer.writerow(["d4"])
    path = tmp_path / "udhr.csv.gz"
    path.write_bytes(gzip.compress(buffer.getvalue().encode("utf-8")))
    lines_before_d2 = 1 + udhr_texts["eng"].count("\n") + 1
    rows_end = {
        "d2": lines_before_d2 + udhr_texts["rus"].count("\n") + 1,
        "d4": lines_before_d2 + udhr_texts["rus"].count("\n") + 1 + udhr_texts["ell_monotonic"].count("\n") + 2,
    }

    def build(pipeline):
        docs, dead = pipeline | ReadCsv(str(path)).with_dead_letters()
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.metadata["lang"], d.text == udhr_texts[d.metadata["lang"]])),
            equal_to([("d1", "eng", True), ("d3", "ell_monotonic", True)]),
            label="Docs",
        )
        assert_that(
            dead | beam.Map(lambda d: (d.reason, d.line)),
            equal_to([("malformed_row", rows_end["d2"]), ("malformed_row", rows_end["d4"])]),
            label="Dead",
        )

    stats = run_and_collect(build)
    assert stats["ReadCsv"]["counters"]["in"] == 4
    assert stats["ReadCsv"]["counters"]["errors.malformed_row"] == 2


def test_undecodable_bytes_end_the_file_with_a_dead_letter(tmp_path, udhr_texts):
    path = tmp_path / "latin1.csv"
    content = f"text\n{udhr_texts['eng'][:200]!r}\n".encode() + "Déclaration\n".encode("latin-1")
    path.write_bytes(content)

    def build(pipeline):
        docs, dead = pipeline | ReadCsv(str(path)).with_dead_letters()
        assert_that(docs | "Count" >> beam.combiners.Count.Globally(), equal_to([1]), label="Docs")
        assert_that(dead | beam.Map(lambda d: (d.reason, d.line)), equal_to([("malformed_csv", 3)]), label="Dead")

    run_and_collect(build)


def test_a_csv_gz_cut_short_keeps_the_rows_before_the_cut(tmp_path, movie_reviews):
    # Issue 29, case 5 for CSV: the rows a cut .csv.gz still holds were lost with one read_failed dead letter.
    reviews = list(movie_reviews.items())[:100]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["id", "text"])
    row_ends = []
    for review in reviews:
        writer.writerow(review)
        row_ends.append(len(buffer.getvalue().encode("utf-8")))
    whole = gzip.compress(buffer.getvalue().encode("utf-8"))
    path = tmp_path / "reviews.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    # Told apart from the reader: the rows (texts span lines) that zlib inflates whole from the cut bytes.
    readable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(path.read_bytes())
    whole_rows = sum(end <= len(readable) for end in row_ends)
    assert 0 < whole_rows < 100

    reader = ReadCsv(str(path))
    *documents, dead = reader.read_file(reader.files[0])
    assert [(document.id, document.text) for document in documents] == reviews[:whole_rows]
    assert (dead.reason, dead.file, dead.offset) == ("truncated", str(path), path.stat().st_size)
    # The first line of the row the cut fell in.
    assert dead.line == readable[: row_ends[whole_rows - 1]].count(b"\n") + 1
