"""WriteJsonl: DataTrove's row layout, templated names, rollover, atomic finalize."""

from __future__ import annotations

import collections
import gzip

import apache_beam as beam
import orjson
import pytest

from beamtrove.document import Document, Media
from beamtrove.transforms.readers import ReadJsonl, ReadWarc
from beamtrove.transforms.writers import FilenameTemplate, WriteJsonl
from tests.conftest import assert_same_documents, require, run_and_collect

REAL_WARCS = (
    "cc-main-2020-34_resiliparse_warcfile.warc.gz",
    "clueweb09-ja_quirk.warc.gz",
    "dolma_wget_sample-0001.warc.gz",
)


@pytest.fixture(scope="module")
def warc_paths(data_dir):
    return [str(require(data_dir / "warc" / name)) for name in REAL_WARCS]


def read_rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as lines:
        return [orjson.loads(line) for line in lines]


def test_round_trip_warc_to_jsonl_and_back_is_exact(tmp_path, warc_paths):
    def build(pipeline):
        pipeline | "ReadWarc" >> ReadWarc(warc_paths) | "Write" >> WriteJsonl(str(tmp_path / "out"))

    stats = run_and_collect(build)
    written_docs = stats["Write"]["counters"]["out"]
    assert written_docs == stats["ReadWarc"]["counters"]["out"] == 16 + 29 + 15
    assert not list((tmp_path / "out").glob(".beamtrove-tmp-*"))

    def reread(pipeline):
        original = pipeline | "ReadWarc" >> ReadWarc(warc_paths)
        again = pipeline | "ReadJsonl" >> ReadJsonl(str(tmp_path / "out"))
        assert_same_documents(original, again)

    run_and_collect(reread)


def test_rows_follow_datatroves_layout(tmp_path, udhr_texts):
    docs = [
        Document(text=udhr_texts["eng"], id="a", metadata={"url": "https://www.ohchr.org/en", "lang": "eng"}),
        Document(text=udhr_texts["jpn"], id="b"),
        Document(
            text=udhr_texts["fra"],
            id="c",
            media=[Media(id="m", type=0, url="https://www.ohchr.org/logo.png", media_bytes=b"\x89PNG")],
            metadata={"url": "https://www.ohchr.org/fr"},
        ),
    ]

    def build(pipeline):
        pipeline | beam.Create(docs) | WriteJsonl(str(tmp_path), "part-${shard}.jsonl")

    run_and_collect(build)
    lines = (tmp_path / "part-00000.jsonl").read_bytes().splitlines()
    rows = {orjson.loads(line)["id"]: line for line in lines}
    # Compact JSON, text then id then metadata; metadata keys come sorted out of a shuffle.
    assert rows["a"] == orjson.dumps(
        {"text": udhr_texts["eng"], "id": "a", "metadata": {"lang": "eng", "url": "https://www.ohchr.org/en"}}
    )
    assert rows["b"] == orjson.dumps({"text": udhr_texts["jpn"], "id": "b"})
    media_row = orjson.loads(rows["c"])
    assert list(media_row) == ["text", "id", "media", "metadata"]
    assert media_row["media"] == [
        {
            "id": "m",
            "type": 0,
            "url": "https://www.ohchr.org/logo.png",
            "alt": None,
            "path": None,
            "offset": None,
            "length": None,
            "media_bytes": "iVBORw==",
            "metadata": {},
        }
    ]
    # Non-ASCII is written as UTF-8, not escaped.
    assert udhr_texts["jpn"][:8].encode("utf-8") in rows["b"]


def test_templated_destinations_and_missing_fields(tmp_path, warc_paths):
    def build(pipeline):
        docs = pipeline | ReadWarc(warc_paths)
        docs | WriteJsonl(str(tmp_path), "${content_type}/${charset}/${missing}/part-${shard}.jsonl.gz")

    run_and_collect(build)
    counts = collections.Counter()
    for path in tmp_path.rglob("*.jsonl.gz"):
        for row in read_rows(path):
            relative = path.relative_to(tmp_path).parts
            assert relative[0] == row["metadata"]["content_type"].replace("/", "_")
            assert relative[1] == row["metadata"]["charset"]
            assert relative[2] == "unknown"
            counts[relative[:2]] += 1
    # Hand-counted from the pages' headers: 16 Common Crawl pages, 29 EUC-JP pages, 15 wget pages.
    assert counts == {
        ("text_html", "utf-8"): 5 + 15,
        ("text_html", "euc_jp"): 29,
        ("text_html", "cp1251"): 1,
        ("application_xhtml+xml", "utf-8"): 1,
        ("application_xhtml+xml", "utf-8-sig"): 1,
        ("application_xhtml+xml", "gb18030"): 6,
        ("application_xhtml+xml", "cp1252"): 2,
    }


def test_size_rollover_numbers_shards_contiguously(tmp_path, warc_paths):
    clueweb = next(path for path in warc_paths if "clueweb" in path)

    def build(pipeline):
        # One input file is one bundle, so only the bundle's last file may stay under the limit.
        docs = pipeline | ReadWarc(clueweb)
        docs | WriteJsonl(str(tmp_path), "part-${shard}.jsonl", max_file_size=100_000)

    stats = run_and_collect(build)
    files = sorted(tmp_path.glob("part-*.jsonl"))
    assert [f.name for f in files] == [f"part-{i:05d}.jsonl" for i in range(len(files))]
    sizes = [f.stat().st_size for f in files]
    largest_row = max(len(line) + 1 for f in files for line in f.read_bytes().splitlines())
    assert len(files) >= sum(sizes) // (100_000 + largest_row)
    assert all(size < 100_000 + largest_row for size in sizes)
    assert sum(size < 100_000 for size in sizes) == 1
    ids = [row["id"] for f in files for row in read_rows(f)]
    assert len(ids) == len(set(ids)) == 29
    assert stats["WriteJsonl"]["counters"]["files"] == len(files)


def test_same_input_gives_identical_files(tmp_path, warc_paths):
    for run in ("first", "second"):

        def build(pipeline, run=run):
            pipeline | ReadWarc(warc_paths) | WriteJsonl(str(tmp_path / run), max_file_size=500_000)

        run_and_collect(build)
    first = {p.name: p.read_bytes() for p in (tmp_path / "first").iterdir()}
    second = {p.name: p.read_bytes() for p in (tmp_path / "second").iterdir()}
    assert first == second
    assert len(first) > 1


def test_a_gzip_file_is_its_text_compressed_in_one_piece(tmp_path, warc_paths):
    # The bytes of a file depend on its text alone, not on how the writer cut its writes. ISA-L's stream depends
    # on that cut (benchmarks/gzip_writing.py), and once a rerun's file differed from the first run's.
    run_and_collect(lambda pipeline: pipeline | ReadWarc(warc_paths) | WriteJsonl(str(tmp_path / "out")))
    [written] = (tmp_path / "out").iterdir()
    text = gzip.decompress(written.read_bytes())
    assert text.count(b"\n") == 16 + 29 + 15
    # Past the 10-byte header (no name, no time; the byte naming the OS differs between Python's two writers).
    data = written.read_bytes()
    assert data[:8] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00"
    assert data[10:] == gzip.compress(text, compresslevel=1, mtime=0)[10:]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("part.jsonl", "needs a \\$\\{shard\\}"),
        ("/abs/part-${shard}.jsonl", "relative"),
        ("../x/${shard}.jsonl", "relative"),
    ],
)
def test_bad_templates_fail_at_construction(template, message):
    with pytest.raises(ValueError, match=message):
        FilenameTemplate(template)
