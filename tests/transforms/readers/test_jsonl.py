"""ReadJsonl on real multilingual text (the UDHR in 388 languages)."""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import lzma
import zlib

import apache_beam as beam
import fsspec
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import MAX_NESTING, Document, Media
from beamtrove.fs import InputFile
from beamtrove.transforms.readers import ReadJsonl
from tests.conftest import jsonl_rows, run_and_collect

COMPRESSORS = {".jsonl": lambda b: b, ".jsonl.gz": gzip.compress, ".jsonl.zst": zstandard.ZstdCompressor().compress}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_reads_plain_gzip_and_zstd_files(tmp_path, udhr_texts, suffix):
    languages = sorted(udhr_texts)[:50]
    lines = [json.dumps({"id": lang, "text": udhr_texts[lang], "lang": lang}, ensure_ascii=False) for lang in languages]
    (tmp_path / f"udhr{suffix}").write_bytes(COMPRESSORS[suffix](("\n".join(lines) + "\n").encode("utf-8")))
    expected = [
        Document(
            text=udhr_texts[lang],
            id=lang,
            metadata={"lang": lang, "file_path": str(tmp_path / f"udhr{suffix}")},
        )
        for lang in languages
    ]

    def build(pipeline):
        assert_that(pipeline | ReadJsonl(str(tmp_path / f"*{suffix}")), equal_to(expected))

    stats = run_and_collect(build)
    assert stats["ReadJsonl"]["counters"]["in"] == stats["ReadJsonl"]["counters"]["out"] == 50


def test_malformed_lines_are_dead_lettered_with_line_numbers(tmp_path, udhr_texts):
    good = [json.dumps({"text": udhr_texts[lang]}, ensure_ascii=False) for lang in ("eng", "fra", "deu")]
    lines = [
        good[0],
        '{"text": "unterminated',  # line 2
        "",  # blank lines are not records
        '["a list", "not an object"]',  # line 4
        good[1],
        '{"title": "no text field"}',  # line 6
        '{"text": 42}',  # line 7
        good[2],
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def build(pipeline):
        docs, dead = pipeline | ReadJsonl(str(path)).with_dead_letters()
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.text[:40])),
            equal_to(_expected_ids(udhr_texts)),
            label="Documents",
        )
        assert_that(
            dead | beam.Map(lambda d: (d.reason, d.line, d.file)),
            equal_to(
                [
                    ("malformed_json", 2, str(path)),
                    ("not_an_object", 4, str(path)),
                    ("missing_text", 6, str(path)),
                    ("text_not_a_string", 7, str(path)),
                ]
            ),
            label="DeadLetters",
        )

    stats = run_and_collect(build)
    counters = stats["ReadJsonl"]["counters"]
    assert counters["in"] == 7
    assert counters["out"] == 3
    assert counters["errors.malformed_json"] == 1
    assert counters["errors.not_an_object"] == 1
    assert counters["errors.missing_text"] == 1
    assert counters["errors.text_not_a_string"] == 1


def _expected_ids(udhr_texts):
    # ids fall back to <file name>/<0-based line index>, blank lines included
    return [
        ("mixed.jsonl/0", udhr_texts["eng"][:40]),
        ("mixed.jsonl/4", udhr_texts["fra"][:40]),
        ("mixed.jsonl/7", udhr_texts["deu"][:40]),
    ]


def test_field_mapping_metadata_precedence_and_media(tmp_path, udhr_texts):
    row = {
        "content": udhr_texts["spa"],
        "doc_id": 17,
        "metadata": {"url": "https://www.ohchr.org/es", "source": "nested"},
        "source": "top-level",
        "media": [{"id": "m1", "type": 0, "url": "https://www.ohchr.org/logo.png", "media_bytes": "iVBORw=="}],
    }
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = Document(
        text=udhr_texts["spa"],
        id="17",
        media=[Media(id="m1", type=0, url="https://www.ohchr.org/logo.png", media_bytes=b"\x89PNG")],
        metadata={
            "dump": "CC-MAIN-2024-22",
            "url": "https://www.ohchr.org/es",
            "source": "top-level",
            "file_path": str(path),
        },
    )

    def build(pipeline):
        docs = pipeline | ReadJsonl(
            str(path), text_key="content", id_key="doc_id", default_metadata={"dump": "CC-MAIN-2024-22"}
        )
        assert_that(docs, equal_to([expected]))

    run_and_collect(build)


def test_memory_filesystem_urls(udhr_texts):
    fs = fsspec.filesystem("memory")
    fs.pipe("memory://beamtrove-tests/udhr/part.jsonl", json.dumps({"text": udhr_texts["jpn"]}).encode() + b"\n")

    def build(pipeline):
        docs = pipeline | ReadJsonl("memory://beamtrove-tests/udhr/*.jsonl")
        assert_that(docs | beam.Map(lambda d: (d.id, d.text)), equal_to([("part.jsonl/0", udhr_texts["jpn"])]))

    run_and_collect(build)


def test_malformed_media_costs_only_its_line(tmp_path, udhr_texts):
    path = tmp_path / "media.jsonl"
    rows = [
        {
            "text": udhr_texts["eng"],
            "media": [{"id": "m", "type": 0, "url": "https://ohchr.org/a.png", "media_bytes": "abc"}],
        },
        {"text": udhr_texts["fra"], "media": [{"id": "m", "type": 0, "url": "https://ohchr.org/b.png", "size": 3}]},
        {"text": udhr_texts["deu"]},
        # Bytes that are a number: base64 cannot encode them, so the coder could not store the document.
        {
            "text": udhr_texts["spa"],
            "media": [{"id": "m", "type": 0, "url": "https://ohchr.org/c.png", "media_bytes": 7}],
        },
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    def build(pipeline):
        docs, dead = pipeline | ReadJsonl(str(path)).with_dead_letters()
        assert_that(docs | beam.Map(lambda d: d.id), equal_to(["media.jsonl/2"]), label="Docs")
        assert_that(
            dead | beam.Map(lambda d: (d.reason, d.line)),
            equal_to([("malformed_media", 1), ("malformed_media", 2), ("malformed_media", 4)]),
            label="Dead",
        )

    stats = run_and_collect(build)
    assert stats["ReadJsonl"]["counters"]["errors.malformed_media"] == 3


def test_byte_ranges_read_as_the_whole_file_does(tmp_path, udhr_texts):
    # Rows without ids (named by line index), blank lines between them and a malformed row: the parts
    # must give the same documents, ids and dead-letter line numbers as one read of the whole file.
    languages = sorted(udhr_texts)[:30]
    lines = [json.dumps({"text": udhr_texts[lang], "lang": lang}, ensure_ascii=False) for lang in languages]
    lines[7:7] = ["", "{not json"]
    data = ("\n".join(lines) + "\n\n").encode("utf-8")
    path = tmp_path / "udhr.jsonl"
    path.write_bytes(data)
    line_starts = [0, *[i + 1 for i, byte in enumerate(data) if byte == ord("\n")][:-1]]
    cuts = [0, line_starts[5], line_starts[8], line_starts[20], len(data)]
    parts = [
        InputFile(str(path), "udhr.jsonl", end - start, start, end, line_starts.index(start))
        for start, end in itertools.pairwise(cuts)
    ]
    expected = [
        Document(
            text=udhr_texts[lang],
            id=f"udhr.jsonl/{index + 2 if index >= 7 else index}",
            metadata={"lang": lang, "file_path": str(path)},
        )
        for index, lang in enumerate(languages)
    ]

    def build(pipeline):
        for label, paths in (("Whole", str(path)), ("Ranged", parts)):
            documents, errors = pipeline | label >> ReadJsonl(paths).with_dead_letters()
            assert_that(documents, equal_to(expected), label=f"{label}Documents")
            errors = errors | f"{label}Where" >> beam.Map(lambda letter: (letter.reason, letter.line))
            assert_that(errors, equal_to([("malformed_json", 9)]), label=f"{label}Errors")

    stats = run_and_collect(build)
    assert stats["Ranged"]["counters"]["out"] == 30
    # One file, read in four pieces.
    assert stats["Ranged"]["counters"]["files"] == 1
    assert stats["Ranged"]["counters"]["bytes"] == len(data)


def test_byte_ranges_of_compressed_files_are_refused(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "x"}\n'))
    with pytest.raises(ValueError, match="compressed file"):
        ReadJsonl([InputFile(str(path), path.name, 5, 0, 5)])


def _nested(levels: int) -> dict:
    """A mapping ``levels`` dicts deep."""
    value = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_a_row_nested_too_deep_for_any_writer_is_a_dead_letter_and_the_run_completes(
    movie_reviews, tmp_path, output_format
):
    # Issue 16, case 8: metadata nested 500 deep ended the run ("TypeError: Document 'neg/...' has metadata that is
    # not JSON-compatible (Recursion limit reached)" in the document coder), with no stats.json.
    rows = [{"text": text, "id": name, "metadata": {"source": "movie_reviews"}} for name, text in movie_reviews.items()]
    rows = rows[:20]
    rows[3]["metadata"]["deep"] = _nested(500)
    rows[7]["metadata"]["deep"] = _nested(MAX_NESTING - 1)  # with the metadata mapping itself: the most kept
    jsonl = tmp_path / "reviews.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["run", "convert", "--input", str(jsonl), "--input_format", "jsonl", "--output", str(out)]
    assert main([*argv, "--output_format", output_format]) == 0

    steps = json.loads((out / "stats.json").read_text())["steps"]
    assert steps["read"]["counters"]["errors.nested_too_deep"] == 1
    assert steps["write"]["counters"]["out"] == 19
    # The deepest metadata kept reads back from either format.
    written = jsonl_rows(out) if output_format == "jsonl" else pq.read_table(next(out.glob("*.parquet"))).to_pylist()
    assert sorted(row["id"] for row in written) == sorted(row["id"] for row in rows if row is not rows[3])
    (dead,) = jsonl_rows(out / "dead_letters")
    assert (dead["reason"], dead["line"], dead["file"]) == ("nested_too_deep", 4, str(jsonl))
    assert dead["message"] == "metadata nests 501 levels of dicts and lists; beamtrove stores at most 100"


def _counted_once(counters: dict) -> bool:
    """Whether every line read was kept, skipped with a reason or errored with a reason."""
    return counters["in"] == counters.get("out", 0) + sum(
        count for name, count in counters.items() if name.startswith(("skipped.", "errors."))
    )


def test_a_jsonl_gz_cut_short_keeps_every_line_before_the_cut(tmp_path, movie_reviews):
    # Issue 29, case 5: a .jsonl.gz cut in the middle (an interrupted copy) gave 0 kept and one read_failed dead
    # letter, where 48 of its 100 lines decompress whole.
    rows = [{"id": name, "text": text} for name, text in list(movie_reviews.items())[:100]]
    whole = gzip.compress("".join(json.dumps(row) + "\n" for row in rows).encode())
    cut = whole[: len(whole) // 2]
    path = tmp_path / "in" / "reviews.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(cut)
    # Told apart from the reader: what zlib inflates of the cut bytes ends inside a line.
    readable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)
    whole_lines = readable.count(b"\n")
    assert 0 < whole_lines < 100
    assert not readable.endswith(b"\n")

    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(path), "--output", str(out)]) == 0

    assert sorted((row["id"], row["text"]) for row in jsonl_rows(out)) == sorted(
        (row["id"], row["text"]) for row in rows[:whole_lines]
    )
    # The piece of a line the cut left is part of the one loss, not a malformed_json line besides it.
    (dead,) = jsonl_rows(out / "dead_letters")
    assert (dead["reason"], dead["file"], dead["offset"], dead["line"]) == ("truncated", str(path), len(cut), 49)
    assert dead["message"].startswith(f"the gzip data ends at byte {len(cut)}, before its end marker")
    counters = json.loads((out / "stats.json").read_text())["steps"]["read"]["counters"]
    assert (counters["in"], counters["out"], counters["errors.truncated"]) == (whole_lines + 1, whole_lines, 1)
    assert _counted_once(counters)


@pytest.mark.parametrize(
    ("suffix", "compress", "readable"),
    [
        (
            ".jsonl.zst",
            zstandard.ZstdCompressor().compress,
            lambda cut: zstandard.ZstdDecompressor().decompressobj().decompress(cut),
        ),
        (".jsonl.xz", lzma.compress, lambda cut: lzma.LZMADecompressor().decompress(cut)),
        (".jsonl.bz2", lambda data: bz2.compress(data, 1), lambda cut: bz2.BZ2Decompressor().decompress(cut)),
    ],
)
def test_other_compressions_cut_short_keep_the_lines_before_the_cut(
    tmp_path, movie_reviews, suffix, compress, readable
):
    # zstd ended a cut file silently (its last line a malformed_json dead letter, the loss untold); xz and bz2 lost
    # the lines buffered before the cut.
    rows = [{"id": name, "text": text} for name, text in list(movie_reviews.items())[:300]]
    whole = compress("".join(json.dumps(row) + "\n" for row in rows).encode())
    path = tmp_path / f"reviews{suffix}"
    path.write_bytes(whole[: len(whole) // 2])
    whole_lines = readable(path.read_bytes()).count(b"\n")
    assert 0 < whole_lines < 300

    reader = ReadJsonl(str(path))
    *documents, dead = reader.read_file(reader.files[0])
    assert [document.id for document in documents] == [row["id"] for row in rows[:whole_lines]]
    assert (dead.reason, dead.file, dead.offset, dead.line) == (
        "truncated",
        str(path),
        path.stat().st_size,
        whole_lines + 1,
    )


def test_a_file_cut_inside_its_byte_range_is_one_truncated_dead_letter(tmp_path, udhr_texts):
    # --input_ranges were made from the whole file, which was then cut inside its last range: the lines before
    # the cut are read, the piece of a line is not a malformed_json line, and the lost lines are told.
    languages = sorted(udhr_texts)[:20]
    data = "".join(json.dumps({"text": udhr_texts[lang], "lang": lang}) + "\n" for lang in languages).encode()
    line_starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == ord("\n"))][:-1]
    path = tmp_path / "udhr.jsonl"
    parts = [
        InputFile(str(path), path.name, end - start, start, end, line_starts.index(start))
        for start, end in itertools.pairwise([0, line_starts[10], len(data)])
    ]
    cut = line_starts[15] + 20
    path.write_bytes(data[:cut])

    def build(pipeline):
        documents, dead = pipeline | ReadJsonl(parts).with_dead_letters()
        assert_that(
            documents | beam.Map(lambda d: d.id), equal_to([f"udhr.jsonl/{i}" for i in range(15)]), label="Docs"
        )
        assert_that(
            dead | beam.Map(lambda d: (d.reason, d.offset, d.line)), equal_to([("truncated", cut, 16)]), label="Dead"
        )

    counters = run_and_collect(build)["ReadJsonl"]["counters"]
    assert (counters["in"], counters["out"], counters["errors.truncated"]) == (16, 15, 1)
