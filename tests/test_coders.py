"""DocumentCoder: exact, deterministic and the coder Beam picks for Documents."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.coders import DocumentCoder
from beamtrove.document import Document, Media, Origin
from tests.conftest import run_and_collect


def _document(udhr_texts) -> Document:
    return Document(
        text=udhr_texts["cmn_hans"] + "\ud800",  # a lone surrogate, as lenient JSON parsers can produce
        id="udhr/cmn_hans",
        media=[Media(id="logo", type=0, url="https://www.ohchr.org/logo.png", media_bytes=b"\x89PNG\r\n")],
        metadata={"url": "https://www.ohchr.org/zh", "scores": {"quality": 0.93, "lang": [0.99, 0.01]}, "n": 7},
    )


def test_round_trip_is_exact(udhr_texts):
    coder = DocumentCoder()
    doc = _document(udhr_texts)
    assert coder.decode(coder.encode(doc)) == doc


@pytest.mark.parametrize(
    "origin",
    [
        None,
        Origin("gs://bucket/crawl [1]/part-00000.jsonl.gz", 0),
        # A file name that is not UTF-8, as os.fsdecode gives it, and a WARC record far into a large file.
        Origin("/data/r\udcfcckblick.warc.gz", 2**40 + 7),
    ],
)
def test_the_origin_crosses_the_coder_but_equality_ignores_it(udhr_texts, origin):
    coder = DocumentCoder()
    doc = dataclasses.replace(_document(udhr_texts), origin=origin)
    decoded = coder.decode(coder.encode(doc))
    assert decoded.origin == origin and decoded == _document(udhr_texts)


def test_equal_documents_encode_to_equal_bytes(udhr_texts):
    coder = DocumentCoder()
    doc = _document(udhr_texts)
    reordered = Document(doc.text, doc.id, doc.media, dict(reversed(list(doc.metadata.items()))))
    assert coder.is_deterministic()
    assert coder.encode(doc) == coder.encode(reordered)


def test_beam_uses_it_for_documents():
    assert isinstance(coders.registry.get_coder(Document), DocumentCoder)


def test_metadata_that_json_cannot_hold_is_named(udhr_texts):
    doc = Document(text=udhr_texts["eng"], id="x", metadata={"when": object()})
    with pytest.raises(TypeError, match="Document 'x' has metadata that is not JSON-compatible"):
        DocumentCoder().encode(doc)


def test_documents_cross_a_shuffle_unchanged(udhr_texts):
    docs = [Document(text=udhr_texts[lang], id=lang, metadata={"lang": lang}) for lang in sorted(udhr_texts)[:40]]

    def build(pipeline):
        shuffled = (
            pipeline
            | beam.Create(docs)
            | beam.Map(lambda d: (d.metadata["lang"][0], d)).with_output_types(tuple[str, Document])
            | beam.GroupByKey()
            | beam.FlatMap(lambda kv: kv[1]).with_output_types(Document)
        )
        assert_that(shuffled, equal_to(docs))

    run_and_collect(build)


def test_importing_any_transform_registers_the_coder():
    # A fresh Python: here, this module imported the coder itself.
    probe = (
        "from apache_beam import coders\n"
        "from beamtrove.document import Document\n"
        "import beamtrove.transforms.filters\n"
        "print(type(coders.registry.get_coder(Document)).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["DocumentCoder"]
