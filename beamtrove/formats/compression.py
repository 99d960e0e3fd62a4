"""Decompressing input files so that damage costs only the records it holds.

fsspec's decompressing files lose the records a damaged file still holds:
the gzip reader drops the output it had buffered when the input ends early,
and the zstd reader ends a truncated file silently, as if it were whole.
:class:`Decompressed` hands over every byte that decompresses before it
raises :class:`DamagedStream`, which says what is wrong and where, so a
parser keeps the records before the damage and makes the damage one dead
letter.
"""

from __future__ import annotations

import bz2
import io
import lzma
from typing import BinaryIO, Protocol

import zstandard
from isal import isal_zlib

__all__ = ["CODECS", "DamagedStream", "Decompressed"]

# Compressed bytes read from the file at a time.
_READ_SIZE = 1 << 16
# zstd gives back a whole input piece's output at once: small pieces bound it.
_ZSTD_PIECE = 1 << 14


class DamagedStream(Exception):
    """The input breaks off or is corrupt here; what came before was handed over whole.

    Attributes:
        reason: ``truncated`` (the data ends before its end marker, as a copy
            that was interrupted does) or ``corrupt_compression`` (the
            compressed data is damaged).
        message: What is wrong, for a human.
        offset: Byte offset in the file as stored where the damage was found.
    """

    def __init__(self, reason: str, message: str, offset: int):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.offset = offset

    @classmethod
    def truncated(cls, codec: str, offset: int) -> DamagedStream:
        """The compressed data of ``codec`` ends at byte ``offset`` of the file, inside a member."""
        return cls(
            "truncated",
            f"the {codec} data ends at byte {offset}, before its end marker (a copy that was cut short?)",
            offset,
        )


class _Decompressor(Protocol):
    """The interface of ``bz2.BZ2Decompressor`` and ``lzma.LZMADecompressor``, which the other codecs are given."""

    eof: bool
    needs_input: bool
    unused_data: bytes

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


class _Gzip:
    """One gzip member, inflated with ISA-L (as the WARC reader does); zlib checks the CRC at its end."""

    def __init__(self):
        self._inflate = isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        return self._inflate.decompress(self._inflate.unconsumed_tail + data, max(max_length, 0))

    @property
    def needs_input(self) -> bool:
        return not self._inflate.unconsumed_tail

    @property
    def eof(self) -> bool:
        return self._inflate.eof

    @property
    def unused_data(self) -> bytes:
        return self._inflate.unused_data


class _Zstd:
    """One zstd frame, fed a small piece of its input per call."""

    def __init__(self):
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._input = b""

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        self._input += data
        piece, self._input = self._input[:_ZSTD_PIECE], self._input[_ZSTD_PIECE:]
        output = self._frame.decompress(piece)
        if self._frame.eof:
            self._input = self._frame.unused_data + self._input
        return output

    @property
    def needs_input(self) -> bool:
        return not self._input

    @property
    def eof(self) -> bool:
        return self._frame.eof

    @property
    def unused_data(self) -> bytes:
        return self._input if self._frame.eof else b""


#: The codecs :class:`Decompressed` reads, by the names ``fsspec.utils.infer_compression`` gives.
CODECS = {
    "gzip": _Gzip,
    "bz2": bz2.BZ2Decompressor,
    "xz": lzma.LZMADecompressor,
    "lzma": lzma.LZMADecompressor,
    "zstd": _Zstd,
}

# What the codecs raise on damaged data (bz2 raises a bare OSError).
_CORRUPT = (isal_zlib.error, OSError, lzma.LZMAError, zstandard.ZstdError, EOFError)


class Decompressed(io.RawIOBase):
    """The decompressed bytes of ``stored``, a file compressed with one of :data:`CODECS`.

    Concatenated members (gzip), streams (bz2, xz) and frames (zstd) are read
    one after the other, and the zero bytes that may pad the end of one are
    passed over. Every byte that decompresses is handed over before
    :class:`DamagedStream` is raised for the damage that follows it.
    """

    def __init__(self, stored: BinaryIO, codec: str):
        self._stored = stored
        self._codec = codec
        self._new_decompressor = CODECS[codec]
        self._decompressor: _Decompressor | None = None
        self._members = 0
        self._input = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        with memoryview(buffer) as view:
            while (output := self._decompress(len(view))) is not None:
                if output:
                    view[: len(output)] = output
                    return len(output)
            return 0

    def _decompress(self, max_length: int) -> bytes | None:
        """Up to ``max_length`` bytes (perhaps none yet), or None after the last member."""
        if self._decompressor is None or self._decompressor.eof:
            if self._decompressor is not None:
                self._input = self._decompressor.unused_data + self._input
            if not self._start_member():
                return None
        if self._decompressor.needs_input and not self._input and not self._fill():
            raise DamagedStream.truncated(self._codec, self._offset)
        data, self._input = self._input, b""
        try:
            return self._decompressor.decompress(data, max_length)
        except _CORRUPT as exc:
            raise DamagedStream(
                "corrupt_compression",
                f"the {self._codec} data is damaged by byte {self._offset}: {type(exc).__name__}: {exc}",
                self._offset,
            ) from None

    def _start_member(self) -> bool:
        """Starts decompressing the next member; False when the file holds no other."""
        if self._members:
            while not self._input.lstrip(b"\0"):  # padding so far
                self._input = b""
                if not self._fill():
                    return False
            self._input = self._input.lstrip(b"\0")
        elif not self._input and not self._fill():
            return False  # an empty file
        self._decompressor = self._new_decompressor()
        self._members += 1
        return True

    def _fill(self) -> bool:
        """Reads more compressed bytes; False at the end of the file."""
        read = self._stored.read(_READ_SIZE)
        self._input += read
        return bool(read)

    @property
    def _offset(self) -> int:
        """How far into the stored file decompression has got."""
        return self._stored.tell() - len(self._input)
