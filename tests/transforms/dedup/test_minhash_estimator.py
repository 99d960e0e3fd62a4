"""MinHash similarity estimates against the exact Jaccard similarity of real reviews' shingle sets.

Each of the 2,000 movie reviews is compared with three variants of itself: a
prefix, a slice from the middle (each keeping 20 to 95 % of its words) and a
copy with 2 to 25 % of its words replaced, so that the exact Jaccard similarity
of the 5-gram sets spans 0.2 to 0.9. An unbiased estimator's mean error is
zero up to its standard error (about 0.0017 per band of 0.1 here) whatever the
similarity.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from beamtrove.text import normalize_text
from beamtrove.transforms.dedup import MinHashConfig, MinHasher, shingle_hashes, sketch_agreement
from tests.conftest import near_copy

BANDS = [(0.2, 0.3), (0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9)]
# A mean error is accepted within this many standard errors: a bias of 0.01 is caught in every band.
TOLERANCE = 4
MAX_STANDARD_ERROR = 0.0025


@dataclasses.dataclass(frozen=True)
class _Pair:
    review: int
    exact: float
    signature: float
    sketch: float


def _variants(text: str, rng: random.Random) -> list[str]:
    words = text.split()
    kept = int(len(words) * rng.uniform(0.2, 0.95))
    start = rng.randrange(len(words) - kept + 1)
    middle = " ".join(words[start : start + kept])
    prefix = " ".join(words[: int(len(words) * rng.uniform(0.2, 0.95))])
    return [prefix, middle, near_copy(text, rng.uniform(0.02, 0.25), seed=rng.randrange(1 << 30))]


def _shingle_set(text: str) -> np.ndarray:
    return np.unique(shingle_hashes(normalize_text(text), MinHashConfig().n_grams))


def _exact_jaccard(first: np.ndarray, second: np.ndarray) -> float:
    shared = len(np.intersect1d(first, second, assume_unique=True))
    return shared / (len(first) + len(second) - shared)


@pytest.fixture(scope="module")
def pairs(movie_reviews) -> list[_Pair]:
    hasher = MinHasher(MinHashConfig())
    rng = random.Random(20)
    pairs = []
    for review, text in enumerate(movie_reviews.values()):
        shingles, signature = _shingle_set(text), hasher.signature(text)
        for variant in _variants(text, rng):
            variant_signature = hasher.signature(variant)
            if variant_signature is None:
                continue
            agreement = float(np.mean(signature == variant_signature))
            sketched = sketch_agreement(MinHasher.sketch(signature), MinHasher.sketch(variant_signature))
            pairs.append(_Pair(review, _exact_jaccard(shingles, _shingle_set(variant)), agreement, sketched))
    return pairs


def _mean_and_standard_error(errors: np.ndarray, reviews: np.ndarray) -> tuple[float, float]:
    """The mean error and its standard error, clustered by review.

    Pairs cut from one review share its signature, so their errors are not
    independent: the variance is summed over reviews rather than pairs.
    """
    mean = errors.mean()
    _, group = np.unique(reviews, return_inverse=True)
    residuals = np.bincount(group, weights=errors - mean)
    return float(mean), float(np.sqrt(np.sum(residuals**2)) / len(errors))


@pytest.mark.parametrize("estimate", ["signature", "sketch"])
def test_estimates_are_unbiased_in_every_band_of_similarity(pairs, estimate):
    exact = np.array([pair.exact for pair in pairs])
    estimated = np.array([getattr(pair, estimate) for pair in pairs])
    reviews = np.array([pair.review for pair in pairs])
    assert len(pairs) == 6000
    for low, high in BANDS:
        band = (exact >= low) & (exact < high)
        mean, error = _mean_and_standard_error(estimated[band] - exact[band], reviews[band])
        assert band.sum() >= 500, (low, high)
        assert error <= MAX_STANDARD_ERROR, (low, high, error)
        assert abs(mean) <= TOLERANCE * error, (low, high, mean, error)


@pytest.mark.parametrize("seed", [1, 2])
def test_sketch_bytes_of_unequal_hashes_match_one_time_in_256(reviews, seed):
    """Seed 2 draws multipliers ending in 8 and 11 zero bits, whose permuted hashes share their low bits."""
    hasher = MinHasher(MinHashConfig(seed=seed))
    signatures = np.stack([hasher.signature(review.text).ravel() for review in reviews])
    sketches = np.stack([np.frombuffer(MinHasher.sketch(signature), np.uint8) for signature in signatures])
    first, second = np.triu_indices(len(reviews), k=1)
    unequal = signatures[first] != signatures[second]
    matches = np.count_nonzero(unequal & (sketches[first] == sketches[second]), axis=0)
    compared = np.count_nonzero(unequal, axis=0)
    # Per hash, the binomial count of chance matches stays within 5 standard deviations of its mean.
    expected = compared / 256
    assert (np.abs(matches - expected) <= 5 * np.sqrt(expected * (1 - 1 / 256))).all()
