"""A benchmark from real text: the inaugural addresses as query/label items, and their index."""

from __future__ import annotations

import functools
import pathlib
import re

import apache_beam as beam
import pytest

from beamtrove.document import Document
from beamtrove.transforms.decont import BuildDecontIndex
from tests.conftest import made_once, run_and_collect

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentence_pairs(text: str) -> list[tuple[str, str]]:
    """Consecutive sentences taken two by two: (query, label)."""
    sentences = [sentence.strip() for sentence in _SENTENCE_END.split(text) if sentence.strip()]
    return list(zip(sentences[::2], sentences[1::2], strict=False))


@pytest.fixture(scope="session")
def inaugural_items(inaugural) -> list[Document]:
    """2562 items: each pair of consecutive sentences of an inaugural address, its task the address (1961-Kennedy)."""
    return [
        Document(text=label, id=f"{name}/{number}", metadata={"query": query, "task": name})
        for name, text in inaugural.items()
        for number, (query, label) in enumerate(sentence_pairs(text))
    ]


def build_index(items: list[Document], output: pathlib.Path, **settings) -> dict[str, int]:
    """Builds an index of ``items`` in ``output`` on a TestPipeline; returns the counters of its step."""
    stats = run_and_collect(lambda pipeline: pipeline | beam.Create(items) | BuildDecontIndex(str(output), **settings))
    return stats["write_index"]["counters"]


@pytest.fixture(scope="session")
def inaugural_index(inaugural_items, tmp_path_factory) -> pathlib.Path:
    """The index of every inaugural item, with beamtrove's defaults (12-grams, overlap n-grams, beamtrove words)."""
    return made_once(tmp_path_factory, "inaugural-index", functools.partial(build_index, inaugural_items))
