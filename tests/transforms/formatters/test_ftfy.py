"""FTFYFormatter on real mojibake (trafilatura-eval pages) and on hostile strings, with DataTrove's settings."""

from __future__ import annotations

import gzip

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.formats.charset import decode_payload
from beamtrove.transforms.filters import Filter
from beamtrove.transforms.formatters import FTFYFormatter
from tests.conftest import require, run_and_collect


def page_line(data_dir, name: str, needle: str) -> tuple[str, str]:
    """The first line holding ``needle`` of a trafilatura-eval page decoded as beamtrove's reader decodes it
    (stripped), and the charset the reader chose."""
    path = require(data_dir / "trafilatura-eval" / "eval" / f"{name}.html.gz")
    text, charset = decode_payload(gzip.decompress(path.read_bytes()))
    return next(line.strip() for line in text.split("\n") if needle in line), charset


def fixed(text: str, **options) -> str:
    return FTFYFormatter(**options).format(Document(text=text, id="doc")).text


def test_utf8_read_as_another_charset_is_repaired(data_dir):
    # tierschutzpartei.de serves UTF-8 with four Latin-1 bytes in it, so the reader's charset detection picks cp1250.
    line, charset = page_line(data_dir, "tierschutzpartei.de-wildvogelauffang", "<h2>Ewald Ferlemann")
    assert charset == "cp1250"
    assert line == '<div class="wprt-container"><h2>Ewald Ferlemann und sein Leben fĂĽr die VĂ¶gel</h2>'
    assert fixed(line) == '<div class="wprt-container"><h2>Ewald Ferlemann und sein Leben für die Vögel</h2>'


def test_mojibake_inside_a_utf8_page_is_repaired(data_dir):
    # The archived the-pain.net page is UTF-8 but already held the double-encoded acute accent.
    line, charset = page_line(data_dir, "archive.org.the-pain.net.silkroad", "SayunÂ´s Request 1")
    assert charset == "utf-8"
    assert "<strong>SayunÂ´s Request 1</strong>" in line
    assert fixed(line) == line.replace("SayunÂ´s", "Sayun´s")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CafÃ©, Ã©tÃ© Ã  Paris", "Café, été à Paris"),
        ("don\u00e2\u0080\u0099t", "don\u2019t"),  # UTF-8 read as Latin-1
        ("The Mona Lisa doesnÃƒÂ¢Ã¢â€šÂ¬Ã¢â€žÂ¢t have eyebrows.", "The Mona Lisa doesn\u2019t have eyebrows."),
        ("hello\x00world\x07", "helloworld"),  # control characters
        ("\x1b[31mred\x1b[0m alert", "red alert"),  # terminal escapes
        ("\x85 \x96 C1", "\u2026 \u2013 C1"),  # C1 controls read as Windows-1252
        ("lone \ud83d surrogate", "lone \ufffd surrogate"),
        ("price &gt; 10 &amp; more", "price > 10 & more"),  # no "<": entities are decoded
        ("<p>price &gt; 10</p>", "<p>price &gt; 10</p>"),  # looks like HTML: left alone
    ],
)
def test_encoding_damage_is_repaired(text, expected):
    assert fixed(text) == expected


def test_ways_of_writing_are_kept_unlike_ftfy_defaults():
    # Ligatures, full-width letters, curly quotes, CRLF line breaks and decomposed accents are how text is written.
    text = "\ufb01ne \u201cquotes\u201d \uff21\uff22\uff23\r\nline two e\u0301"
    assert fixed(text) == text
    everything = fixed(
        text,
        fix_latin_ligatures=True,
        fix_character_width=True,
        uncurl_quotes=True,
        fix_line_breaks=True,
        normalization="NFC",
    )
    assert everything == 'fine "quotes" ABC\nline two \u00e9'


def test_fixes_can_be_turned_off():
    assert fixed("CafÃ©", fix_encoding=False) == "CafÃ©"
    assert fixed("price &gt; 10", unescape_html=False) == "price &gt; 10"
    assert fixed("<p>&gt;</p>", unescape_html=True) == "<p>></p>"


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match="normalization"):
        FTFYFormatter(normalization="NFX")
    with pytest.raises(ValueError, match="unescape_html"):
        FTFYFormatter(unescape_html="yes")


def test_ftfy_formatter_in_a_pipeline(data_dir):
    broken, _ = page_line(data_dir, "tierschutzpartei.de-wildvogelauffang", "<h2>Ewald Ferlemann")
    docs = [Document(text=broken, id="broken"), Document(text="Nothing to fix here.", id="clean")]

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(FTFYFormatter())
        assert_that(
            result.kept | beam.Map(lambda d: (d.id, d.text)),
            equal_to([("broken", broken.replace("fĂĽr die VĂ¶gel", "für die Vögel")), ("clean", docs[1].text)]),
        )

    assert run_and_collect(build)["ftfy"]["counters"] == {"in": 2, "out": 2}
