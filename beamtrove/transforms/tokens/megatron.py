"""Megatron-LM's indexed dataset layout, as DataTrove's MegatronDocumentTokenizer writes it.

A dataset ``<prefix>`` is two files side by side, which Megatron-LM (and
megatron-core's ``IndexedDataset(<prefix>)``) reads:

* ``<prefix>.bin``: the token ids of its documents back to back, without
  header: ``uint16`` when the vocabulary has at most 65,536 entries, ``int32``
  otherwise (little-endian);
* ``<prefix>.idx``: the 9-byte magic ``MMIDIDX\\x00\\x00``, then as
  little-endian numbers the version (``uint64`` 1), Megatron's code of the
  token dtype (``uint8``: 8 for ``uint16``, 4 for ``int32``), the sequence
  count and the document count (``uint64`` each), then one array after the
  other: every sequence's length in tokens (``int32``), its byte offset in
  the ``.bin`` (``int64``) and the document indices (``int64``, ``0`` then
  ``1..n``: every document is one sequence).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from beamtrove.fs import open_url

__all__ = ["BIN_SUFFIX", "IDX_SUFFIX", "INDEX_MAGIC", "MegatronFileWriter", "megatron_dtype_code"]

BIN_SUFFIX = ".bin"
IDX_SUFFIX = ".idx"
INDEX_MAGIC = b"MMIDIDX\x00\x00"

_VERSION = 1
# Megatron's DType enumeration numbers the dtypes it reads; 4-byte ids are its signed int32.
_DTYPE_CODES = {2: 8, 4: 4}
_COUNTS = struct.Struct("<QBQQ")


def megatron_dtype_code(token_size: int) -> int:
    """Megatron's code of the token dtype for ``token_size``-byte ids: 8 (``uint16``) or 4 (``int32``).

    Raises:
        ValueError: ``token_size`` is neither 2 nor 4.
    """
    if token_size not in _DTYPE_CODES:
        raise ValueError(f"Megatron token files hold 2- or 4-byte token ids, not {token_size}-byte ones.")
    return _DTYPE_CODES[token_size]


class MegatronFileWriter:
    """Writes one Megatron dataset: ``<stem>.bin`` as documents come, ``<stem>.idx`` on :meth:`close`.

    It takes documents as :class:`~beamtrove.transforms.tokens.ShardFileWriter`
    does (raw token bytes in the file's width), so one sink writes either
    layout. Token ids of 4-byte files are below 2**31 in any real vocabulary,
    so their unsigned bytes are Megatron's ``int32`` ones.
    """

    def __init__(self, stem: str, *, token_size: int, storage_options: Mapping[str, Any] | None = None):
        self.path = stem + BIN_SUFFIX
        self._stem = stem
        self._token_size = token_size
        self._dtype_code = megatron_dtype_code(token_size)
        self._storage_options = dict(storage_options or {})
        self._lengths: list[int] = []
        self.token_count = 0
        self._bin_file = open_url(self.path, "wb", self._storage_options).open()

    @property
    def document_count(self) -> int:
        return len(self._lengths)

    def append(self, token_bytes: bytes, loss_bytes: bytes | None = None) -> None:
        """Adds one document given as token bytes in the file's width.

        Raises:
            ValueError: ``loss_bytes`` is given: Megatron's layout has no loss masks.
        """
        if loss_bytes is not None:
            raise ValueError("Megatron token files hold no loss masks; write .ds shards to keep them.")
        self._bin_file.write(token_bytes)
        length = len(token_bytes) // self._token_size
        self._lengths.append(length)
        self.token_count += length

    def close(self) -> None:
        self._bin_file.close()
        lengths = np.asarray(self._lengths, dtype="<i4")
        pointers = np.zeros(len(lengths), dtype="<i8")
        np.cumsum(lengths[:-1].astype("<i8") * self._token_size, out=pointers[1:])
        document_indices = np.arange(len(lengths) + 1, dtype="<i8")
        with open_url(self._stem + IDX_SUFFIX, "wb", self._storage_options) as index:
            index.write(INDEX_MAGIC)
            index.write(_COUNTS.pack(_VERSION, self._dtype_code, len(lengths), len(document_indices)))
            for array in (lengths, pointers, document_indices):
                index.write(array.tobytes())
