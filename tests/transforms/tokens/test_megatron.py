"""MegatronFileWriter: the .bin and .idx of Megatron-LM's indexed dataset, on UDHR texts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tokenizers import Tokenizer

from beamtrove.transforms.tokens import MegatronFileWriter, megatron_dtype_code


def _index(path) -> dict:
    """The fields of a ``.idx`` file, read from the layout Megatron-LM defines."""
    data = path.read_bytes()
    version, code, sequences, documents = struct.unpack_from("<QBQQ", data, 9)
    offset = 9 + 25
    lengths = np.frombuffer(data, "<i4", sequences, offset)
    pointers = np.frombuffer(data, "<i8", sequences, offset + 4 * sequences)
    indices = np.frombuffer(data, "<i8", documents, offset + 12 * sequences)
    assert len(data) == offset + 12 * sequences + 8 * documents
    return dict(magic=data[:9], version=version, code=code, lengths=lengths, pointers=pointers, indices=indices)


def _write(stem, documents, token_size) -> MegatronFileWriter:
    writer = MegatronFileWriter(str(stem), token_size=token_size)
    for tokens in documents:
        writer.append(tokens.tobytes())
    writer.close()
    return writer


def test_gpt2_documents_become_uint16_tokens_and_an_index_megatron_reads(udhr_documents, gpt2, tmp_path):
    encodings = gpt2.encode_batch([d.text for d in udhr_documents[:3]])
    documents = [np.array([*e.ids, 50256], dtype="<u2") for e in encodings]
    writer = _write(tmp_path / "udhr", documents, 2)
    assert writer.path == str(tmp_path / "udhr.bin")
    assert (writer.document_count, writer.token_count) == (3, 5110 + 5392 + 7335)
    data = (tmp_path / "udhr.bin").read_bytes()
    assert data == b"".join(d.tobytes() for d in documents)
    assert np.frombuffer(data, "<u2")[:5].tolist() == [37835, 3301, 16175, 18840, 14499]
    index = _index(tmp_path / "udhr.idx")
    assert index["magic"] == b"MMIDIDX\x00\x00"
    assert (index["version"], index["code"]) == (1, 8)
    assert index["lengths"].tolist() == [5110, 5392, 7335]
    assert index["pointers"].tolist() == [0, 10220, 21004]
    assert index["indices"].tolist() == [0, 1, 2, 3]


def test_a_vocabulary_past_65536_gives_int32_tokens(udhr_documents, udhr_word_tokenizer, tmp_path):
    words = Tokenizer.from_file(udhr_word_tokenizer)
    documents = [np.array([*e.ids, 1], dtype="<u4") for e in words.encode_batch([d.text for d in udhr_documents[:2]])]
    _write(tmp_path / "words", documents, 4)
    index = _index(tmp_path / "words.idx")
    assert index["code"] == 4
    assert index["lengths"].tolist() == [len(d) for d in documents]
    assert index["pointers"].tolist() == [0, 4 * len(documents[0])]
    tokens = np.frombuffer((tmp_path / "words.bin").read_bytes(), "<i4")
    assert tokens.tolist() == [int(t) for d in documents for t in d]
    assert tokens.max() > 65535


def test_an_empty_dataset_has_a_header_and_one_document_index(tmp_path):
    _write(tmp_path / "empty", [], 2)
    assert (tmp_path / "empty.bin").read_bytes() == b""
    index = _index(tmp_path / "empty.idx")
    assert index["lengths"].size == 0 and index["indices"].tolist() == [0]


def test_loss_masks_and_odd_token_sizes_are_refused(tmp_path):
    writer = MegatronFileWriter(str(tmp_path / "x"), token_size=2)
    with pytest.raises(ValueError, match="no loss masks"):
        writer.append(b"\x01\x00", b"\x01")
    writer.close()
    with pytest.raises(ValueError, match="2- or 4-byte"):
        megatron_dtype_code(8)
