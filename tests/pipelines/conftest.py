"""Inputs of the token pipeline tests: UDHR translations as JSONL, GPT-2's tokenizer, shard contents."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from tests.conftest import require

EOS = 50256


@pytest.fixture(scope="session")
def gpt2_path(data_dir) -> str:
    return str(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"))


@pytest.fixture(scope="session")
def corpus(udhr_texts, tmp_path_factory) -> tuple[pathlib.Path, list[str]]:
    """Sixty UDHR translations in two JSONL files without ids; the first carries a no-loss range."""
    texts = list(udhr_texts.values())[::6][:60]
    folder = tmp_path_factory.mktemp("udhr-jsonl")
    for part in range(2):
        with (folder / f"part-{part}.jsonl").open("w", encoding="utf-8") as out:
            for number in range(part * 30, part * 30 + 30):
                row = {"text": texts[number]}
                if number == 0:
                    row["metadata"] = {"no_loss_ranges": [[0, 40]]}
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder, texts


def shard_documents(folder: pathlib.Path) -> list[tuple[bytes, bytes | None]]:
    """Every document of every shard in ``folder`` (file-name order) as (token bytes, loss bytes)."""
    found = []
    for shard in sorted(folder.glob("*.ds")):
        tokens = shard.read_bytes()
        loss_path = pathlib.Path(f"{shard}.loss")
        loss = loss_path.read_bytes() if loss_path.exists() else None
        start = 0
        for end in np.frombuffer(pathlib.Path(f"{shard}.index").read_bytes(), dtype="<u8").tolist():
            found.append((tokens[2 * start : 2 * end], loss[start:end] if loss is not None else None))
            start = end
    return found
