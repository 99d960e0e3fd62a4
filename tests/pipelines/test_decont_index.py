"""decont_index then filter --steps decont, end to end through the CLI, on inaugural and State of the Union text."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from beamtrove.cli import main
from tests.conftest import jsonl_rows
from tests.transforms.decont.conftest import sentence_pairs


@pytest.fixture(scope="module")
def indexes(inaugural, tmp_path_factory):
    """Kennedy's 1961 items as JSONL with their own field names, Roosevelt's 1937 sentences as plain text."""
    folder = tmp_path_factory.mktemp("benchmarks")
    with (folder / "kennedy.test.jsonl").open("w") as out:
        for query, label in sentence_pairs(inaugural["1961-Kennedy"]):
            out.write(json.dumps({"question": query, "answer": label}) + "\n")
    sentences = re.split(r"(?<=[.!?])\s+", inaugural["1937-Roosevelt"])
    (folder / "roosevelt.txt").write_text("\n\n".join(sentence.replace("\n", " ") for sentence in sentences) + "\n")
    kennedy, roosevelt = folder / "kennedy-index", folder / "roosevelt-index"
    argv = ["run", "decont_index", "--input", str(folder / "kennedy.test.jsonl"), "--output", str(kennedy)]
    assert main([*argv, "--decont_label_key", "answer", "--decont_query_key", "question"]) == 0
    argv = ["run", "decont_index", "--input", str(folder / "roosevelt.txt"), "--output", str(roosevelt)]
    assert main([*argv, "--decont_index_shards", "2"]) == 0
    return kennedy, roosevelt


def test_index_folders_hold_manifest_shards_and_stats(indexes):
    kennedy, roosevelt = indexes
    manifest = json.loads((kennedy / "index.json").read_text())
    assert manifest["tasks"] == {"kennedy": {"items": 26, "hashes": 654, "files": ["kennedy/part-00000.index.hashes"]}}
    manifest = json.loads((roosevelt / "index.json").read_text())
    assert manifest["tasks"] == {
        "roosevelt": {
            "items": 68,
            "hashes": 889,
            "files": ["roosevelt/part-00000.index.hashes", "roosevelt/part-00001.index.hashes"],
        }
    }
    stats = json.loads((roosevelt / "stats.json").read_text())
    assert stats["funnel"] == ["read", "write_index"]
    # 92 sentences, one per line; the 24 of fewer than 12 words give no n-gram.
    assert stats["steps"]["read"]["counters"]["out"] == 92
    assert stats["steps"]["write_index"]["counters"] == {
        "in": 92,
        "out": 68,
        "skipped.too_short": 24,
        "ngrams": 889,
        "hashes": 889,
        "files": 2,
    }


def test_filter_drops_addresses_quoting_either_benchmark(indexes, state_union, tmp_path):
    documents = tmp_path / "addresses.jsonl"
    documents.write_text("".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in state_union.items()))
    output = tmp_path / "filtered"
    index_paths = ",".join(str(index) for index in indexes)
    argv = ["run", "filter", "--input", str(documents), "--output", str(output), "--steps", "decont"]
    assert main([*argv, "--decont_index", index_paths]) == 0
    excluded = {
        row["id"]: (row["metadata"]["filter_reason"], row["metadata"]["contaminated_ngram"])
        for row in jsonl_rows(output / "excluded" / "decont")
    }
    assert excluded == {
        "1963-Johnson": (
            "contaminated_kennedy",
            "this administration nor even perhaps in our lifetime on this planet but",
        ),
        "1972-Nixon": ("contaminated_kennedy", "shall pay any price bear any burden meet any hardship support any"),
        "2005-GWBush": ("contaminated_roosevelt", "each age is a dream that is dying or one that is"),
    }
    assert len(jsonl_rows(output / "documents")) == 62
    counters = json.loads((output / "stats.json").read_text())["steps"]["decont"]["counters"]
    assert counters == {"in": 65, "out": 62, "dropped.contaminated_kennedy": 2, "dropped.contaminated_roosevelt": 1}


def test_bad_configuration_fails_before_running(tmp_path, capsys):
    documents = tmp_path / "docs.jsonl"
    documents.write_text('{"text": "a"}\n')
    argv = ["run", "filter", "--input", str(documents), "--output", str(tmp_path / "out"), "--steps", "decont"]
    assert main(argv) == 2
    assert "The decont step needs --decont_index" in capsys.readouterr().err
    assert main([*argv, "--decont_index", str(tmp_path)]) == 2
    assert f"No decontamination index at {tmp_path}" in capsys.readouterr().err
    warc = tmp_path / "pages.warc.gz"
    warc.write_bytes(b"")
    assert main(["run", "decont_index", "--input", str(warc), "--output", str(tmp_path / "index")]) == 2
    assert "not WARC" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "index").exists()


def _filter(documents, index, output) -> int:
    argv = ["run", "filter", "--input", str(documents), "--output", str(output), "--steps", "decont"]
    return main([*argv, "--decont_index", str(index), "--progress_interval", "0"])


@pytest.fixture(scope="module")
def addresses(state_union, tmp_path_factory):
    documents = tmp_path_factory.mktemp("addresses") / "addresses.jsonl"
    documents.write_text("".join(json.dumps({"id": name, "text": text}) + "\n" for name, text in state_union.items()))
    return documents


KENNEDY = "kennedy/part-00000.index.hashes"


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        # An emptied file would drop nothing: Johnson's and Nixon's quotations of Kennedy would be kept.
        (lambda index: (index / KENNEDY).write_bytes(b""), f"{KENNEDY} is empty"),
        (
            lambda index: (index / KENNEDY).write_bytes((index / KENNEDY).read_bytes()[:-5]),
            f"{KENNEDY} holds 5227 bytes",
        ),
        (
            lambda index: (index / KENNEDY).write_bytes((index / KENNEDY).read_bytes()[:4000]),
            f"{KENNEDY} holds 500 hashes",
        ),
        (lambda index: shutil.rmtree(index / "kennedy"), f"{KENNEDY} is missing"),
    ],
    ids=["emptied", "cut to an odd size", "hashes cut off", "task folder deleted"],
)
def test_a_damaged_index_is_refused_before_the_run(indexes, addresses, tmp_path, capsys, damage, named):
    copy = tmp_path / "kennedy-index"
    shutil.copytree(indexes[0], copy)
    damage(copy)
    capsys.readouterr()
    assert _filter(addresses, copy, tmp_path / "out") == 2
    (message,) = capsys.readouterr().err.strip().splitlines()
    assert message.startswith(f"beamtrove: error: Decontamination index file {copy / named}")
    assert "rebuild the index with `beamtrove run decont_index`" in message
    assert not (tmp_path / "out").exists()


def test_a_file_damaged_in_place_fails_the_run_naming_it(indexes, addresses, tmp_path, capsys):
    copy = tmp_path / "kennedy-index"
    shutil.copytree(indexes[0], copy)
    data = bytearray((copy / KENNEDY).read_bytes())
    data[800:808] = bytes(8)
    (copy / KENNEDY).write_bytes(bytes(data))
    capsys.readouterr()
    assert _filter(addresses, copy, tmp_path / "out") == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"beamtrove: error: Decontamination index file {copy / KENNEDY} is damaged: its digest")
    assert not (tmp_path / "out" / "documents").exists()
