"""An index dedup_index writes, damaged as users damage files: dedup --against refuses it, naming the file."""

from __future__ import annotations

import gzip
import json
import pathlib
import shutil

import pytest

from beamtrove.cli import main
from tests.conftest import jsonl_rows


@pytest.fixture(scope="module")
def dumps(movie_reviews, tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """The index of 300 real reviews (3 shards per kind), and a new dump: 100 of them again and 50 unseen."""
    folder = tmp_path_factory.mktemp("dumps")
    texts = list(movie_reviews.values())
    (folder / "old.jsonl").write_text(
        "".join(json.dumps({"id": f"old-{n:03d}", "text": text}) + "\n" for n, text in enumerate(texts[:300]))
    )
    new = [{"id": f"new-copy-{n:03d}", "text": texts[n * 3]} for n in range(100)]
    new += [{"id": f"new-{n:03d}", "text": texts[300 + n]} for n in range(50)]
    (folder / "new.jsonl").write_text("".join(json.dumps(row) + "\n" for row in new))
    index = folder / "old-index"
    argv = ["run", "dedup_index", "--input", str(folder / "old.jsonl"), "--output", str(index)]
    assert main([*argv, "--dedup", "exact,minhash,sentence", "--index_shards", "3", "--progress_interval", "0"]) == 0
    return index, folder / "new.jsonl"


def _dedup(new: pathlib.Path, index: pathlib.Path, output: pathlib.Path, steps: str = "exact") -> int:
    argv = ["run", "dedup", "--input", str(new), "--output", str(output), "--dedup", steps, "--against", str(index)]
    return main([*argv, "--progress_interval", "0"])


def _shard(index: pathlib.Path, kind: str, number: int) -> pathlib.Path:
    return index / kind / f"part-{number:05d}-of-00003.jsonl.gz"


def _keep_a_third(shard: pathlib.Path) -> None:
    lines = gzip.decompress(shard.read_bytes()).splitlines(keepends=True)
    shard.write_bytes(gzip.compress(b"".join(lines[::3])))


def _without_kind(index: pathlib.Path, kind: str) -> None:
    manifest = json.loads((index / "index.json").read_text())
    del manifest["kinds"][kind]
    (index / "index.json").write_text(json.dumps(manifest))


def test_the_intact_index_removes_every_copy(dumps, tmp_path):
    index, new = dumps
    assert _dedup(new, index, tmp_path / "out") == 0
    removed = {
        row["id"]: row["metadata"]["filter_reason"] for row in jsonl_rows(tmp_path / "out" / "excluded" / "exact")
    }
    assert removed == {f"new-copy-{n:03d}": "exact_duplicate_in_old-index" for n in range(100)}


DAMAGES = {
    # Records deleted from every exact shard, each compressed again: the index would remove 33 copies of 100.
    "records deleted": (
        "exact",
        lambda index: [_keep_a_third(_shard(index, "exact", n)) for n in range(3)],
        "exact/part-00000-of-00003.jsonl.gz holds",
    ),
    "a shard cut short": (
        "exact",
        lambda index: _shard(index, "exact", 1).write_bytes(_shard(index, "exact", 1).read_bytes()[:1000]),
        "exact/part-00001-of-00003.jsonl.gz holds 1000 bytes",
    ),
    "a shard deleted": ("exact", lambda index: _shard(index, "exact", 2).unlink(), "exact/part-00002-of-00003"),
    "a kind folder deleted": ("minhash", lambda index: shutil.rmtree(index / "minhash"), "minhash/part-00000-of-"),
    "minhash left out of index.json": ("minhash", lambda index: _without_kind(index, "minhash"), "no minhash keys"),
    "sentence left out of index.json": ("sentence", lambda index: _without_kind(index, "sentence"), "no sentence keys"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_index_is_refused_before_the_run(dumps, tmp_path, capsys, damage):
    index, new = dumps
    copy = tmp_path / "old-index"
    shutil.copytree(index, copy)
    steps, damage_index, named = DAMAGES[damage]
    damage_index(copy)
    capsys.readouterr()
    assert _dedup(new, copy, tmp_path / "out", steps) == 2
    (message,) = capsys.readouterr().err.strip().splitlines()
    assert message.startswith("beamtrove: error: ") and str(copy) in message and named in message
    assert "beamtrove run dedup_index" in message
    assert not (tmp_path / "out").exists()


def test_a_shard_damaged_in_place_fails_the_run_naming_it(dumps, tmp_path, capsys):
    index, new = dumps
    copy = tmp_path / "old-index"
    shutil.copytree(index, copy)
    shard = _shard(copy, "exact", 0)
    data = bytearray(shard.read_bytes())
    data[200:260] = b"x" * 60
    shard.write_bytes(bytes(data))
    capsys.readouterr()
    assert _dedup(new, copy, tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"beamtrove: error: Dedup index shard {shard} is damaged")
    assert "beamtrove run dedup_index" in last
    assert not (tmp_path / "out" / "documents").exists()
