"""The .ds layout, checked against its definition (not against our own reader)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from beamtrove.transforms.tokens import (
    ShardFileWriter,
    TokenizedDocument,
    TokenizedDocumentCoder,
    humanized_token_count,
    parse_metadata,
    read_doc_ends,
    token_dtype,
)


@pytest.mark.parametrize(
    ("vocab_size", "expected"), [(50257, "<u2"), (50280, "<u2"), (65536, "<u2"), (65537, "<u4"), (204818, "<u4")]
)
def test_token_width_follows_the_vocabulary_size(vocab_size, expected):
    assert token_dtype(vocab_size) == np.dtype(expected)


def test_token_width_can_be_given_in_bytes_and_must_be_2_or_4():
    assert token_dtype(token_size=4) == np.dtype("<u4")
    with pytest.raises(ValueError, match="2- or 4-byte"):
        token_dtype(token_size=8)


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0.00 T"),
        (5, "5.00 T"),
        (25, "25.0 T"),
        (999, "999 T"),
        (1000, "1.00 kT"),
        (9999, "10.0 kT"),
        (99999, "100 kT"),
        (999999, "1.00 MT"),
        (4_453_211, "4.45 MT"),
        (123_456_789, "123 MT"),
        (10**12, "1.00 TT"),
    ],
)
def test_humanized_count_has_three_significant_digits_and_an_si_prefix(count, text):
    assert humanized_token_count(count) == text


def test_shard_files_follow_the_layout(tmp_path, gpt2, udhr_texts):
    texts = [udhr_texts["eng"], udhr_texts["fra"], ""]
    encodings = [[*gpt2.encode(text).ids, 50256] for text in texts]
    masks = [np.ones(len(ids), dtype=np.uint8) for ids in encodings]
    masks[1][:10] = 0
    path = str(tmp_path / "shard.ds")
    writer = ShardFileWriter(path, tokenizer="gpt2/tokenizer.json", token_size=2, with_loss=True)
    for ids, mask in zip(encodings, masks, strict=True):
        writer.append(np.array(ids, dtype="<u2").tobytes(), mask.tobytes())
    writer.close()

    total = sum(len(ids) for ids in encodings)
    raw = (tmp_path / "shard.ds").read_bytes()
    assert len(raw) == 2 * total
    assert list(np.frombuffer(raw, dtype="<u2")) == [token for ids in encodings for token in ids]
    # uint64 little-endian cumulative ends, no leading 0, the last one is the token count.
    ends = [len(encodings[0]), len(encodings[0]) + len(encodings[1]), total]
    assert (tmp_path / "shard.ds.index").read_bytes() == b"".join(end.to_bytes(8, "little") for end in ends)
    assert (tmp_path / "shard.ds.loss").read_bytes() == b"".join(mask.tobytes() for mask in masks)
    assert (
        tmp_path / "shard.ds.metadata"
    ).read_text() == f"gpt2/tokenizer.json|2\n{total}\n{humanized_token_count(total)}"
    assert parse_metadata((tmp_path / "shard.ds.metadata").read_text()) == ("gpt2/tokenizer.json", 2, total)


def test_index_reading_rejects_partial_entries_and_decreasing_ends():
    assert list(read_doc_ends(io.BytesIO(np.array([3, 3, 9], dtype="<u8").tobytes()))) == [3, 3, 9]
    with pytest.raises(ValueError, match="whole number"):
        read_doc_ends(io.BytesIO(b"\x01" * 12))
    with pytest.raises(ValueError, match="decrease"):
        read_doc_ends(io.BytesIO(np.array([5, 4], dtype="<u8").tobytes()))


def test_metadata_parsing_refuses_other_files():
    with pytest.raises(ValueError, match="not a token metadata file"):
        parse_metadata('{"state": "DONE"}')


def test_coder_round_trips_both_widths_and_masks(gpt2, udhr_texts):
    ids = gpt2.encode(udhr_texts["cym"]).ids
    documents = [
        TokenizedDocument("a/0", np.array(ids, dtype="<u2")),
        TokenizedDocument("a/1", np.array(ids, dtype="<u4") + 70000, np.arange(len(ids), dtype=np.uint8) % 2),
        TokenizedDocument("a/\U0001f600", np.array([], dtype="<u2"), np.array([], dtype=np.uint8)),
    ]
    coder = TokenizedDocumentCoder()
    for document in documents:
        encoded = coder.encode(document)
        assert coder.encode(coder.decode(encoded)) == encoded
        assert coder.decode(encoded) == document
        assert coder.estimate_size(document) == len(encoded)
    assert documents[0] != documents[1]


def test_a_mask_must_cover_every_token():
    with pytest.raises(ValueError, match="loss mask"):
        TokenizedDocument("x", np.zeros(3, dtype="<u2"), np.ones(2, dtype=np.uint8))
