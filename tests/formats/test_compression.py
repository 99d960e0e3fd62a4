"""Decompressed on real text: whole, concatenated and damaged files of every codec."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zlib

import pytest
import zstandard

from beamtrove.formats.compression import DamagedStream, Decompressed

# bz2 at level 1 cuts its input into 100 kB blocks, so a file cut in the middle still holds whole blocks.
COMPRESS = {
    "gzip": gzip.compress,
    "bz2": lambda data: bz2.compress(data, 1),
    "xz": lzma.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}


def _readable(compressed: bytes, codec: str) -> bytes:
    """What the codec's own library decompresses of ``compressed`` before it stops."""
    if codec == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(compressed)
    if codec == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(compressed)
    return (bz2.BZ2Decompressor() if codec == "bz2" else lzma.LZMADecompressor()).decompress(compressed)


def _read(compressed: bytes, codec: str) -> tuple[bytes, DamagedStream | None]:
    """The bytes read from ``compressed`` as the readers read them (a buffer over it), and the damage found."""
    read = bytearray()
    try:
        for line in io.BufferedReader(Decompressed(io.BytesIO(compressed), codec), 1 << 20):
            read += line
    except DamagedStream as damage:
        return bytes(read), damage
    return bytes(read), None


@pytest.fixture(scope="module")
def review_lines(movie_reviews) -> bytes:
    return "".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in movie_reviews.items()).encode()[
        : 1 << 20
    ]


@pytest.mark.parametrize("codec", sorted(COMPRESS))
def test_whole_and_concatenated_files_read_back_every_byte(review_lines, codec):
    compressed = COMPRESS[codec](review_lines)
    assert _read(compressed, codec) == (review_lines, None)
    # Members written one after the other (as `cat a.gz b.gz`), zero padding after the last.
    assert _read(compressed + compressed + b"\0" * 9, codec) == (review_lines * 2, None)
    assert _read(b"", codec) == (b"", None)


@pytest.mark.parametrize("codec", sorted(COMPRESS))
def test_a_file_cut_short_hands_over_every_line_that_decompresses_then_says_where(review_lines, codec):
    compressed = COMPRESS[codec](review_lines)
    cut = compressed[: len(compressed) // 2]
    readable = _readable(cut, codec)
    whole_lines = readable[: readable.rindex(b"\n") + 1]
    assert 0 < len(whole_lines) < len(review_lines)

    read, damage = _read(cut, codec)
    assert read == whole_lines
    assert (damage.reason, damage.offset) == ("truncated", len(cut))
    assert (
        damage.message
        == f"the {codec} data ends at byte {len(cut)}, before its end marker (a copy that was cut short?)"
    )


def test_damaged_data_is_corrupt_compression_after_the_lines_before_it(review_lines):
    compressed = bytearray(COMPRESS["zstd"](review_lines))
    middle = len(compressed) // 2
    compressed[middle : middle + 64] = b"\xff" * 64
    read, damage = _read(bytes(compressed), "zstd")
    assert damage.reason == "corrupt_compression"
    assert damage.message.startswith("the zstd data is damaged by byte ")
    assert 0 < len(read) < len(review_lines)
    assert review_lines.startswith(read)
    # Not a compressed file at all: nothing is read, and the damage is found at once.
    assert _read(b"\0" * 100, "gzip")[1].reason == "corrupt_compression"
