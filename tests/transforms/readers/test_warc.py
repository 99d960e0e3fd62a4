"""ReadWarc against warcio's own iteration of the real WARC files in ../shared/data/warc."""

from __future__ import annotations

import dataclasses
import glob
import gzip
import io
import pathlib
import shutil
import urllib.parse

import apache_beam as beam
import pytest
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from beamtrove.transforms.readers import ReadWarc
from tests.conftest import require, run_and_collect

HTML = ("text/html", "application/xhtml+xml")


@dataclasses.dataclass
class WarcioRecord:
    offset: int
    type: str
    url: str | None
    record_id: str | None
    date: str | None
    payload_type: str | None
    status: str | None
    payload: bytes


def warcio_records(path: pathlib.Path) -> list[WarcioRecord]:
    """Every record warcio itself yields, up to the point where it gives up."""
    records = []
    with open(path, "rb") as stream:
        iterator = ArchiveIterator(stream, arc2warc=True)
        try:
            for record in iterator:
                headers = record.rec_headers
                http = record.http_headers
                if record.rec_type == "response":
                    identified = headers.get_header("WARC-Identified-Payload-Type")
                    declared = http.get_header("Content-Type") if http else None
                    payload_type = identified or declared
                else:
                    payload_type = headers.get_header("Content-Type")
                records.append(
                    WarcioRecord(
                        iterator.offset,
                        record.rec_type,
                        headers.get_header("WARC-Target-URI"),
                        headers.get_header("WARC-Record-ID"),
                        headers.get_header("WARC-Date"),
                        payload_type.split(";")[0].strip().lower() if payload_type else None,
                        http.get_statuscode() if http else None,
                        record.content_stream().read(),
                    )
                )
        except ArchiveLoadFailed:
            pass
    return records


def expected_documents(records: list[WarcioRecord]) -> list[WarcioRecord]:
    return [
        r
        for r in records
        if r.payload and (r.type == "conversion" or (r.type in ("response", "resource") and r.payload_type in HTML))
    ]


# Hand-checked against ../shared/data/warc/SOURCE.txt: (records read, documents).
REAL_FILES = {
    "cc-main-2020-34_resiliparse_warcfile.warc.gz": (50, 16),
    "cc-main-2024-22_whirlwind.warc.gz": (4, 1),
    "cc-main-2024-22_whirlwind.warc.wet.gz": (2, 1),
    "cc-main-2024-22_whirlwind.warc.wat.gz": (2, 0),
    "clueweb09-ja_quirk.warc.gz": (30, 29),
    "dolma_wget_sample-0000.warc.gz": (48, 22),
    "dolma_wget_sample-0001.warc.gz": (34, 15),
    "warcio-edge-cases/example.warc.gz": (6, 1),
    "warcio-edge-cases/example.arc.gz": (2, 1),
    "warcio-edge-cases/example-resource.warc.gz": (3, 1),
    "warcio-edge-cases/example-iana.org-chunked.warc": (3, 1),
    "warcio-edge-cases/example-space-in-target-uri.warc.gz": (2, 0),
    "warcio-edge-cases/example-wget-bad-target-uri.warc.gz": (6, 1),
}


to_urls = beam.Map(lambda d: d.metadata["url"])
to_places = beam.Map(lambda d: (d.reason, d.file, d.offset))


def _document_key(doc):
    return (
        doc.metadata["file_path"],
        doc.id,
        doc.metadata["url"],
        doc.metadata["date"],
        doc.metadata.get("http_status"),
        doc.metadata["offset"],
    )


def _expected_key(path: pathlib.Path, record: WarcioRecord):
    # ARC files have no stable record ids (warcio invents one per read).
    record_id = f"{path.name}/{record.offset}" if ".arc" in path.name else record.record_id
    return (str(path), record_id, record.url, record.date, int(record.status) if record.status else None, record.offset)


def _texts_are_the_payloads(records: dict[tuple[str, int], bytes]):
    def check(documents):
        for doc in documents:
            payload = records[(doc.metadata["file_path"], doc.metadata["offset"])]
            if doc.text != payload.decode(doc.metadata["charset"]):
                raise BeamAssertException(f"{doc.metadata['url']}: text differs from the decoded payload")

    return check


def test_every_real_warc_matches_warcios_iteration(data_dir):
    paths = [require(data_dir / "warc" / name) for name in REAL_FILES]
    records = {path: warcio_records(path) for path in paths}
    for path, (records_read, documents) in zip(paths, REAL_FILES.values(), strict=True):
        assert (len(records[path]), len(expected_documents(records[path]))) == (records_read, documents), path
    expected_keys = [_expected_key(p, r) for p in paths for r in expected_documents(records[p])]
    payloads = {(str(p), r.offset): r.payload for p in paths for r in records[p]}

    def build(pipeline):
        docs = pipeline | ReadWarc([str(p) for p in paths])
        assert_that(docs | beam.Map(_document_key), equal_to(expected_keys), label="Documents")
        assert_that(docs, _texts_are_the_payloads(payloads), label="Texts")

    stats = run_and_collect(build)
    counters = stats["ReadWarc"]["counters"]
    all_records = [r for p in paths for r in records[p]]
    assert counters["in"] == len(all_records) == sum(n for n, _ in REAL_FILES.values())
    assert counters["out"] == len(expected_keys)
    for record_type in ("warcinfo", "request", "metadata", "revisit"):
        assert counters[f"skipped.{record_type}_record"] == sum(r.type == record_type for r in all_records)
    non_html = [r for r in all_records if r.type in ("response", "resource") and r.payload_type not in HTML]
    # the PNG resource and the text/plain resources wget writes (arguments, log) in three files
    assert counters["skipped.non_html_payload"] == len(non_html) == 7
    assert not any(key.startswith("errors.") for key in counters)


def test_ids_metadata_and_charsets_of_known_pages(data_dir):
    warc_dir = data_dir / "warc"
    known = {
        # url: (charset, a string of the page's <title>)
        "http://01spb.ru/company/": ("cp1251", "О компании - Стратегия пожарной безопасности"),
        "http://041696.com/15477/list_6_4.html": ("gb18030", "香港最快开奖现场直84期_主页"),
        "http://www.uraharajuku.st/shopdetail/001005000005/019/000/order/": (
            "euc_jp",
            "ブラウニー ブリーフケース【ヘッドポーター HEADPORTER 吉田かばん】",
        ),
        "https://an.wikipedia.org/wiki/Escopete": ("utf-8", "Escopete - Biquipedia, a enciclopedia libre"),
    }

    def check(documents):
        found = {d.metadata["url"]: d for d in documents if d.metadata["url"] in known}
        if set(found) != set(known):
            raise BeamAssertException(f"missing pages: {set(known) - set(found)}")
        for url, (charset, title) in known.items():
            doc = found[url]
            if doc.metadata["charset"] != charset or title not in doc.text:
                raise BeamAssertException(f"{url}: charset {doc.metadata['charset']}, title found: {title in doc.text}")

    def build(pipeline):
        docs = pipeline | ReadWarc(
            [
                str(warc_dir / "cc-main-2020-34_resiliparse_warcfile.warc.gz"),
                str(warc_dir / "clueweb09-ja_quirk.warc.gz"),
                str(warc_dir / "cc-main-2024-22_whirlwind.warc.gz"),
            ]
        )
        assert_that(docs, check)
        first = docs | "First" >> beam.Filter(lambda d: d.metadata["url"] == "http://01spb.ru/company/")
        first = first | "IdAndMetadata" >> beam.Map(lambda d: (d.id, d.metadata))
        assert_that(
            first,
            equal_to(
                [
                    (
                        "<urn:uuid:e9e41f63-d478-42d0-bca8-1af2be3245a3>",
                        {
                            "url": "http://01spb.ru/company/",
                            "date": "2020-08-08T18:31:12Z",
                            "warc_record_id": "<urn:uuid:e9e41f63-d478-42d0-bca8-1af2be3245a3>",
                            "content_type": "text/html",
                            "charset": "cp1251",
                            "http_status": 200,
                            "file_path": str(warc_dir / "cc-main-2020-34_resiliparse_warcfile.warc.gz"),
                            "offset": 12685,
                        },
                    )
                ]
            ),
            label="Metadata",
        )

    run_and_collect(build)


def test_arc_records_get_positional_ids(data_dir):
    path = require(data_dir / "warc" / "warcio-edge-cases" / "example.arc.gz")

    def build(pipeline):
        docs = (
            pipeline | ReadWarc(str(path)) | "Ids" >> beam.Map(lambda d: (d.id, d.metadata["url"], d.metadata["date"]))
        )
        assert_that(docs, equal_to([("example.arc.gz/171", "http://example.com/", "2014-02-16T05:02:21Z")]))

    run_and_collect(build)


def test_files_warcio_rejects_are_dead_lettered_with_offsets(data_dir):
    edge = data_dir / "warc" / "warcio-edge-cases"
    bad_gzip = require(edge / "example-bad-non-chunked.warc.gz")
    wrong_chunks = require(edge / "example-wrong-chunks.warc.gz")

    def build(pipeline):
        docs, dead = pipeline | ReadWarc([str(bad_gzip), str(wrong_chunks)]).with_dead_letters()
        assert_that(docs, equal_to([]), label="NoDocuments")
        assert_that(
            dead | "Where" >> to_places,
            equal_to(
                [
                    ("corrupt_archive", str(bad_gzip), 0),
                    ("truncated_record", str(wrong_chunks), 0),
                    ("corrupt_archive", str(wrong_chunks), 516),
                ]
            ),
            label="DeadLetters",
        )

    stats = run_and_collect(build)
    counters = stats["ReadWarc"]["counters"]
    assert counters == {
        "in": 5,
        "skipped.warcinfo_record": 1,
        "errors.corrupt_archive": 2,
        "errors.truncated_record": 1,
        # the request record after the resync point starts with blank lines warcio does not expect
        "skipped.untyped_record": 1,
        "files": 2,
        "bytes": bad_gzip.stat().st_size + wrong_chunks.stat().st_size,
    }


# Damage within the first block warcio reads of a member, and past it: there warcio printed the error and ended
# the file, losing the 32 records after it and calling the damaged one truncated.
@pytest.mark.parametrize("into_member", [300, 1679])
def test_a_corrupt_gzip_member_costs_one_record_and_reading_resumes(data_dir, tmp_path, into_member):
    source = require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz")
    damaged = tmp_path / "damaged.warc.gz"
    data = bytearray(source.read_bytes())
    # The response of http://044545.com/... is the gzip member at 48321; spoil its deflate stream.
    spoiled = slice(48321 + into_member, 48321 + into_member + 40)
    data[spoiled] = bytes(byte ^ 0xFF for byte in data[spoiled])
    damaged.write_bytes(bytes(data))
    intact_urls = sorted(r.url for r in expected_documents(warcio_records(source)))
    lost = "http://044545.com/topic/20200207/015849.html"

    def build(pipeline):
        docs, dead = pipeline | ReadWarc(str(damaged)).with_dead_letters()
        assert_that(docs | "Urls" >> to_urls, equal_to([u for u in intact_urls if u != lost]), label="Documents")
        assert_that(dead | "Where" >> to_places, equal_to([("corrupt_archive", str(damaged), 48321)]), label="Dead")

    stats = run_and_collect(build)
    counters = stats["ReadWarc"]["counters"]
    assert counters["in"] == 50  # 49 intact records + the damaged one
    assert counters["out"] == 15
    assert counters["errors.corrupt_archive"] == 1


def test_fault_set_every_record_accounted_for(faults_set):
    out_dir, manifest = faults_set
    files = sorted(out_dir.glob("*.warc.gz"))
    # manifest rows list each file's response records in order; warcio names their URLs
    warcio_urls = {}
    for path in files:
        rows = [row for row in manifest if row["file"] == path.name]
        for row, record in zip(rows, warcio_records(path), strict=True):
            warcio_urls[row["url"]] = (record.url, str(path), record.offset)
    kinds = {row["url"]: row["kind"] for row in manifest}
    assert sorted(k for k in kinds.values() if k.startswith("fault:")) == [
        "fault:binary",
        "fault:empty",
        "fault:oversized",
        "fault:undecodable",
    ]
    truncated = next(row["url"] for row in reversed(manifest) if row["file"] == files[-1].name)
    dropped = {"fault:binary", "fault:empty", "fault:undecodable"}
    expected_urls = [warcio_urls[url][0] for url, kind in kinds.items() if kind not in dropped and url != truncated]
    undecodable = next(url for url, kind in kinds.items() if kind == "fault:undecodable")

    def build(pipeline):
        docs, dead = pipeline | ReadWarc(str(out_dir)).with_dead_letters()
        assert_that(docs | "Urls" >> to_urls, equal_to(expected_urls), label="Documents")
        assert_that(
            dead | "Where" >> beam.Map(lambda d: (d.reason, d.url, d.file, d.offset)),
            equal_to(
                [
                    ("undecodable", *warcio_urls[undecodable]),
                    ("truncated_record", *warcio_urls[truncated]),
                ]
            ),
            label="DeadLetters",
        )

    stats = run_and_collect(build)
    counters = stats["ReadWarc"]["counters"]
    assert counters["in"] == len(manifest) == 164
    assert counters["out"] == len(expected_urls) == 160
    assert counters["skipped.non_html_payload"] == 1
    assert counters["skipped.empty_payload"] == 1
    assert counters["errors.undecodable"] == 1
    assert counters["errors.truncated_record"] == 1
    outcomes = sum(v for k, v in counters.items() if k.startswith(("skipped.", "errors."))) + counters["out"]
    assert counters["in"] == outcomes


def test_oversized_payloads_are_skipped_when_capped(faults_set):
    out_dir, manifest = faults_set
    oversized = next(row for row in manifest if row["kind"] == "fault:oversized")
    largest_real = max(row["bytes"] for row in manifest if not row["kind"].startswith("fault:"))
    assert largest_real < oversized["bytes"]

    def not_there(urls):
        if oversized["url"] in urls or len(urls) != 159:
            raise BeamAssertException(f"{len(urls)} documents; oversized page kept: {oversized['url'] in urls}")

    def build(pipeline):
        docs = pipeline | ReadWarc(str(out_dir), max_payload_bytes=largest_real)
        assert_that(docs | to_urls, not_there)

    stats = run_and_collect(build)
    assert stats["ReadWarc"]["counters"]["skipped.payload_too_large"] == 1


def test_payloads_without_any_type_are_sniffed_and_real_pages_kept(data_dir, tmp_path, udhr_texts):
    """No WARC-Identified-Payload-Type and no HTTP Content-Type: only sniffing decides."""
    pages = []
    for path in sorted(glob.glob(str(require(data_dir / "trafilatura-eval") / "*" / "*.html.gz"))):
        body = gzip.decompress(pathlib.Path(path).read_bytes())
        starts_with_script = body.lstrip(b"\xef\xbb\xbf \t\r\n")[:7].lower() == b"<script"
        if starts_with_script or len(pages) < 150:
            pages.append((f"http://sniff.test/{urllib.parse.quote(pathlib.Path(path).name)}", body))
    assert sum(body.lstrip(b"\xef\xbb\xbf \t\r\n")[:7].lower() == b"<script" for _, body in pages) >= 4
    binary = (data_dir / "text-corpora" / "nltk_data" / "inaugural.zip").read_bytes()
    plain_text = udhr_texts["eng"].encode("utf-8")
    warc = tmp_path / "untyped.warc.gz"
    with open(warc, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url, body in [
            *pages,
            ("http://sniff.test/archive.zip", binary),
            ("http://sniff.test/udhr.txt", plain_text),
        ]:
            headers = StatusAndHeaders("200 OK", [("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers)
            )

    def build(pipeline):
        docs = pipeline | ReadWarc(str(warc))
        assert_that(docs | "Urls" >> to_urls, equal_to([url for url, _ in pages]))

    stats = run_and_collect(build)
    assert stats["ReadWarc"]["counters"]["skipped.non_html_payload"] == 2


def test_skip_and_limit_follow_sorted_file_order(data_dir, tmp_path):
    for name in ("dolma_wget_sample-0000.warc.gz", "dolma_wget_sample-0001.warc.gz"):
        shutil.copy(require(data_dir / "warc" / name), tmp_path / name)
    ordered = [
        r.url
        for name in ("dolma_wget_sample-0000.warc.gz", "dolma_wget_sample-0001.warc.gz")
        for r in expected_documents(warcio_records(tmp_path / name))
    ]

    def build(pipeline):
        window = pipeline | "Window" >> ReadWarc(str(tmp_path / "*.warc.gz"), skip=20, limit=4)
        assert_that(window | "Urls" >> to_urls, equal_to(ordered[20:24]))

    stats = run_and_collect(build)
    assert stats["Window"]["counters"]["out"] == 4
    assert stats["Window"]["counters"]["skipped.skip_option"] == 20


def test_a_missing_path_or_empty_glob_fails_at_construction(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ReadWarc(str(tmp_path / "absent.warc.gz"))
    with pytest.raises(FileNotFoundError, match="No files match"):
        ReadWarc(str(tmp_path / "*.warc.gz"))
    with pytest.raises(FileNotFoundError, match="under the directory"):
        ReadWarc(str(tmp_path))
