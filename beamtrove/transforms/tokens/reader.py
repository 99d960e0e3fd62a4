"""A Beam source that reads the documents of ``.ds`` token shards back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import numpy as np

from beamtrove.dead_letter import DeadLetter
from beamtrove.formats.records import RecordParser
from beamtrove.fs import InputFile, open_url
from beamtrove.network import RetryPolicy
from beamtrove.transforms.readers.base import FileReader
from beamtrove.transforms.tokens.format import (
    INDEX_SUFFIX,
    LOSS_SUFFIX,
    METADATA_SUFFIX,
    TOKENS_SUFFIX,
    TokenizedDocument,
    parse_metadata,
    read_doc_ends,
    token_dtype,
)

__all__ = ["ReadTokenShards", "TokenShardParser", "shard_tokenizer"]


def shard_tokenizer(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[str, int] | None:
    """``(tokenizer, token size)`` from the ``.ds.metadata`` beside shard ``url``; None without one.

    Raises:
        ValueError: The metadata file is malformed.
    """
    try:
        with open_url(url + METADATA_SUFFIX, "rb", storage_options) as stream:
            tokenizer, token_size, _ = parse_metadata(stream.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    return tokenizer, token_size


class TokenShardParser(RecordParser):
    """Reads one ``.ds`` file with its ``.index`` (and ``.loss``, when present).

    The token width comes from the shard's ``.ds.metadata``, or
    ``token_size`` when there is none. Document ids are ``<file name>/<n>``.
    A shard whose index does not match its token file yields the documents
    the two agree on and one dead letter for the rest.
    """

    suffixes = (TOKENS_SUFFIX,)

    def __init__(self, token_size: int = 2, storage_options: Mapping[str, Any] | None = None):
        self._dtype = token_dtype(token_size=token_size)
        self._storage_options = dict(storage_options or {})

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[TokenizedDocument | DeadLetter]:
        try:
            described = shard_tokenizer(file.url, self._storage_options)
            dtype = self._dtype if described is None else token_dtype(token_size=described[1])
            with open_url(file.url + INDEX_SUFFIX, "rb", self._storage_options) as index:
                doc_ends = read_doc_ends(index)
        except FileNotFoundError:
            yield DeadLetter(step, "missing_index", f"no {INDEX_SUFFIX} file beside the shard", file=file.url)
            return
        except ValueError as exc:
            yield DeadLetter(step, "invalid_shard", str(exc), file=file.url)
            return
        with contextlib.ExitStack() as stack:
            try:
                loss = stack.enter_context(open_url(file.url + LOSS_SUFFIX, "rb", self._storage_options))
            except FileNotFoundError:
                loss = None
            yield from self._documents(file, stream, loss, doc_ends, dtype, step)

    @staticmethod
    def _documents(file, stream, loss, doc_ends, dtype, step) -> Iterator[TokenizedDocument | DeadLetter]:
        start = 0
        for number, end in enumerate(doc_ends.tolist()):
            count = end - start
            token_bytes = stream.read(count * dtype.itemsize)
            loss_bytes = loss.read(count) if loss else None
            if len(token_bytes) < count * dtype.itemsize or (loss_bytes is not None and len(loss_bytes) < count):
                yield DeadLetter(
                    step,
                    "truncated",
                    f"the index lists {len(doc_ends)} documents and {doc_ends[-1]} tokens; the files end "
                    f"inside document {number}",
                    file=file.url,
                )
                return
            tokens = np.frombuffer(token_bytes, dtype=dtype)
            mask = np.frombuffer(loss_bytes, dtype=np.uint8) if loss_bytes is not None else None
            yield TokenizedDocument(f"{file.name}/{number}", tokens, mask)
            start = end
        if stream.read(1):
            yield DeadLetter(step, "trailing_tokens", "the token file goes on past the index's end", file=file.url)


class ReadTokenShards(FileReader):
    """Reads ``.ds`` shards into :class:`~beamtrove.transforms.tokens.TokenizedDocument` s.

    Shards written by beamtrove or DataTrove (``.ds`` with ``.ds.index``,
    optionally ``.ds.loss`` and ``.ds.metadata``) are read one file per
    bundle, documents in file order, as token arrays (with their loss masks
    when a ``.ds.loss`` exists). Stats and dead letters as for every
    :class:`~beamtrove.transforms.readers.FileReader`.
    """

    element_type = TokenizedDocument

    def __init__(
        self,
        paths: str | Iterable[str],
        *,
        token_size: int = 2,
        skip: int = 0,
        limit: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress_interval: float = 10.0,
        retries: RetryPolicy | None = None,
    ):
        """Matches the shards now.

        Args:
            paths: ``.ds`` files, directories holding them, or glob patterns.
            token_size: Bytes per token of shards without ``.ds.metadata``.
            skip: Documents to skip at the start.
            limit: Stop after this many documents.
            storage_options: fsspec filesystem options.
            progress_interval: Seconds between progress log lines; 0 for none.
            retries: How transient faults of a network or a store are waited
                out while reading; the default policy when None.

        Raises:
            FileNotFoundError: A path matches no ``.ds`` file.
            ValueError: A bad ``token_size``, ``skip`` or ``limit``.
        """
        super().__init__(
            paths,
            TokenShardParser(token_size, storage_options),
            skip=skip,
            limit=limit,
            storage_options=storage_options,
            progress_interval=progress_interval,
            retries=retries,
        )
