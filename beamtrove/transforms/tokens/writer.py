"""A Beam sink that writes tokenized documents into sharded ``.ds`` files or Megatron datasets.

Writing takes three steps:

1. Every document is assigned one of ``num_shards`` shards from a hash of its
   id (and the seed, when shuffling), and a ``GroupByKey`` gathers each shard.
2. One worker per shard spools the shard's tokens to a local temporary file
   while keeping a small index of them, sorts that index, and copies the
   documents in order into the shard's files (``.ds`` with its companions, or
   Megatron's ``.bin`` and ``.idx``) under ``<output>/.beamtrove-tmp-<run id>/``,
   starting a new file before one would exceed ``max_tokens_per_file``.
   Memory holds the index, never the tokens.
3. A single finalize step moves every file to its final name and removes the
   temporary directory, so a failed run never leaves a file that looks done.

The order inside a shard is the documents' id order (digit runs compared as
numbers, so ``f/2`` comes before ``f/10``: a reader's ``<file>/<row>`` ids keep
the input order) or, with a seed, a seeded pseudo-random order. With a
:class:`ChunkShuffle`, chunks of a fixed number of tokens are shuffled instead
of documents, with numpy's ``default_rng(seed)`` per shard, drawn as DataTrove
draws it. Shard assignment and order depend on ids and the seed only, so the
same input gives byte-identical files on any runner, with any number of
workers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
import numpy as np

from beamtrove.fs import filesystem, join
from beamtrove.layout import WRITER_TEMP_PREFIX
from beamtrove.metrics import StepMetrics
from beamtrove.transforms.stages import KEYED, SAME, Stage, StagedForm, apply_stages
from beamtrove.transforms.tokens.format import TokenizedDocument
from beamtrove.transforms.tokens.shard_files import (
    TOKEN_FILE_FORMATS,
    existing_shard_files,
    move_part,
    open_shard_file,
    part_files,
    shard_file_name,
)
from beamtrove.transforms.writers.base import WrittenFile

__all__ = ["TOKEN_FILE_FORMATS", "ChunkShuffle", "WriteTokenShards", "shard_file_name"]

_DIGIT_RUNS = re.compile(r"(\d+)")
_VALID_PREFIX = re.compile(r"[\w.=+-]+")


@dataclasses.dataclass(frozen=True)
class ChunkShuffle:
    """Shuffle chunks of ``size`` tokens instead of whole documents, as DataTrove does.

    Each shard's documents are taken in id order, permuted first when
    ``shuffle_documents``, joined and cut into chunks of ``size`` tokens (the
    last, shorter chunk is dropped); the chunks are permuted and written,
    each document piece an entry of the index. Both permutations come from
    one ``numpy.random.default_rng(seed)`` per shard, so a single shard
    equals DataTrove's output from the same seed: with ``shuffle_documents``,
    its ``DocumentTokenizer(shuffle_chunk_size=size)``; without, its
    ``DocumentTokenizerContextShuffler(window_size=size)`` over the documents
    in id order.

    Attributes:
        size: Tokens per chunk.
        shuffle_documents: Permute the documents before cutting them into chunks.
    """

    size: int
    shuffle_documents: bool = True


def _natural_key(doc_id: str) -> tuple:
    # re.split with a group alternates text and digit runs, so the same
    # position always holds the same type and the tuples compare.
    parts = _DIGIT_RUNS.split(doc_id)
    parts[1::2] = map(int, parts[1::2])
    return tuple(parts), doc_id


@dataclasses.dataclass(frozen=True)
class _ShardSpec:
    step: str
    output_dir: str
    temp_dir: str
    prefix: str
    tokenizer: str
    file_format: str
    num_shards: int
    seed: int | None
    chunks: ChunkShuffle | None
    max_tokens_per_file: int | None
    overwrite: bool
    storage_options: Mapping[str, Any]

    def _digest(self, doc_id: str) -> bytes:
        salt = b"unshuffled" if self.seed is None else str(self.seed).encode()
        return hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=16, key=salt).digest()

    def shard_of(self, doc_id: str) -> int:
        return int.from_bytes(self._digest(doc_id)[:8], "little") % self.num_shards

    def order_key(self, doc_id: str) -> Any:
        # Chunk shuffling permutes documents itself, from the id order.
        if self.seed is None or self.chunks is not None:
            return _natural_key(doc_id)
        return self._digest(doc_id)[8:], doc_id


@dataclasses.dataclass(frozen=True)
class _SpooledDocument:
    order: Any
    offset: int
    length: int
    #: Where its loss mask starts in the loss spool; None when it has none (every token counts).
    loss_offset: int | None

    def piece(self, start: int, length: int) -> _SpooledDocument:
        """The ``length`` tokens from ``start`` on, as a document of their own."""
        loss_offset = None if self.loss_offset is None else self.loss_offset + start
        return dataclasses.replace(self, offset=self.offset + start, length=length, loss_offset=loss_offset)


def _order_duplicates(spooled: list[_SpooledDocument], token_spool, token_size: int) -> None:
    """Orders each run of documents with one id (sorted next to each other) by a digest of their tokens.

    The runner decides in which order they reach the spool; their tokens make
    the order the same on every run.
    """

    def digest(document: _SpooledDocument) -> bytes:
        token_spool.seek(document.offset * token_size)
        return hashlib.blake2b(token_spool.read(document.length * token_size), digest_size=8).digest()

    start = 0
    for end in range(1, len(spooled) + 1):
        if end == len(spooled) or spooled[end].order != spooled[start].order:
            if end - start > 1:
                spooled[start:end] = sorted(spooled[start:end], key=lambda doc: (digest(doc), doc.offset))
            start = end


def _assign_shard(document: TokenizedDocument, spec: _ShardSpec) -> tuple[int, TokenizedDocument]:
    return spec.shard_of(document.id), document


class _WriteShardFn(beam.DoFn):
    """Writes the documents of one shard, in order, into temporary ``.ds`` files."""

    def __init__(self, spec: _ShardSpec):
        self._spec = spec
        self._metrics = StepMetrics(spec.step)

    def process(self, keyed: tuple[int, Iterable[TokenizedDocument]]) -> Iterator[WrittenFile]:
        shard, documents = keyed
        with tempfile.TemporaryFile() as token_spool, tempfile.TemporaryFile() as loss_spool:
            spooled, dtype = self._spool(documents, token_spool, loss_spool)
            if not spooled:
                return
            with_loss = any(document.loss_offset is not None for document in spooled)
            spooled.sort(key=lambda doc: (doc.order, doc.offset))
            _order_duplicates(spooled, token_spool, dtype.itemsize)
            units = [[document] for document in spooled] if self._spec.chunks is None else self._chunks(spooled)
            for part, units_of_part in enumerate(self._split(units)):
                pieces = [piece for unit in units_of_part for piece in unit]
                yield self._write_part(shard, part, pieces, token_spool, loss_spool, dtype, with_loss)

    def _spool(self, documents, token_spool, loss_spool) -> tuple[list[_SpooledDocument], np.dtype | None]:
        spooled: list[_SpooledDocument] = []
        dtype = None
        offset = 0
        for document in documents:
            if dtype is None:
                dtype = document.tokens.dtype.newbyteorder("<")
            elif document.tokens.itemsize != dtype.itemsize:
                raise ValueError(
                    f"Document {document.id!r} has {document.tokens.itemsize}-byte tokens where others of its shard "
                    f"have {dtype.itemsize}-byte ones: tokenize a dataset with one tokenizer."
                )
            token_bytes = document.tokens.astype(dtype, copy=False).tobytes()
            token_spool.write(token_bytes)
            loss_offset = None
            if document.loss_mask is not None:
                loss_offset = loss_spool.tell()
                loss_spool.write(document.loss_mask.astype(np.uint8, copy=False).tobytes())
            order = self._spec.order_key(document.id)
            spooled.append(_SpooledDocument(order, offset, len(document.tokens), loss_offset))
            offset += len(document.tokens)
        self._metrics.received(len(spooled))
        return spooled, dtype

    def _chunks(self, spooled: list[_SpooledDocument]) -> list[list[_SpooledDocument]]:
        """The shard's chunks in shuffled order, each the pieces of the documents it holds."""
        size = self._spec.chunks.size
        generator = np.random.default_rng(self._spec.seed)
        if self._spec.chunks.shuffle_documents:
            spooled = [spooled[i] for i in generator.permutation(len(spooled))]
        chunks: list[list[_SpooledDocument]] = []
        chunk: list[_SpooledDocument] = []
        filled = 0
        for document in spooled:
            taken = 0
            while taken < document.length:
                length = min(document.length - taken, size - filled)
                chunk.append(document.piece(taken, length))
                taken += length
                filled += length
                if filled == size:
                    chunks.append(chunk)
                    chunk, filled = [], 0
        return [chunks[i] for i in generator.permutation(len(chunks))]

    def _split(self, units: list[list[_SpooledDocument]]) -> Iterator[list[list[_SpooledDocument]]]:
        """Groups documents (or chunks) into files of at most ``max_tokens_per_file`` tokens."""
        limit = self._spec.max_tokens_per_file
        part: list[list[_SpooledDocument]] = []
        tokens = 0
        for unit in units:
            length = sum(piece.length for piece in unit)
            # A unit longer than the limit gets a file of its own rather than being cut.
            if limit is not None and part and tokens + length > limit:
                yield part
                part, tokens = [], 0
            part.append(unit)
            tokens += length
        if part:
            yield part

    def _write_part(self, shard, part, documents, token_spool, loss_spool, dtype, with_loss) -> WrittenFile:
        spec = self._spec
        name = shard_file_name(spec.prefix, shard, part, spec.file_format)
        writer = open_shard_file(
            join(spec.temp_dir, name),
            spec.file_format,
            tokenizer=spec.tokenizer,
            token_size=dtype.itemsize,
            with_loss=with_loss,
            storage_options=spec.storage_options,
        )
        for document in documents:
            token_spool.seek(document.offset * dtype.itemsize)
            token_bytes = token_spool.read(document.length * dtype.itemsize)
            loss_bytes = None
            if with_loss and document.loss_offset is None:
                loss_bytes = b"\x01" * document.length
            elif with_loss:
                loss_spool.seek(document.loss_offset)
                loss_bytes = loss_spool.read(document.length)
            writer.append(token_bytes, loss_bytes)
        writer.close()
        self._metrics.emitted(writer.document_count)
        self._metrics.inc("tokens", writer.token_count)
        self._metrics.observe("file_tokens", writer.token_count)
        return WrittenFile(writer.path, writer.document_count, writer.token_count * dtype.itemsize, name)


class _FinalizeFn(beam.DoFn):
    """Moves every shard file and its companions to their final names."""

    def __init__(self, spec: _ShardSpec):
        self._spec = spec

    def process(self, written: list[WrittenFile]) -> Iterator[WrittenFile]:
        spec = self._spec
        metrics = StepMetrics(spec.step)
        fs, _ = filesystem(spec.output_dir, spec.storage_options)
        finals = {join(spec.output_dir, temp.destination): temp for temp in written}
        if spec.overwrite:
            parts = (file for final in finals for file in part_files(final, spec.file_format))
            keep = {filesystem(file, spec.storage_options)[1] for file in parts}
            for stale in existing_shard_files(spec.output_dir, spec.prefix, spec.file_format, spec.storage_options):
                if stale not in keep:
                    fs.rm(stale)
        for final in sorted(finals):
            temp = finals[final]
            move_part(temp.path, final, spec.file_format, spec.storage_options)
            metrics.inc("files")
            yield dataclasses.replace(temp, path=final)
        temp_path = filesystem(spec.temp_dir, spec.storage_options)[1]
        if fs.exists(temp_path):
            fs.rm(temp_path, recursive=True)


class WriteTokenShards(beam.PTransform):
    """Writes :class:`~beamtrove.transforms.tokens.TokenizedDocument` s as ``.ds`` shards or Megatron datasets.

    In the ``ds`` format, each shard becomes ``<prefix>_<shard>_<part>.ds``
    with its ``.ds.index``, ``.ds.metadata`` and, when documents carry loss
    masks, ``.ds.loss``; see :mod:`beamtrove.transforms.tokens.format`. In the
    ``megatron`` format, it becomes the Megatron-LM dataset
    ``<prefix>_<shard>_<part>`` (``.bin`` and ``.idx``, see
    :mod:`beamtrove.transforms.tokens.megatron`). Empty shards produce no
    file. The output is a ``PCollection`` of
    :class:`~beamtrove.transforms.writers.WrittenFile` (final ``.ds`` or
    ``.bin`` paths, index entries, token bytes). Stats: ``in``, ``out`` (index
    entries: documents, or document pieces with a :class:`ChunkShuffle`),
    ``tokens``, ``files`` and the ``file_tokens`` distribution.
    """

    def __init__(
        self,
        output_dir: str,
        *,
        tokenizer: str,
        file_format: str = "ds",
        num_shards: int = 1,
        seed: int | None = None,
        chunks: ChunkShuffle | None = None,
        max_tokens_per_file: int | None = None,
        prefix: str = "tokens",
        overwrite: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        step: str = "write_tokens",
    ):
        """Validates the configuration and checks the output for earlier shards.

        Args:
            output_dir: Directory (path or fsspec URL) of the shards.
            tokenizer: Tokenizer name recorded in every ``.ds.metadata``.
            file_format: One of :data:`TOKEN_FILE_FORMATS`: ``ds`` or ``megatron``.
            num_shards: Shards to spread documents over; one worker writes each.
            seed: Shuffle documents with this seed (same seed, same files);
                None keeps them in id order.
            chunks: Shuffle chunks of tokens instead of documents (``ds``
                format only; needs ``seed``).
            max_tokens_per_file: Split a shard into several files so that none
                holds more tokens (unless a single document, or chunk, does).
            prefix: Start of the file names.
            overwrite: Replace shards of an earlier run under the same prefix
                (they are removed once the new files are complete) instead of
                refusing to run.
            storage_options: fsspec filesystem options.
            step: Stats name of the step.

        Raises:
            ValueError: A non-positive count, a prefix that is not a plain
                name, an unknown format, or chunks without a seed or in the
                ``megatron`` format.
            FileExistsError: ``output_dir`` already holds ``<prefix>_*`` files
                of the format and ``overwrite`` is False.
        """
        super().__init__()
        if file_format not in TOKEN_FILE_FORMATS:
            raise ValueError(f"Token files are written as {' or '.join(TOKEN_FILE_FORMATS)}, not {file_format!r}.")
        if num_shards < 1:
            raise ValueError(f"num_shards must be at least 1 (got {num_shards}).")
        if chunks is not None and chunks.size < 1:
            raise ValueError(f"Chunks must hold at least one token (got {chunks.size}).")
        if chunks is not None and seed is None:
            raise ValueError(
                "Shuffling chunks needs a seed (--shuffle_seed), so that the same input gives the same files."
            )
        if chunks is not None and file_format == "megatron":
            raise ValueError("Megatron files hold whole documents: chunks are shuffled in .ds shards only.")
        if max_tokens_per_file is not None and max_tokens_per_file < 1:
            raise ValueError(f"max_tokens_per_file must be positive (got {max_tokens_per_file}).")
        if not _VALID_PREFIX.fullmatch(prefix):
            raise ValueError(f"The file name prefix {prefix!r} may only hold letters, digits and . _ = + -.")
        storage_options = dict(storage_options or {})
        existing = existing_shard_files(output_dir, prefix, file_format, storage_options)
        if existing and not overwrite:
            raise FileExistsError(
                f"{output_dir} already holds {len(existing)} token files named {prefix}_*: choose another "
                "output or prefix, or pass overwrite=True (--overwrite) to replace them."
            )
        self._spec_args = dict(
            step=step,
            output_dir=output_dir.rstrip("/"),
            prefix=prefix,
            tokenizer=tokenizer,
            file_format=file_format,
            num_shards=num_shards,
            seed=seed,
            chunks=chunks,
            max_tokens_per_file=max_tokens_per_file,
            overwrite=overwrite,
            storage_options=storage_options,
        )

    def staged_form(self, partitions: int = 1) -> StagedForm:
        """The sink as stages: documents keyed by shard, then each partition's shards written and finalized.

        Finalizing moves files to the names their shards give them, so each
        partition's shards can be finalized on their own: in one pipeline the
        partition is the whole input and there is one finalize, as before.
        """
        spec = _ShardSpec(
            temp_dir=join(self._spec_args["output_dir"], f"{WRITER_TEMP_PREFIX}{uuid.uuid4().hex}"), **self._spec_args
        )
        return StagedForm(
            (
                Stage("AssignShards", {"documents": ("documents",)}, _AssignShards(spec), {"assigned": KEYED}),
                Stage("WriteShards", {"assigned": ("assigned",)}, _WriteShards(spec), {"finalized": SAME}),
            ),
            input="documents",
            kept=(),
        )

    def expand(self, documents):
        return apply_stages(self.staged_form(), documents)["finalized"]


class _AssignShards:
    def __init__(self, spec: _ShardSpec):
        self._spec = spec

    def __call__(self, pipeline, inputs, sides):
        assign = beam.Map(_assign_shard, self._spec).with_output_types(tuple[int, TokenizedDocument])
        return {"assigned": inputs["documents"] | "AssignShards" >> assign}


class _WriteShards:
    def __init__(self, spec: _ShardSpec):
        self._spec = spec

    def __call__(self, pipeline, inputs, sides):
        finalized = (
            inputs["assigned"]
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(_WriteShardFn(self._spec))
            | "CollectShardFiles" >> beam.combiners.ToList()
            | "Finalize" >> beam.ParDo(_FinalizeFn(self._spec))
        )
        return {"finalized": finalized}
