"""Building an index of the inaugural addresses, its files and manifest, and reading DataTrove's layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beamtrove.document import Document
from beamtrove.text import word_splitter
from beamtrove.transforms.decont import (
    DecontConfig,
    DecontIndex,
    benchmark_ngrams,
    hash_ngram,
    read_manifest,
    task_name,
)
from tests.transforms.decont.conftest import build_index


def _expected_hashes(items: list[Document], config: DecontConfig) -> dict[str, set[int]]:
    split = word_splitter(config.word_splitter)
    expected: dict[str, set[int]] = {}
    for item in items:
        grams = benchmark_ngrams(item.text, item.metadata.get("query"), config, split)
        expected.setdefault(item.metadata["task"], set()).update(map(hash_ngram, grams))
    return expected


def test_index_holds_each_task_distinct_hashes_sorted_in_hash_shards(inaugural_items, tmp_path):
    items = [item for item in inaugural_items if item.metadata["task"] in ("1961-Kennedy", "2009-Obama")]
    counters = build_index(items, tmp_path, num_shards=3)
    manifest = json.loads((tmp_path / "index.json").read_text())
    assert manifest["tasks"] == {
        "1961-Kennedy": {
            "items": 26,
            "hashes": 654,
            "files": [f"1961-Kennedy/part-0000{shard}.index.hashes" for shard in range(3)],
        },
        "2009-Obama": {
            "items": 53,
            "hashes": 1066,
            "files": [f"2009-Obama/part-0000{shard}.index.hashes" for shard in range(3)],
        },
    }
    assert {key: manifest[key] for key in ("n_grams", "find_query_ngrams", "find_overlap_ngrams", "word_splitter")} == {
        "n_grams": 12,
        "find_query_ngrams": False,
        "find_overlap_ngrams": True,
        "word_splitter": "beamtrove",
    }
    # Four items are too short for a 12-gram even with their query: "Vice President Johnson, Mr." / "Speaker, Mr.",
    # "All this we can do." / "All this we will do.", and two more of Obama's.
    assert counters == {"in": 83, "out": 79, "skipped.too_short": 4, "ngrams": 1720, "hashes": 1720, "files": 6}
    expected = _expected_hashes(items, DecontConfig())
    for task, entry in manifest["tasks"].items():
        found = set()
        for shard, file in enumerate(entry["files"]):
            values = np.fromfile(tmp_path / file, dtype="<u8")
            assert list(values) == sorted(values) and len(set(values.tolist())) == len(values)
            assert all(value % 3 == shard for value in values.tolist())
            found.update(values.tolist())
        assert found == expected[task]


def test_items_too_short_are_counted_and_tasks_come_from_the_file_name(tmp_path):
    thirteen_words = "We observe today not a victory of party but a celebration of freedom"
    items = [
        Document(text="Yes.", id="short", metadata={"query": "Is it?", "file_path": "/bench/boolq.val.jsonl"}),
        Document(text=thirteen_words, id="long", metadata={"file_path": "/bench/boolq.val.jsonl", "task": " "}),
        Document(text=thirteen_words, id="again", metadata={"file_path": "/bench/boolq.val.jsonl"}),
        Document(text="ask not", id="odd", metadata={"query": ["not", "text"], "task": "x"}),
    ]
    counters = build_index(items, tmp_path)
    assert counters == {
        "in": 4,
        "out": 2,
        "skipped.too_short": 1,
        "skipped.query_not_a_string": 1,
        "ngrams": 4,
        "hashes": 2,
        "files": 1,
    }
    manifest = read_manifest(str(tmp_path))
    assert manifest.files == {"boolq": ("boolq/part-00000.index.hashes",)}
    assert manifest.config == DecontConfig()


def test_task_names_are_safe_folder_names():
    assert task_name("lighteval|mmlu:abstract_algebra") == "lighteval|mmlu:abstract_algebra"
    assert task_name("my task/../x") == "my_task_.._x"
    assert task_name("..") == "_"


def test_a_datatrove_index_folder_reads_with_datatrove_defaults(tmp_path):
    kennedy = "shall pay any price bear any burden meet any hardship support any"
    np.array([hash_ngram(kennedy), 7], dtype="<u8").tofile(tmp_path / "lighteval|kennedy.index.hashes")
    (tmp_path / "sub").mkdir()
    np.array([7, 9], dtype="<u8").tofile(tmp_path / "sub" / "other.index.hashes")
    manifest = read_manifest(str(tmp_path))
    assert manifest.config == DecontConfig(word_splitter="spacy")
    assert manifest.files == {
        "lighteval|kennedy": ("lighteval|kennedy.index.hashes",),
        "sub/other": ("sub/other.index.hashes",),
    }
    index = DecontIndex([manifest])
    assert len(index) == 3
    # A hash in two tasks belongs to the first listed.
    probe = np.array([1, 9, 7, hash_ngram(kennedy)], dtype=np.uint64)
    assert index.first_match(probe) == (1, "sub/other")
    assert index.first_match(probe[2:]) == (0, "lighteval|kennedy")
    assert index.first_match(np.array([1, 2], dtype=np.uint64)) is None


def test_missing_or_foreign_indexes_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="No decontamination index at"):
        read_manifest(str(tmp_path))
    (tmp_path / "index.json").write_text(json.dumps({"format": "beamtrove-decont-index", "version": 2}))
    with pytest.raises(ValueError, match="not a version 1 decontamination index"):
        read_manifest(str(tmp_path))
