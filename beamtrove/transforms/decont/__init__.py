"""N-gram decontamination: an index of benchmark n-grams, built once, and the filter that applies it.

:class:`BuildDecontIndex` (``beamtrove run decont_index``) hashes the
n-grams of benchmark items given as local files; :class:`NGramsDecontFilter`
(the ``decont`` step of ``beamtrove run filter``) drops documents holding one
of them. Both follow DataTrove's ``NGramsDecontIndexer`` and
``NGramsDecontFilter``; see :mod:`beamtrove.transforms.decont.index` for the
index format.
"""

from beamtrove.transforms.decont.filter import NGramsDecontFilter
from beamtrove.transforms.decont.index import HASHES_SUFFIX, MANIFEST_FILE, DecontIndex, IndexManifest, read_manifest
from beamtrove.transforms.decont.index_build import BuildDecontIndex, task_name
from beamtrove.transforms.decont.ngrams import DecontConfig, benchmark_ngrams, hash_ngram, word_ngrams

__all__ = [
    "HASHES_SUFFIX",
    "MANIFEST_FILE",
    "BuildDecontIndex",
    "DecontConfig",
    "DecontIndex",
    "IndexManifest",
    "NGramsDecontFilter",
    "benchmark_ngrams",
    "hash_ngram",
    "read_manifest",
    "task_name",
    "word_ngrams",
]
