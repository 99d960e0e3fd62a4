"""ReadParquet on files laid out as DataTrove's ParquetWriter lays them out."""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.readers import ReadParquet
from tests.conftest import jsonl_rows, run_and_collect


def test_struct_metadata_reads_back_without_the_nulls_parquet_adds(tmp_path, udhr_texts):
    languages = sorted(udhr_texts)[:30]
    rows = [
        {"text": udhr_texts[lang], "id": lang, "metadata": {"lang": lang, **({"script": "Latn"} if i % 2 else {})}}
        for i, lang in enumerate(languages)
    ]
    path = tmp_path / "udhr.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=7)
    expected = [Document(text=r["text"], id=r["id"], metadata={**r["metadata"], "file_path": str(path)}) for r in rows]

    def build(pipeline):
        assert_that(pipeline | ReadParquet(str(path), batch_size=4), equal_to(expected))

    stats = run_and_collect(build)
    assert stats["ReadParquet"]["counters"]["out"] == 30


def test_flat_columns_become_metadata_and_ids_fall_back_to_row_index(tmp_path, udhr_texts):
    table = pa.table({"body": [udhr_texts["eng"], udhr_texts["fra"]], "lang": ["eng", "fra"]})
    pq.write_table(table, tmp_path / "flat.parquet")

    def build(pipeline):
        docs = pipeline | ReadParquet(str(tmp_path), text_key="body")
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.metadata["lang"], d.text == udhr_texts[d.metadata["lang"]])),
            equal_to([("flat.parquet/0", "eng", True), ("flat.parquet/1", "fra", True)]),
        )

    run_and_collect(build)


def test_a_damaged_file_keeps_the_rows_before_the_damage(tmp_path, udhr_texts):
    languages = sorted(udhr_texts)[:40]
    path = tmp_path / "damaged.parquet"
    pq.write_table(pa.table({"text": [udhr_texts[lang] for lang in languages]}), path, row_group_size=20)
    data = bytearray(path.read_bytes())
    # Spoil the snappy-compressed dictionary page of the second row group.
    second_group = pq.ParquetFile(path).metadata.row_group(1).column(0).dictionary_page_offset
    data[second_group + 100 : second_group + 164] = b"\xff" * 64
    path.write_bytes(bytes(data))

    def build(pipeline):
        docs, dead = pipeline | ReadParquet(str(path), batch_size=20).with_dead_letters()
        assert_that(
            docs | beam.Map(lambda d: d.id), equal_to([f"damaged.parquet/{i}" for i in range(20)]), label="Docs"
        )
        assert_that(dead | beam.Map(lambda d: (d.reason, d.line)), equal_to([("corrupt_parquet", 20)]), label="Dead")

    stats = run_and_collect(build)
    assert stats["ReadParquet"]["counters"] == {
        "in": 21,
        "out": 20,
        "errors.corrupt_parquet": 1,
        "files": 1,
        "bytes": len(data),
    }


def test_rows_with_values_json_cannot_store_are_dead_letters_and_the_run_completes(movie_reviews, tmp_path):
    # Issue 16, case 8: a binary column's bytes reached the document coder, whose TypeError ended the run.
    reviews = list(movie_reviews.items())[:10]
    raw = [text[:40].encode() if row in (2, 5) else None for row, (_, text) in enumerate(reviews)]
    table = pa.table(
        {"text": [text for _, text in reviews], "id": [name for name, _ in reviews], "raw": pa.array(raw, pa.binary())}
    )
    path = tmp_path / "reviews.parquet"
    pq.write_table(table, path)
    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(path), "--output", str(out)]) == 0

    steps = json.loads((out / "stats.json").read_text())["steps"]
    assert steps["read"]["counters"]["errors.not_json"] == 2
    assert steps["write"]["counters"]["out"] == 8
    dead = sorted(jsonl_rows(out / "dead_letters"), key=lambda letter: letter["line"])
    assert [(letter["reason"], letter["line"]) for letter in dead] == [("not_json", 2), ("not_json", 5)]
    assert dead[0]["message"] == "metadata['raw'] cannot be stored as JSON: Type is not JSON serializable: bytes"


def test_a_parquet_file_cut_short_is_one_dead_letter_naming_it(tmp_path, udhr_texts):
    # A Parquet file keeps its row index in its footer: cut short, none of its rows can be found, so the file is
    # one dead letter (not a crash, not silence), and the run goes on.
    languages = sorted(udhr_texts)[:40]
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"text": [udhr_texts[lang] for lang in languages]}), path, row_group_size=10)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    reader = ReadParquet(str(path))
    (dead,) = reader.read_file(reader.files[0])
    assert (dead.reason, dead.file) == ("corrupt_parquet", str(path))
    assert "footer" in dead.message
