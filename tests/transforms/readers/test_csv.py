"""ReadCsv on real text with quoted multi-line fields."""

from __future__ import annotations

import csv
import gzip
import io

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
