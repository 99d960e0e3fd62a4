"""ReadIpc on Arrow IPC files in the file format and the stream format."""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.readers import ReadIpc, reader_for
from tests.conftest import jsonl_rows, run_and_collect


def _write(path, rows: list[dict], stream: bool, batch_rows: int) -> None:
    table = pa.Table.from_pylist(rows)
    with (pa.ipc.new_stream if stream else pa.ipc.new_file)(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=batch_rows)


@pytest.mark.parametrize(("name", "stream"), [("udhr.arrow", False), ("udhr.arrows", True)])
def test_both_ipc_formats_read_back_the_documents_written(tmp_path, udhr_texts, name, stream):
    languages = sorted(udhr_texts)[:30]
    rows = [
        {"text": udhr_texts[lang], "id": lang, "metadata": {"lang": lang, **({"script": "Latn"} if i % 2 else {})}}
        for i, lang in enumerate(languages)
    ]
    path = tmp_path / name
    _write(path, rows, stream, batch_rows=7)
    # The metadata struct gives every row a "script", null where the row had none; that null is dropped.
    expected = [Document(text=r["text"], id=r["id"], metadata={**r["metadata"], "file_path": str(path)}) for r in rows]

    def build(pipeline):
        assert_that(pipeline | ReadIpc(str(tmp_path), batch_size=4), equal_to(expected))

    stats = run_and_collect(build)
    assert stats["ReadIpc"]["counters"] == {"in": 30, "out": 30, "files": 1, "bytes": path.stat().st_size}


def test_flat_columns_become_metadata_and_ids_count_rows_across_batches(tmp_path, udhr_texts):
    languages = ["eng", "fra", "deu", "spa", "ita"]
    _write(
        tmp_path / "flat.feather",
        [{"body": udhr_texts[lang], "lang": lang} for lang in languages],
        stream=False,
        batch_rows=2,
    )

    def build(pipeline):
        docs = pipeline | ReadIpc(str(tmp_path / "flat.feather"), text_key="body", default_metadata={"corpus": "udhr"})
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.metadata, d.text)),
            equal_to(
                [
                    (
                        f"flat.feather/{i}",
                        {"corpus": "udhr", "lang": lang, "file_path": str(tmp_path / "flat.feather")},
                        udhr_texts[lang],
                    )
                    for i, lang in enumerate(languages)
                ]
            ),
        )

    run_and_collect(build)


def test_a_stream_cut_short_keeps_the_batches_before_the_cut(tmp_path, udhr_texts):
    languages = sorted(udhr_texts)[:40]
    path = tmp_path / "cut.arrows"
    _write(path, [{"text": udhr_texts[lang]} for lang in languages], stream=True, batch_rows=10)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 4])

    def build(pipeline):
        docs, dead = pipeline | ReadIpc(str(path)).with_dead_letters()
        assert_that(docs | beam.Map(lambda d: d.id), equal_to([f"cut.arrows/{i}" for i in range(30)]), label="Docs")
        assert_that(dead | beam.Map(lambda d: (d.reason, d.line)), equal_to([("corrupt_ipc", 30)]), label="Dead")

    stats = run_and_collect(build)
    assert stats["ReadIpc"]["counters"] == {
        "in": 31,
        "out": 30,
        "errors.corrupt_ipc": 1,
        "files": 1,
        "bytes": len(data) * 3 // 4,
    }


def test_a_file_without_its_footer_is_one_dead_letter(tmp_path, udhr_texts):
    path = tmp_path / "cut.arrow"
    _write(path, [{"text": udhr_texts["eng"]}], stream=False, batch_rows=10)
    path.write_bytes(path.read_bytes()[:-20])

    def build(pipeline):
        docs, dead = pipeline | ReadIpc(str(path)).with_dead_letters()
        assert_that(docs, equal_to([]), label="Docs")
        assert_that(dead | beam.Map(lambda d: d.reason), equal_to(["corrupt_ipc"]), label="Dead")

    run_and_collect(build)


def test_input_format_auto_knows_ipc_file_names():
    assert reader_for("auto", ["a/part-0.arrow", "b/part-1.feather"]) is ReadIpc
    assert reader_for("auto", "a/*.arrows") is ReadIpc
    assert reader_for("ipc", "a/data.bin") is ReadIpc


def test_convert_reads_ipc_files(tmp_path, movie_reviews):
    reviews = list(movie_reviews.items())[:50]
    _write(tmp_path / "reviews.arrow", [{"text": t, "review": n} for n, t in reviews], stream=False, batch_rows=16)
    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(tmp_path / "reviews.arrow"), "--output", str(out)]) == 0

    rows = sorted(jsonl_rows(out), key=lambda row: int(row["id"].split("/")[1]))
    assert [(row["id"], row["text"], row["metadata"]["review"]) for row in rows] == [
        (f"reviews.arrow/{i}", text, name) for i, (name, text) in enumerate(reviews)
    ]
    steps = json.loads((out / "stats.json").read_text())["steps"]
    assert steps["read"]["counters"]["out"] == 50
