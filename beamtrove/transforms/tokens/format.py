"""The ``.ds`` token shard layout, as DataTrove's DocumentTokenizer writes it.

A shard ``<name>.ds`` is a group of files side by side:

* ``<name>.ds``: the token ids of its documents back to back, without header,
  little-endian ``uint16`` when the vocabulary has at most 65,536 entries,
  ``uint32`` otherwise;
* ``<name>.ds.index``: little-endian ``uint64``, one per document, the token
  offset where that document ends (no leading 0; the last equals the token
  count);
* ``<name>.ds.loss`` (optional): one byte per token, 1 where the training loss
  counts and 0 where it is masked;
* ``<name>.ds.metadata``: three text lines without a final newline:
  ``<tokenizer>|<bytes per token>``, the token count, and the count with an SI
  prefix (``4.45 MT``).

:class:`TokenizedDocument` is the record that carries one document's tokens
through a pipeline; :class:`TokenizedDocumentCoder` gives it a compact,
deterministic wire form.
"""

from __future__ import annotations

import math
import struct
from typing import Any, BinaryIO

import numpy as np
from apache_beam import coders

from beamtrove.fs import open_url

__all__ = [
    "INDEX_SUFFIX",
    "LOSS_SUFFIX",
    "METADATA_SUFFIX",
    "TOKENS_SUFFIX",
    "ShardFileWriter",
    "TokenizedDocument",
    "TokenizedDocumentCoder",
    "humanized_token_count",
    "parse_metadata",
    "read_doc_ends",
    "token_dtype",
]

TOKENS_SUFFIX = ".ds"
INDEX_SUFFIX = ".index"
LOSS_SUFFIX = ".loss"
METADATA_SUFFIX = ".metadata"

_INDEX_DTYPE = np.dtype("<u8")
_LOSS_DTYPE = np.dtype("u1")
_SI_PREFIXES = ("", "k", "M", "G", "T", "P", "E", "Z", "Y", "R", "Q")


def token_dtype(vocab_size: int | None = None, *, token_size: int | None = None) -> np.dtype:
    """The on-disk dtype of token ids, from a vocabulary size or a token width in bytes.

    Raises:
        ValueError: ``token_size`` is neither 2 nor 4.
    """
    if token_size is None:
        token_size = 2 if vocab_size is not None and vocab_size <= 1 << 16 else 4
    if token_size not in (2, 4):
        raise ValueError(f"Token files hold 2- or 4-byte token ids, not {token_size}-byte ones.")
    return np.dtype("<u2" if token_size == 2 else "<u4")


def humanized_token_count(count: int) -> str:
    """``count`` with three significant digits and an SI prefix: ``999 T``, ``4.45 MT``, ``123 GT``."""
    if count == 0:
        return "0.00 T"
    exponent = math.floor(math.log10(count))
    while True:  # a rounding carry (9.999 k -> 10.0 k, 999.9 k -> 1.00 M) adds a digit
        group = min(exponent // 3, len(_SI_PREFIXES) - 1)
        digits_before_point = exponent - 3 * group + 1
        decimals = max(0, 3 - digits_before_point)
        scaled = round(count / 10 ** (3 * group), decimals)
        if scaled < 10**digits_before_point or group == len(_SI_PREFIXES) - 1:
            break
        exponent += 1
    return f"{scaled:.{decimals}f} {_SI_PREFIXES[group]}T"


def metadata_text(tokenizer: str, token_size: int, token_count: int) -> str:
    """The content of a ``.ds.metadata`` file."""
    return f"{tokenizer}|{token_size}\n{token_count}\n{humanized_token_count(token_count)}"


def parse_metadata(text: str) -> tuple[str, int, int]:
    """``(tokenizer, token size, token count)`` from a ``.ds.metadata`` file's content.

    Raises:
        ValueError: The content does not follow the layout.
    """
    lines = text.splitlines()
    tokenizer, separator, size = lines[0].rpartition("|") if lines else ("", "", "")
    if len(lines) < 2 or not separator or not size.isdigit() or not lines[1].isdigit():
        raise ValueError(f"not a token metadata file (expected 'tokenizer|size' then a count): {text[:200]!r}")
    return tokenizer, int(size), int(lines[1])


def read_doc_ends(stream: BinaryIO) -> np.ndarray:
    """The document end offsets of a ``.ds.index`` stream.

    Raises:
        ValueError: The index is not a whole number of entries, or not sorted.
    """
    data = stream.read()
    if len(data) % _INDEX_DTYPE.itemsize:
        raise ValueError(f"an index of {len(data)} bytes is not a whole number of 8-byte entries")
    ends = np.frombuffer(data, dtype=_INDEX_DTYPE)
    if ends.size and np.any(np.diff(ends.astype(np.int64)) < 0):
        raise ValueError("the document ends in the index decrease")
    return ends


class TokenizedDocument:
    """One document's token ids on their way to (or from) a ``.ds`` shard.

    Attributes:
        id: The document's id; orders and shards documents deterministically.
        tokens: Token ids, ``uint16`` or ``uint32`` (see :func:`token_dtype`).
        loss_mask: Optional ``uint8`` array as long as ``tokens``: 1 where the
            training loss counts, 0 where it is masked.
    """

    __slots__ = ("id", "loss_mask", "tokens")

    def __init__(self, id: str, tokens: np.ndarray, loss_mask: np.ndarray | None = None):
        if loss_mask is not None and len(loss_mask) != len(tokens):
            raise ValueError(f"document {id!r} has {len(tokens)} tokens but a loss mask of {len(loss_mask)}")
        self.id = id
        self.tokens = tokens
        self.loss_mask = loss_mask

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, TokenizedDocument):
            return NotImplemented
        return (
            self.id == other.id
            and self.tokens.dtype == other.tokens.dtype
            and np.array_equal(self.tokens, other.tokens)
            and (self.loss_mask is None) == (other.loss_mask is None)
            and (self.loss_mask is None or np.array_equal(self.loss_mask, other.loss_mask))
        )

    __hash__ = None

    def __repr__(self) -> str:
        mask = "" if self.loss_mask is None else f", masked={int(len(self.loss_mask) - self.loss_mask.sum())}"
        return f"TokenizedDocument(id={self.id!r}, tokens={len(self.tokens)} x {self.tokens.dtype}{mask})"


# id length, token width in bytes, token count, has a loss mask.
_HEADER = struct.Struct("<IBQ?")


class TokenizedDocumentCoder(coders.Coder):
    """Deterministic binary coder for :class:`TokenizedDocument`: the arrays travel as raw bytes."""

    def encode(self, value: TokenizedDocument) -> bytes:
        id_bytes = value.id.encode("utf-8", "surrogatepass")
        tokens = value.tokens.astype(value.tokens.dtype.newbyteorder("<"), copy=False)
        parts = [_HEADER.pack(len(id_bytes), tokens.itemsize, len(tokens), value.loss_mask is not None), id_bytes]
        parts.append(tokens.tobytes())
        if value.loss_mask is not None:
            parts.append(value.loss_mask.astype(_LOSS_DTYPE, copy=False).tobytes())
        return b"".join(parts)

    def decode(self, encoded: bytes) -> TokenizedDocument:
        id_len, token_size, count, has_loss = _HEADER.unpack_from(encoded)
        start = _HEADER.size + id_len
        tokens_end = start + count * token_size
        return TokenizedDocument(
            str(encoded[_HEADER.size : start], "utf-8", "surrogatepass"),
            np.frombuffer(encoded, dtype=token_dtype(token_size=token_size), count=count, offset=start),
            np.frombuffer(encoded, dtype=_LOSS_DTYPE, count=count, offset=tokens_end) if has_loss else None,
        )

    def estimate_size(self, value: TokenizedDocument) -> int:
        # Runners size every element they pass on; Coder's default would encode (copy) the tokens once more for it.
        id_size = len(value.id.encode("utf-8", "surrogatepass"))
        loss_size = 0 if value.loss_mask is None else len(value.loss_mask)
        return _HEADER.size + id_size + value.tokens.nbytes + loss_size

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self):
        return TokenizedDocument


coders.registry.register_coder(TokenizedDocument, TokenizedDocumentCoder)


class ShardFileWriter:
    """Writes one shard: its ``.ds``, ``.ds.index``, optional ``.ds.loss`` and ``.ds.metadata``.

    Documents are appended as raw bytes already in the file's token width;
    :meth:`close` writes the index and metadata.
    """

    def __init__(
        self,
        path: str,
        *,
        tokenizer: str,
        token_size: int,
        with_loss: bool,
        storage_options: dict[str, Any] | None = None,
    ):
        self.path = path
        self._tokenizer = tokenizer
        self._token_size = token_size
        self._storage_options = storage_options
        self._doc_ends: list[int] = []
        self.token_count = 0
        self._tokens_file = open_url(path, "wb", storage_options).open()
        self._loss_file = open_url(path + LOSS_SUFFIX, "wb", storage_options).open() if with_loss else None

    @property
    def document_count(self) -> int:
        return len(self._doc_ends)

    def append(self, token_bytes: bytes, loss_bytes: bytes | None) -> None:
        """Adds a document given as token bytes (in the file's width) and, with a loss file, one byte per token."""
        self._tokens_file.write(token_bytes)
        self.token_count += len(token_bytes) // self._token_size
        self._doc_ends.append(self.token_count)
        if self._loss_file is not None:
            self._loss_file.write(loss_bytes)

    def close(self) -> None:
        self._tokens_file.close()
        if self._loss_file is not None:
            self._loss_file.close()
        with open_url(self.path + INDEX_SUFFIX, "wb", self._storage_options) as index:
            index.write(np.asarray(self._doc_ends, dtype=_INDEX_DTYPE).tobytes())
        with open_url(self.path + METADATA_SUFFIX, "wt", self._storage_options) as metadata:
            metadata.write(metadata_text(self._tokenizer, self._token_size, self.token_count))
