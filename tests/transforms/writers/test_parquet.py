"""WriteParquet: DataTrove's columns, schema changes without lost fields, exact round trips."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from beamtrove.document import Document, Media
from beamtrove.transforms.readers import ReadParquet, ReadWarc
from beamtrove.transforms.writers import WriteParquet
from tests.conftest import assert_same_documents, require, run_and_collect


def test_round_trip_warc_to_parquet_and_back_is_exact(tmp_path, data_dir):
    # WARC and WET documents differ in metadata (no http_status in WET conversions).
    paths = [
        str(require(data_dir / "warc" / name))
        for name in (
            "cc-main-2020-34_resiliparse_warcfile.warc.gz",
            "cc-main-2024-22_whirlwind.warc.wet.gz",
            "dolma_wget_sample-0000.warc.gz",
        )
    ]

    def build(pipeline):
        pipeline | ReadWarc(paths) | WriteParquet(str(tmp_path), row_group_size=5)

    stats = run_and_collect(build)
    assert stats["WriteParquet"]["counters"]["out"] == 16 + 1 + 22
    schema = pq.read_schema(next(tmp_path.glob("*.parquet")))
    assert schema.names == ["text", "id", "metadata"]
    assert schema.field("text").type == pa.string() and schema.field("id").type == pa.string()
    assert pa.types.is_struct(schema.field("metadata").type)

    def reread(pipeline):
        assert_same_documents(pipeline | "Warc" >> ReadWarc(paths), pipeline | "Parquet" >> ReadParquet(str(tmp_path)))

    run_and_collect(reread)


def _documents(udhr_texts):
    languages = sorted(udhr_texts)[:60]
    docs = []
    for i, lang in enumerate(languages):
        metadata = {"lang": lang, "position": i}
        if i >= 25:
            metadata["script"] = "Latn" if i % 2 else "Other"  # a field later documents add
        if 40 <= i < 45:
            metadata["position"] = f"#{i}"  # the same field with another type
        media = [Media(id=f"m{i}", type=0, url=f"https://ohchr.org/{lang}.png")] if i % 7 == 0 else []
        docs.append(Document(text=udhr_texts[lang], id=f"{i:03d}-{lang}", media=media, metadata=metadata))
    return docs


def test_changing_metadata_starts_new_files_and_loses_nothing(tmp_path, udhr_texts):
    docs = _documents(udhr_texts)

    def build(pipeline):
        pipeline | beam.Create(docs, reshuffle=False) | WriteParquet(str(tmp_path), row_group_size=10)

    stats = run_and_collect(build)
    files = sorted(tmp_path.glob("*.parquet"))
    assert len(files) > 1
    assert sum(pq.read_metadata(f).num_rows for f in files) == 60
    assert stats["WriteParquet"]["counters"] == {"in": 60, "out": 60, "files": len(files), "bytes": _size(files)}

    def reread(pipeline):
        again = pipeline | ReadParquet(str(tmp_path)) | "DropFilePath" >> beam.Map(_without_file_path)
        assert_same_documents(pipeline | "Original" >> beam.Create(docs), again)

    run_and_collect(reread)


def _without_file_path(doc):
    doc.metadata.pop("file_path")
    return doc


def _size(files):
    return sum(f.stat().st_size for f in files)
