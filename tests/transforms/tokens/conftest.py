"""The real tokenizers and texts the token tests share."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from beamtrove.document import Document
from tests.conftest import require


@pytest.fixture(scope="session")
def gpt2_path(data_dir) -> str:
    """GPT-2's tokenizer.json: vocabulary 50,257, ``<|endoftext|>`` = 50256."""
    return str(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"))


@pytest.fixture(scope="session")
def gpt2(gpt2_path) -> Tokenizer:
    """GPT-2 as the tokenizers library loads it, without beamtrove's EOS post-processing."""
    return Tokenizer.from_file(gpt2_path)


@pytest.fixture(scope="session")
def udhr_documents(udhr_texts) -> list[Document]:
    """The UDHR's 388 language versions as documents ``udhr/<n>``, numbered in language order."""
    return [
        Document(text=text, id=f"udhr/{n}", metadata={"language": name})
        for n, (name, text) in enumerate(udhr_texts.items())
    ]


@pytest.fixture(scope="session")
def udhr_word_tokenizer(udhr_texts, tmp_path_factory) -> str:
    """A word-level tokenizer over the UDHR's 204,816 distinct words: a vocabulary too big for 2-byte ids."""
    words = sorted({word for text in udhr_texts.values() for word in text.split()})
    tokenizer = Tokenizer(
        WordLevel({"[UNK]": 0, "[EOS]": 1, **{w: i + 2 for i, w in enumerate(words)}}, unk_token="[UNK]")
    )
    tokenizer.pre_tokenizer = WhitespaceSplit()
    path = tmp_path_factory.mktemp("udhr-words") / "tokenizer.json"
    tokenizer.save(str(path))
    return str(path)
