"""Real reviews and near copies of them, as dedup inputs."""

from __future__ import annotations

import random

import pytest

from beamtrove.document import Document


def near_copy(text: str, fraction: float, seed: int) -> str:
    """``text`` with ``fraction`` of its words replaced by other words of the same text (as make_warc.py does)."""
    rng = random.Random(seed)
    words = text.split()
    return " ".join(rng.choice(words) if rng.random() < fraction else word for word in words)


@pytest.fixture(scope="session")
def reviews(movie_reviews) -> list[Document]:
    """200 real movie reviews, ids ``review-000`` and on."""
    texts = list(movie_reviews.values())[:200]
    return [Document(text, f"review-{number:03d}") for number, text in enumerate(texts)]
