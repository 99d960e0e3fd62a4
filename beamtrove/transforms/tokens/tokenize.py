"""Tokenizing documents with a HuggingFace ``tokenizers`` model, batch by batch."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import pvalue
from tokenizers import Tokenizer
from tokenizers.processors import TemplateProcessing

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.fs import join, open_url
from beamtrove.layout import DEAD_LETTERS
from beamtrove.metrics import StepMetrics
from beamtrove.resources import load_once
from beamtrove.transforms.batching import BatchDoFn
from beamtrove.transforms.tokens.format import TokenizedDocument, token_dtype

__all__ = ["DEFAULT_EOS_TOKEN", "NO_LOSS_RANGES_KEY", "Tokenize", "TokenizerSpec", "load_tokenizer"]

DEFAULT_EOS_TOKEN = "<|endoftext|>"
NO_LOSS_RANGES_KEY = "no_loss_ranges"
"""Metadata key of ``[start, end)`` character ranges whose tokens the loss mask zeroes (DataTrove's name)."""


def load_tokenizer(
    path: str,
    *,
    eos_token: str | None = DEFAULT_EOS_TOKEN,
    bos_token: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
):
    """Loads a ``tokenizer.json`` and makes it add ``bos_token``/``eos_token`` around every text.

    With neither token, the tokenizer keeps its own post-processing.

    Args:
        path: A ``tokenizer.json`` path or fsspec URL.
        eos_token: Token appended to every document, or None.
        bos_token: Token prepended to every document, or None.
        storage_options: fsspec filesystem options.

    Raises:
        FileNotFoundError: No file at ``path``.
        ValueError: The path is a folder or no tokenizer, or the tokenizer lacks one of the tokens.
    """
    try:
        with open_url(path, "rb", storage_options) as stream:
            tokenizer = Tokenizer.from_str(stream.read().decode("utf-8"))
    except IsADirectoryError:
        raise ValueError(
            f"{path} is a folder: pass --tokenizer with the tokenizer.json it holds "
            f"({join(path, 'tokenizer.json')}), the file HuggingFace model repositories ship."
        ) from None
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"No tokenizer at {path}: pass --tokenizer with the path or URL of a tokenizer.json "
            "(the file HuggingFace model repositories ship, e.g. gpt2/tokenizer.json)."
        ) from exc
    except Exception as exc:  # tokenizers raises a bare Exception on malformed JSON
        raise ValueError(f"{path} is not a tokenizers tokenizer.json: {exc}") from exc
    bos_id = _token_id(tokenizer, path, bos_token, "bos", "beginning")
    eos_id = _token_id(tokenizer, path, eos_token, "eos", "end")
    if bos_id is not None or eos_id is not None:
        specials = [(name, i) for name, i in (("<BOS>", bos_id), ("<EOS>", eos_id)) if i is not None]
        template = " ".join(["<BOS>"] * (bos_id is not None) + ["$A"] + ["<EOS>"] * (eos_id is not None))
        tokenizer.post_processor = TemplateProcessing(single=template, special_tokens=specials)
    return tokenizer


def _token_id(tokenizer, path: str, token: str | None, option: str, end: str) -> int | None:
    if not token:
        return None
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ValueError(
            f"The tokenizer {path} has no {token!r} token; pass --{option}_token with its "
            f"{end}-of-text token, or --{option}_token '' to add none."
        )
    return token_id


def _loss_mask(encoding, text_length: int, ranges: Any) -> np.ndarray:
    """1 per token, 0 for tokens of the ``no_loss_ranges``.

    As in DataTrove, a range reaching the end of the text is cut off instead of
    masked (with the tokens after it, such as EOS): nothing is learnt from it.

    Raises:
        ValueError: ``ranges`` is not a list of ``[start, end]`` character offsets.
    """
    mask = np.ones(len(encoding.ids), dtype=np.uint8)
    if not isinstance(ranges, list):
        raise ValueError(f"{NO_LOSS_RANGES_KEY} must be a list of [start, end] pairs, not {type(ranges).__name__}")
    for pair in ranges:
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(v, int) for v in pair)):
            raise ValueError(f"{NO_LOSS_RANGES_KEY} entry {pair!r} is not a [start, end] pair of integers")
        start, end = pair
        if not 0 <= start <= end:
            raise ValueError(f"{NO_LOSS_RANGES_KEY} entry {pair!r} does not satisfy 0 <= start <= end")
        first = encoding.char_to_token(start) if start < text_length else None
        if first is None or first >= len(mask):
            continue
        after = encoding.char_to_token(end) if end < text_length else None
        if after is None or after >= len(mask):
            mask = mask[:first]
        else:
            mask[first:after] = 0
    return mask


class _TokenizeFn(BatchDoFn):
    # The tokenizer releases the GIL while it encodes, so batches are encoded
    # in the background while the next one is gathered and earlier ones are
    # emitted; two at once keep every core busy while one batch finishes its
    # longest documents.
    in_flight = 2

    def __init__(self, spec: TokenizerSpec, batch_size: int, with_loss_mask: bool, step: str):
        super().__init__(batch_size)
        self._spec = spec
        self._with_loss_mask = with_loss_mask
        self._step = step
        self._metrics = StepMetrics(step)

    def setup(self):
        self._tokenizer = load_once(self._spec, self._spec.load)
        self._dtype = token_dtype(self._tokenizer.get_vocab_size())
        # Offsets are only needed to place loss masks; without them encoding skips computing them.
        encode_fast = getattr(self._tokenizer, "encode_batch_fast", None)
        self._encode = self._tokenizer.encode_batch if self._with_loss_mask or encode_fast is None else encode_fast
        self._encoder = concurrent.futures.ThreadPoolExecutor(max_workers=self.in_flight, thread_name_prefix="encode")

    def teardown(self):
        self._encoder.shutdown()

    def begin_batch(self, documents: list[Document]) -> concurrent.futures.Future:
        return self._encoder.submit(self._encode, [document.text for document in documents])

    def transform_batch(self, documents: list[Document], encoding: concurrent.futures.Future) -> list:
        self._metrics.received(len(documents))
        try:
            encodings = encoding.result()
        except Exception:  # the batch is encoded again one by one to find the culprit
            outputs = [self._tokenize_alone(document) for document in documents]
        else:
            outputs = [self._output(doc, encoded) for doc, encoded in zip(documents, encodings, strict=True)]
        tokenized = [output for output in outputs if isinstance(output, TokenizedDocument)]
        self._metrics.emitted(len(tokenized))
        self._metrics.inc("tokens", sum(len(output.tokens) for output in tokenized))
        return outputs

    def _tokenize_alone(self, document: Document):
        try:
            (encoding,) = self._encode([document.text])
        except Exception as exc:
            return self._dead_letter(document, "encode_failed", exc)
        return self._output(document, encoding)

    def _output(self, document: Document, encoding):
        # From a list, np.array converts in one pass over it; np.fromiter goes through the iterator protocol.
        tokens = np.array(encoding.ids, dtype=self._dtype)
        mask = None
        if self._with_loss_mask:
            try:
                mask = _loss_mask(encoding, len(document.text), document.metadata.get(NO_LOSS_RANGES_KEY, []))
            except ValueError as exc:
                return self._dead_letter(document, "invalid_no_loss_ranges", exc)
            tokens = tokens[: len(mask)]
        self._metrics.observe("doc_tokens", len(tokens))
        return TokenizedDocument(document.id, tokens, mask)

    def _dead_letter(self, document: Document, reason: str, exc: Exception):
        self._metrics.errored(reason)
        return pvalue.TaggedOutput(
            DEAD_LETTERS, DeadLetter.of_document(self._step, reason, DeadLetter.describe(exc), document)
        )


class TokenizerSpec:
    """How to load the tokenizer on a worker; hashable, so workers share one per process."""

    def __init__(self, path: str, eos_token: str | None, bos_token: str | None, storage_options: Mapping[str, Any]):
        self.path = path
        self.eos_token = eos_token
        self.bos_token = bos_token
        self.storage_options = dict(storage_options)

    def _key(self):
        return (self.path, self.eos_token, self.bos_token, tuple(sorted(map(repr, self.storage_options.items()))))

    def __eq__(self, other):
        return isinstance(other, TokenizerSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def load(self):
        return load_tokenizer(
            self.path, eos_token=self.eos_token, bos_token=self.bos_token, storage_options=self.storage_options
        )


class Tokenize(beam.PTransform):
    """Turns documents into :class:`~beamtrove.transforms.tokens.TokenizedDocument` s.

    Texts are encoded ``batch_size`` at a time with the tokenizer's
    multi-threaded ``encode_batch``, each followed by ``eos_token`` (and
    preceded by ``bos_token``). With ``loss_mask``, every output carries a mask
    that zeroes the tokens of the character ranges listed in the document's
    ``no_loss_ranges`` metadata. Stats: ``in``, ``out``, ``tokens`` and the
    ``doc_tokens`` distribution; documents the tokenizer fails on, or with
    malformed ranges, become dead letters (``errors.encode_failed``,
    ``errors.invalid_no_loss_ranges``), returned by :meth:`with_dead_letters`.
    """

    def __init__(
        self,
        tokenizer: str,
        *,
        eos_token: str | None = DEFAULT_EOS_TOKEN,
        bos_token: str | None = None,
        loss_mask: bool = False,
        batch_size: int = 1000,
        storage_options: Mapping[str, Any] | None = None,
        step: str = "tokenize",
    ):
        """Loads the tokenizer once now, so a wrong path or token fails before the run.

        Args:
            tokenizer: Path or fsspec URL of a ``tokenizer.json``.
            eos_token: Appended to every document; None or ``""`` for none.
            bos_token: Prepended to every document; None or ``""`` for none.
            loss_mask: Output loss masks (for ``.ds.loss`` files).
            batch_size: Documents encoded together.
            storage_options: fsspec filesystem options for ``tokenizer``.
            step: Stats name of the step.

        Raises:
            FileNotFoundError: No tokenizer at ``tokenizer``.
            ValueError: A token is not in the vocabulary, or ``batch_size`` < 1.
        """
        super().__init__()
        self._spec = TokenizerSpec(tokenizer, eos_token or None, bos_token or None, storage_options or {})
        loaded = load_once(self._spec, self._spec.load)
        self.tokenizer = tokenizer
        self.token_size = token_dtype(loaded.get_vocab_size()).itemsize
        self._fn = _TokenizeFn(self._spec, batch_size, loss_mask, step)
        self._dead_letters = False

    def with_dead_letters(self) -> Tokenize:
        """Makes the transform return ``(tokenized, dead_letters)``."""
        self._dead_letters = True
        return self

    def step_fn(self) -> beam.DoFn:
        """The DoFn this transform applies, for running the step inside another DoFn."""
        return self._fn

    def expand(self, documents):
        outputs = documents | beam.ParDo(self._fn).with_outputs(DEAD_LETTERS, main="tokenized")
        outputs.tokenized.element_type = TokenizedDocument
        return (outputs.tokenized, outputs[DEAD_LETTERS]) if self._dead_letters else outputs.tokenized
