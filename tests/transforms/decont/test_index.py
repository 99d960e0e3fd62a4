"""Building an index of the inaugural addresses, its files and manifest, and reading DataTrove's layout."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
import shutil

import numpy as np
import pytest

from beamtrove.document import Document
from beamtrove.options import ConfigurationError
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


KENNEDY = "1961-Kennedy/part-00000.index.hashes"


def test_the_manifest_records_each_files_hashes_and_digest(inaugural_index):
    manifest = json.loads((inaugural_index / "index.json").read_text())
    files = [file for entry in manifest["tasks"].values() for file in entry["files"]]
    assert sorted(manifest["shards"]) == sorted(files) and len(files) == 59
    for file, shard in manifest["shards"].items():
        data = (inaugural_index / file).read_bytes()
        assert shard == {"hashes": len(data) // 8, "blake2b": hashlib.blake2b(data, digest_size=16).hexdigest()}
    assert read_manifest(str(inaugural_index)).shards == manifest["shards"]


def _cut(path: pathlib.Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def _edit_manifest(folder: pathlib.Path, edit) -> None:
    manifest = json.loads((folder / "index.json").read_text())
    edit(manifest)
    (folder / "index.json").write_text(json.dumps(manifest))


DAMAGES = {
    "a file emptied": (lambda f: _cut(f / KENNEDY, 0), KENNEDY, "is empty"),
    "a file cut to an odd size": (lambda f: _cut(f / KENNEDY, 1001), KENNEDY, "not a whole number of 8-byte"),
    "hashes cut off a file": (lambda f: _cut(f / KENNEDY, 800), KENNEDY, "holds 100 hashes, not the 654"),
    "a file deleted": (lambda f: (f / KENNEDY).unlink(), KENNEDY, "is missing"),
    "a task folder deleted": (lambda f: shutil.rmtree(f / "1789-Washington"), "1789-Washington/part-00000", "missing"),
    "index.json cut short": (lambda f: _cut(f / "index.json", 200), "index.json", "is not JSON"),
    "a task's hashes edited": (
        lambda f: _edit_manifest(f, lambda m: m["tasks"]["1961-Kennedy"].update(hashes=700)),
        "index.json",
        "the files of task 1961-Kennedy hold 654 hashes, not 700",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_index_is_refused_before_the_run_naming_the_file(inaugural_index, tmp_path, damage):
    copy = tmp_path / "index"
    shutil.copytree(inaugural_index, copy)
    damage_index, named, what = DAMAGES[damage]
    damage_index(copy)
    with pytest.raises(ConfigurationError) as refused:
        read_manifest(str(copy))
    message = str(refused.value)
    assert str(copy / named) in message and what in message and "\n" not in message
    assert "beamtrove run decont_index" in message


def _overwrite_one_hash(path: pathlib.Path) -> None:
    """Changes the low bytes of the middle hash and the high bytes of the next, keeping the file's size."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 16 * 8
    data[middle + 6 : middle + 10] = bytes(255 - byte for byte in data[middle + 6 : middle + 10])
    path.write_bytes(bytes(data))


def test_damage_that_keeps_the_size_is_refused_when_the_index_loads(inaugural_index, tmp_path):
    copy = tmp_path / "index"
    shutil.copytree(inaugural_index, copy)
    _overwrite_one_hash(copy / KENNEDY)
    manifest = read_manifest(str(copy))
    with pytest.raises(ConfigurationError, match=re.escape(f"{copy / KENNEDY} is damaged: its digest")):
        DecontIndex([manifest])
    # An index from before digests were recorded: the order of its hashes still tells.
    _edit_manifest(copy, lambda manifest: manifest.pop("shards"))
    with pytest.raises(ConfigurationError, match=re.escape(f"{copy / KENNEDY} is damaged: its hashes are not in")):
        DecontIndex([read_manifest(str(copy))])
    shutil.copy(inaugural_index / KENNEDY, copy / KENNEDY)
    assert len(DecontIndex([read_manifest(str(copy))])) == len(DecontIndex([read_manifest(str(inaugural_index))]))


def test_a_datatrove_index_of_empty_or_partial_hashes_is_refused(tmp_path):
    np.array([3, 1, 2], dtype="<u8").tofile(tmp_path / "mmlu.index.hashes")
    (tmp_path / "boolq.index.hashes").write_bytes(b"")
    with pytest.raises(ConfigurationError, match=re.escape(f"{tmp_path / 'boolq.index.hashes'} is empty")):
        read_manifest(str(tmp_path))
    (tmp_path / "boolq.index.hashes").write_bytes(b"\0" * 12)
    with pytest.raises(ConfigurationError, match=re.escape("boolq.index.hashes holds 12 bytes, not a")):
        read_manifest(str(tmp_path))
    # Unsorted hashes are DataTrove's own: they load.
    (tmp_path / "boolq.index.hashes").unlink()
    assert len(DecontIndex([read_manifest(str(tmp_path))])) == 3
