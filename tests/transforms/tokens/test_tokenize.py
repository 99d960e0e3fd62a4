"""Tokenize on real text with the real GPT-2 tokenizer."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam import Create, Map
from apache_beam.testing.util import assert_that, equal_to
from tokenizers import Tokenizer

from beamtrove.document import Document
from beamtrove.transforms.tokens import Tokenize, TokenizedDocument
from tests.conftest import run_and_collect

EOS = 50256


def _expected(documents, tokenizer, *, prefix=(), suffix=(EOS,), dtype="<u2"):
    return [
        TokenizedDocument(d.id, np.array([*prefix, *tokenizer.encode(d.text).ids, *suffix], dtype=dtype))
        for d in documents
    ]


def _row(document: TokenizedDocument) -> tuple:
    # Sortable and hashable, so that equal_to compares hundreds of documents quickly.
    return document.id, document.tokens.dtype.str, tuple(document.tokens.tolist())


def test_every_document_becomes_its_encoding_followed_by_eos(udhr_documents, gpt2, gpt2_path):
    documents = udhr_documents[::4]  # 97 languages, 0.8 M tokens
    expected = _expected(documents, gpt2)

    def build(pipeline):
        tokenized = pipeline | Create(documents, reshuffle=False) | Tokenize(gpt2_path, batch_size=20)
        assert_that(tokenized | Map(_row), equal_to([_row(d) for d in expected]))

    stats = run_and_collect(build)["tokenize"]
    assert stats["counters"]["in"] == stats["counters"]["out"] == 97
    assert stats["counters"]["tokens"] == sum(len(d.tokens) for d in expected)
    assert stats["distributions"]["doc_tokens"]["count"] == 97
    assert stats["distributions"]["doc_tokens"]["max"] == max(len(d.tokens) for d in expected)


def test_bos_can_be_added_and_eos_left_out(udhr_documents, gpt2, gpt2_path):
    documents = udhr_documents[:20]
    expected = _expected(documents, gpt2, prefix=(EOS,), suffix=())

    def build(pipeline):
        tokenized = pipeline | Create(documents) | Tokenize(gpt2_path, bos_token="<|endoftext|>", eos_token="")
        assert_that(tokenized, equal_to(expected))

    run_and_collect(build)


def test_a_vocabulary_past_65536_gives_four_byte_ids(udhr_documents, udhr_word_tokenizer):
    words = Tokenizer.from_file(udhr_word_tokenizer)
    transform = Tokenize(udhr_word_tokenizer, eos_token="[EOS]")
    assert transform.token_size == 4
    expected = _expected(udhr_documents[:30], words, suffix=(1,), dtype="<u4")
    assert max(int(d.tokens.max()) for d in expected) > 65535

    def build(pipeline):
        assert_that(pipeline | Create(udhr_documents[:30]) | transform, equal_to(expected))

    run_and_collect(build)


def test_a_missing_tokenizer_or_token_fails_before_the_run(gpt2_path, tmp_path):
    with pytest.raises(FileNotFoundError, match="--tokenizer"):
        Tokenize(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="no '</s>' token; pass --eos_token"):
        Tokenize(gpt2_path, eos_token="</s>")
    (tmp_path / "stats.json").write_text('{"state": "DONE"}')
    with pytest.raises(ValueError, match=r"is not a tokenizers tokenizer\.json"):
        Tokenize(str(tmp_path / "stats.json"))


def test_loss_mask_zeroes_ranges_and_cuts_off_a_range_reaching_the_end(udhr_texts, gpt2, gpt2_path):
    text = udhr_texts["eng"]
    title = "Universal Declaration of Human Rights"
    start = text.index(title)
    title_tokens = len(gpt2.encode(text[:start]).ids), len(gpt2.encode(text[: start + len(title)]).ids)
    half = text.index(" ", len(text) // 2)
    kept_before_cut = len(gpt2.encode(text[:half]).ids)
    documents = [
        Document(text=text, id="prompt", metadata={"no_loss_ranges": [[start, start + len(title)]]}),
        Document(text=text, id="tail", metadata={"no_loss_ranges": [[half, len(text)]]}),
        Document(text=text, id="plain"),
    ]
    full = np.array([*gpt2.encode(text).ids, EOS], dtype="<u2")
    prompt_mask = np.ones(len(full), dtype=np.uint8)
    prompt_mask[title_tokens[0] : title_tokens[1]] = 0
    expected = [
        TokenizedDocument("prompt", full, prompt_mask),
        TokenizedDocument("tail", full[:kept_before_cut], np.ones(kept_before_cut, dtype=np.uint8)),
        TokenizedDocument("plain", full, np.ones(len(full), dtype=np.uint8)),
    ]
    assert title_tokens[1] - title_tokens[0] == 5  # "Universal", " Declaration", " of", " Human", " Rights"

    def build(pipeline):
        assert_that(pipeline | Create(documents) | Tokenize(gpt2_path, loss_mask=True), equal_to(expected))

    run_and_collect(build)


def test_bad_documents_become_dead_letters_and_the_rest_goes_on(udhr_documents, gpt2, gpt2_path):
    good = udhr_documents[:5]
    bad_range = Document(text=udhr_documents[5].text, id="bad-range", metadata={"no_loss_ranges": [[9, 3]]})
    # Readers keep undecodable bytes as lone surrogates; the tokenizer cannot take them.
    surrogate = Document(text="caf\udce9 au lait", id="surrogate")
    expected = [
        TokenizedDocument(t.id, t.tokens, np.ones(len(t.tokens), dtype=np.uint8)) for t in _expected(good, gpt2)
    ]

    def build(pipeline):
        tokenized, dead_letters = (
            pipeline
            | Create([*good, bad_range, surrogate])
            | Tokenize(gpt2_path, loss_mask=True, batch_size=4).with_dead_letters()
        )
        assert_that(tokenized, equal_to(expected))
        reasons = dead_letters | "Reasons" >> Map(lambda d: (d.record_id, d.reason))
        assert_that(
            reasons,
            equal_to([("bad-range", "invalid_no_loss_ranges"), ("surrogate", "encode_failed")]),
            label="DeadLetters",
        )

    counters = run_and_collect(build)["tokenize"]["counters"]
    assert counters["in"] == 7 and counters["out"] == 5
    assert counters["errors.invalid_no_loss_ranges"] == 1 and counters["errors.encode_failed"] == 1


def test_batches_encoded_in_the_background_keep_each_documents_window_and_timestamp(udhr_documents, gpt2_path):
    # Seven documents stamped 1945..1951 and windowed in pairs of years; batches of two are encoded
    # while later ones are gathered, so outputs leave the DoFn after later inputs arrived.
    documents = udhr_documents[:7]

    class WindowStart(beam.DoFn):
        def process(self, tokenized, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
            yield tokenized.id, int(timestamp), int(window.start)

    def build(pipeline):
        stamped = (
            pipeline
            | Create(documents, reshuffle=False)
            | Map(lambda d: beam.window.TimestampedValue(d, 1945 + int(d.id.split("/")[1])))
            | beam.WindowInto(beam.window.FixedWindows(2))
        )
        tokenized = stamped | Tokenize(gpt2_path, batch_size=2)
        expected = [(d.id, 1945 + n, (1945 + n) // 2 * 2) for n, d in enumerate(documents)]
        assert_that(tokenized | beam.ParDo(WindowStart()), equal_to(expected))

    assert run_and_collect(build)["tokenize"]["counters"]["out"] == 7
