"""Token counts: DataTrove's ``TokensCounter`` step and its ``TokenStats`` block."""

from __future__ import annotations

import dataclasses

import apache_beam as beam

from beamtrove.document import Document
from beamtrove.metrics import StepMetrics
from beamtrove.resources import load_once
from beamtrove.transforms.batching import BatchDoFn
from beamtrove.transforms.summary.base import StatsBlock
from beamtrove.transforms.tokens import load_tokenizer

__all__ = ["TOKEN_COUNT_KEY", "CountTokens", "TokenStats"]

#: The metadata key of a document's token count (DataTrove's).
TOKEN_COUNT_KEY = "token_count"


def _shared_tokenizer(path: str):
    """The tokenizer of ``path`` with its own post-processing, no token added: loaded once per process."""
    return load_once((_shared_tokenizer, path), lambda: load_tokenizer(path, eos_token=None))


class _CountTokensFn(BatchDoFn):
    def __init__(self, tokenizer: str, count_eos_token: bool, batch_size: int, step: str):
        super().__init__(batch_size)
        self._tokenizer_path = tokenizer
        self._extra = int(count_eos_token)
        self._metrics = StepMetrics(step)

    def setup(self):
        self._tokenizer = _shared_tokenizer(self._tokenizer_path)

    def transform_batch(self, documents: list[Document], begun: None) -> list[Document]:
        self._metrics.received(len(documents))
        encodings = self._tokenizer.encode_batch([document.text for document in documents])
        counted = [
            dataclasses.replace(
                document, metadata={**document.metadata, TOKEN_COUNT_KEY: len(encoding.ids) + self._extra}
            )
            for document, encoding in zip(documents, encodings, strict=True)
        ]
        self._metrics.emitted(len(counted))
        self._metrics.inc("tokens", sum(document.metadata[TOKEN_COUNT_KEY] for document in counted))
        return counted


class CountTokens(beam.PTransform):
    """Sets each document's ``token_count`` metadata, what DataTrove's ``TokensCounter`` does.

    Texts are encoded in batches with a HuggingFace ``tokenizer.json``, with
    the tokenizer's own post-processing and no end-of-text token (unless
    ``count_eos_token`` adds one per document). Counters of ``step``: ``in``,
    ``out`` and ``tokens``, the tokens of every document.

    Args:
        tokenizer: Path or fsspec URL of a ``tokenizer.json``; loaded now, so a wrong one fails before the run.
        count_eos_token: Count one more token per document.
        batch_size: Documents encoded together.
        step: Stats name of the step.

    Raises:
        FileNotFoundError: No tokenizer at ``tokenizer``.
        ValueError: The file is no tokenizer, or ``batch_size`` < 1.
    """

    def __init__(
        self, tokenizer: str, count_eos_token: bool = False, batch_size: int = 1000, step: str = "count_tokens"
    ):
        super().__init__()
        _shared_tokenizer(tokenizer)
        self._fn = _CountTokensFn(tokenizer, count_eos_token, batch_size, step)

    def step_fn(self) -> beam.DoFn:
        """The DoFn this transform applies, for running the step inside another DoFn."""
        return self._fn

    def expand(self, documents):
        return documents | beam.ParDo(self._fn)


class TokenStats(StatsBlock):
    """``token_count``: a document's ``token_count`` metadata (set by :class:`CountTokens` or a tokenizer),
    or, when it has none, the tokens ``tokenizer`` encodes its text into.

    Args:
        tokenizer: Path or URL of a ``tokenizer.json`` for documents without a count; None to require one.

    Raises:
        FileNotFoundError: No tokenizer at ``tokenizer``.
    """

    name = "token"

    def __init__(self, tokenizer: str | None = None):
        if tokenizer is not None:
            _shared_tokenizer(tokenizer)
        self.tokenizer = tokenizer

    def setup(self) -> None:
        self._tokenizer = _shared_tokenizer(self.tokenizer) if self.tokenizer is not None else None

    def extract(self, document: Document) -> dict[str, int | float]:
        count = document.metadata.get(TOKEN_COUNT_KEY)
        if count is None:
            if self._tokenizer is None:
                raise ValueError(
                    f"Document {document.id} has no {TOKEN_COUNT_KEY} metadata: give the token statistics a tokenizer."
                )
            count = len(self._tokenizer.encode(document.text).ids)
        return {TOKEN_COUNT_KEY: count}
