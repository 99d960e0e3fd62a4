"""dolma's dedup as benchmarks.peer_dedup sets it up: one paragraph a document, and its attributes read back."""

from __future__ import annotations

import gzip
import json
import subprocess

import pytest

from benchmarks.common import write_jsonl
from benchmarks.peer_dedup import (
    DOLMA_ATTRIBUTE,
    DOLMA_VENV,
    PARAGRAPH_SEPARATOR,
    dolma_command,
    dolma_documents,
    dolma_removed_ids,
)


@pytest.fixture(scope="module")
def dolma() -> str:
    dolma = DOLMA_VENV / "bin" / "dolma"
    if not dolma.exists():
        pytest.skip(f"{dolma} is absent: `python -m benchmarks.peer_dedup --only bloom` makes dolma 1.2.1's venv")
    return str(dolma)


def _words(text: str, start: float, end: float) -> str:
    words = text.split()
    return " ".join(words[int(start * len(words)) : int(end * len(words))])


def test_a_document_is_removed_when_dolma_saw_0_8_of_its_13_grams_before(dolma, inaugural, udhr_texts, tmp_path):
    washington, adams, lincoln, wilson, kennedy = (
        inaugural[name] for name in ("1789-Washington", "1797-Adams", "1861-Lincoln", "1913-Wilson", "1961-Kennedy")
    )
    french = udhr_texts["fra"]
    short = " ".join(adams.split()[:10])  # fewer than 13 words
    rows = {
        "washington": washington,
        "adams": adams,
        "lincoln": lincoln,
        "french": french,
        "short": short,
        "washington-again": washington,
        "french-again": french,  # multi-byte characters: dolma's span ends one past the text
        "adams-first-90%": _words(adams, 0, 0.9),  # every 13-gram seen: overlap 1.0
        "lincoln-then-wilson": _words(lincoln, 0, 0.5) + " " + _words(wilson, 0, 0.5),  # about 0.5: kept
        "lincoln-85%-kennedy-15%": _words(lincoln, 0, 0.85) + " " + _words(kennedy, 0, 0.15),
        "short-again": short,  # no 13-gram: never a duplicate (skip_short_paragraphs)
    }
    assert len(short.split()) < 13 and all(PARAGRAPH_SEPARATOR not in text for text in rows.values())
    source = tmp_path / "source"
    write_jsonl(source / "part-000.jsonl.gz", [{"id": key, "text": text} for key, text in rows.items()])
    documents = dolma_documents(source, tmp_path / "dolma")
    subprocess.run(dolma_command(dolma, documents, tmp_path / "work", 1), check=True, capture_output=True)

    removed = dolma_removed_ids(documents)

    assert removed == {"washington-again", "french-again", "adams-first-90%", "lincoln-85%-kennedy-15%"}
    with gzip.open(documents.parent / "attributes" / DOLMA_ATTRIBUTE / "part-000.jsonl.gz", "rt") as lines:
        spans = {row["id"]: row["attributes"][DOLMA_ATTRIBUTE] for row in map(json.loads, lines)}
    assert spans["french-again"] == [[0, len(french) + 1, 1.0]]
    assert spans["washington-again"] == [[0, len(washington), 1.0]]
    assert spans["lincoln-then-wilson"] == []
    assert 0.8 <= spans["lincoln-85%-kennedy-15%"][0][2] < 1
