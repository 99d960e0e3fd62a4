"""ReadHuggingFace on datasets written by ``save_to_disk`` and prepared by ``load_dataset`` in its cache."""

from __future__ import annotations

import json
import shutil

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.options import ConfigurationError
from beamtrove.transforms.readers import ReadHuggingFace, reader_for
from tests.conftest import beamtrove, jsonl_rows, run_and_collect

datasets = pytest.importorskip(
    "datasets", reason="the `datasets` package writes these tests' data (beamtrove reads it without the package)"
)

from benchmarks.common import prepare_as_hub_dataset  # noqa: E402  (it needs datasets)

_LANGUAGES = ["eng", "fra", "deu", "spa", "ita", "nld", "pol"]


@pytest.fixture
def udhr_rows(udhr_texts) -> list[dict]:
    return [{"text": udhr_texts[lang], "lang": lang} for lang in _LANGUAGES]


def test_a_saved_dataset_reads_in_order_across_its_shards_with_datatroves_ids(tmp_path, udhr_rows):
    folder = str(tmp_path / "udhr")
    datasets.Dataset.from_list(udhr_rows).save_to_disk(folder, num_shards=3)
    reader = ReadHuggingFace(folder, batch_size=2)
    expected = [
        Document(text=row["text"], id=f"{folder}/00000/{i}", metadata={"lang": row["lang"], "dataset": folder})
        for i, row in enumerate(udhr_rows)
    ]

    def build(pipeline):
        assert_that(pipeline | reader, equal_to(expected))

    stats = run_and_collect(build)
    assert [file.first_index for file in reader.files] == [0, 3, 5]
    assert stats["ReadHuggingFace"]["counters"]["out"] == 7
    assert stats["ReadHuggingFace"]["counters"]["files"] == 3


def test_a_split_of_a_saved_dataset_dict_is_named_like_its_folder(tmp_path, udhr_rows):
    folder = str(tmp_path / "udhr")
    dataset = datasets.Dataset.from_list(udhr_rows)
    datasets.DatasetDict({"train": dataset.select(range(5)), "test": dataset.select(range(5, 7))}).save_to_disk(folder)

    def build(pipeline):
        docs = pipeline | ReadHuggingFace(folder, split="test", default_metadata={"dataset": "udhr", "corpus": "nltk"})
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.text, d.metadata)),
            equal_to(
                [
                    (
                        f"{folder}/test/00000/{i}",
                        row["text"],
                        {"lang": row["lang"], "dataset": "udhr", "corpus": "nltk"},
                    )
                    for i, row in enumerate(udhr_rows[5:])
                ]
            ),
        )

    run_and_collect(build)
    with pytest.raises(ValueError, match=r"No split was chosen in .*: choose one of train, test"):
        ReadHuggingFace(folder)
    with pytest.raises(ValueError, match=r"There is no split 'validation' in .*: choose one of train, test"):
        ReadHuggingFace(folder, split="validation")


def test_a_hub_dataset_is_found_by_name_in_the_cache_load_dataset_fills(tmp_path, udhr_rows, monkeypatch):
    cache = tmp_path / "cache"
    rows = [{"id": f"udhr-{row['lang']}", "body": row["text"]} for row in udhr_rows]
    prepared = prepare_as_hub_dataset({"train": rows[:4], "validation": rows[4:]}, "nltk/UDHR", cache)
    assert prepared.parent.parent.parent.name == "nltk___udhr"
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))

    def build(pipeline):
        docs = pipeline | ReadHuggingFace("nltk/UDHR", split="validation", text_key="body")
        assert_that(
            docs | beam.Map(lambda d: (d.id, d.text, d.metadata)),
            equal_to([(row["id"], row["body"], {"dataset": "nltk/UDHR"}) for row in rows[4:]]),
        )

    run_and_collect(build)
    with pytest.raises(ValueError, match="No split was chosen"):
        ReadHuggingFace("nltk/UDHR")
    with pytest.raises(FileNotFoundError, match="configuration 'ar' of nltk/UDHR is neither a folder nor prepared"):
        ReadHuggingFace("nltk/UDHR", config="ar")


def test_a_dataset_only_in_the_hub_cache_points_to_the_parquet_reader(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub" / "datasets--nltk--udhr" / "snapshots").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="read them with --input_format parquet"):
        ReadHuggingFace("nltk/udhr")
    with pytest.raises(FileNotFoundError, match="nltk/other is neither a folder nor prepared in the datasets cache"):
        ReadHuggingFace("nltk/other")


def test_a_folder_without_a_dataset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="holds no Hugging Face dataset"):
        ReadHuggingFace(str(tmp_path))
    with pytest.raises(ValueError, match="reads one dataset at a time"):
        ReadHuggingFace([str(tmp_path), str(tmp_path)])


def test_convert_tells_a_saved_dataset_by_its_folder(tmp_path, udhr_rows):
    folder = tmp_path / "udhr"
    dataset = datasets.Dataset.from_list(udhr_rows)
    datasets.DatasetDict({"train": dataset.select(range(5)), "test": dataset.select(range(5, 7))}).save_to_disk(folder)
    assert reader_for("auto", [str(folder)]) is ReadHuggingFace
    out = tmp_path / "out"
    assert main(["run", "convert", "--input", str(folder), "--hf_split", "train", "--output", str(out)]) == 0

    rows = sorted(jsonl_rows(out), key=lambda row: row["id"])
    assert [(row["id"], row["text"], row["metadata"]) for row in rows] == [
        (f"{folder}/train/00000/{i}", row["text"], {"lang": row["lang"], "dataset": f"{folder}/train"})
        for i, row in enumerate(udhr_rows[:5])
    ]
    assert json.loads((out / "stats.json").read_text())["steps"]["read"]["counters"]["out"] == 5


def test_hf_options_are_refused_for_other_inputs(tmp_path, udhr_texts, capsys):
    (tmp_path / "udhr.jsonl").write_text(json.dumps({"text": udhr_texts["eng"]}) + "\n")
    out = tmp_path / "out"
    assert (
        main(["run", "convert", "--input", str(tmp_path / "udhr.jsonl"), "--hf_split", "a", "--output", str(out)]) == 2
    )
    assert capsys.readouterr().err.endswith(
        "beamtrove: error: --hf_split and --hf_config apply to Hugging Face datasets (--input_format hf) only.\n"
    )


@pytest.fixture(scope="module")
def saved_reviews(movie_reviews, tmp_path_factory):
    """300 real movie reviews saved by ``save_to_disk`` in 3 shards of 100 rows, and the rows."""
    rows = [{"text": text, "review": name} for name, text in list(movie_reviews.items())[:300]]
    folder = tmp_path_factory.mktemp("saved") / "reviews"
    datasets.Dataset.from_list(rows).save_to_disk(str(folder), num_shards=3)
    return folder, rows


_SHARD = "data-00001-of-00003.arrow"


def _cut(path, keep) -> None:
    path.write_bytes(path.read_bytes()[: keep(path.stat().st_size)])


@pytest.mark.parametrize(
    ("damage", "named", "problem"),
    [
        (lambda d: (d / _SHARD).unlink(), _SHARD, "is missing, though {folder}/state.json lists it"),
        (lambda d: _cut(d / _SHARD, lambda size: size // 2), _SHARD, "is damaged (not a whole Arrow stream: "),
        (lambda d: _cut(d / _SHARD, lambda size: 0), _SHARD, "is damaged (not a whole Arrow stream: "),
        # A copy cut right after a record batch reads as a whole stream would; its end marker is what is missing.
        (lambda d: _cut(d / _SHARD, lambda size: size - 8), _SHARD, "is damaged (it ends after a record batch"),
        (lambda d: (d / "state.json").write_text('{"_data_files": [{"filena'), "state.json", "is damaged (not JSON: "),
        (lambda d: (d / "state.json").write_text('{"_split": null}'), "state.json", "is damaged (it lists no Arrow"),
        (lambda d: (d / "state.json").write_text("[]"), "state.json", "is damaged (a JSON list where an object"),
        (lambda d: (d / "state.json").unlink(), "", "holds neither state.json nor a dataset_info.json that lists"),
    ],
    ids=[
        "shard-deleted",
        "shard-cut",
        "shard-emptied",
        "shard-cut-after-a-batch",
        "state-cut",
        "state-without-files",
        "state-a-list",
        "state-deleted",
    ],
)
def test_a_damaged_saved_dataset_is_refused_before_the_run_in_one_line_naming_the_file(
    saved_reviews, tmp_path, capsys, damage, named, problem
):
    # Issue 29: a damaged --input_format hf folder ended in a traceback (KeyError: '_data_files') or in a message
    # naming no file ("Expected to be able to read 364080 bytes for message body, got 181760"), or, cut after a
    # record batch, was read as whole.
    folder = tmp_path / "reviews"
    shutil.copytree(saved_reviews[0], folder)
    damage(folder)
    out = tmp_path / "out"
    argv = ["run", "convert", "--input", str(folder), "--input_format", "hf", "--output", str(out)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    named_file = f"{folder}/{named}" if named else str(folder)
    assert line.startswith(f"beamtrove: error: {named_file} {problem.format(folder=folder)}")
    assert line.endswith("restore it, or write the dataset again with save_to_disk.")
    assert not out.exists()


def test_a_damaged_prepared_dataset_is_refused_naming_the_file(udhr_rows, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    prepared = prepare_as_hub_dataset({"train": udhr_rows}, "nltk/UDHR", cache)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    info = prepared / "dataset_info.json"
    whole = info.read_text()

    info.write_text(json.dumps({**json.loads(whole), "splits": {"train": {"num_examples": 8}}}))
    with pytest.raises(
        ConfigurationError, match=r"The Arrow files of the split hold 7 rows where .*dataset_info\.json says 8"
    ):
        ReadHuggingFace(str(prepared))
    info.write_text(whole[: len(whole) // 2])
    # Found by its hub name or given as a folder, the cut dataset_info.json is named, not "not in the cache".
    for dataset in ("nltk/UDHR", str(prepared)):
        with pytest.raises(ConfigurationError, match=rf"^{info} is damaged \(not JSON"):
            ReadHuggingFace(dataset)


def test_a_prepared_split_missing_one_of_its_shards_is_refused_naming_it(tmp_path, udhr_rows):
    # load_dataset names the shards of a big split <name>-<split>-NNNNN-of-NNNNN.arrow; the folder is listed, so a
    # deleted shard was read as a smaller split.
    prepared = prepare_as_hub_dataset({"train": udhr_rows}, "nltk/UDHR", tmp_path / "cache")
    (shard,) = prepared.glob("*-train.arrow")
    table = pa.ipc.open_stream(shard.read_bytes()).read_all()
    for number, rows in enumerate((table.slice(0, 4), table.slice(4))):
        with pa.ipc.new_stream(prepared / f"udhr-train-{number:05d}-of-00003.arrow", table.schema) as writer:
            writer.write_table(rows)
    shard.unlink()
    with pytest.raises(ConfigurationError, match=rf"^{prepared}/udhr-train-00002-of-00003\.arrow is missing"):
        ReadHuggingFace(str(prepared))


def test_damage_only_reading_finds_keeps_the_other_rows_and_is_one_dead_letter(saved_reviews, tmp_path):
    # Offsets spoilt inside a record batch pass every check on the batch headers, and made converting its rows read
    # outside the batch: the run died of a segmentation fault.
    folder = tmp_path / "reviews"
    shutil.copytree(saved_reviews[0], folder)
    shard = folder / _SHARD
    data = pa.py_buffer(shard.read_bytes())
    offsets = pa.ipc.open_stream(data).read_next_batch().column("text").buffers()[1].address - data.address
    spoilt = bytearray(data.to_pybytes())
    spoilt[offsets + 40 : offsets + 56] = (0x7FFFFFF0).to_bytes(4, "little") * 4
    shard.write_bytes(bytes(spoilt))
    out = tmp_path / "out"

    run = beamtrove("run", "convert", "--input", str(folder), "--input_format", "hf", "--output", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    rows = saved_reviews[1]
    assert sorted(row["text"] for row in jsonl_rows(out)) == sorted(row["text"] for row in rows[:100] + rows[200:])
    (dead,) = jsonl_rows(out / "dead_letters")
    assert (dead["reason"], dead["file"], dead["line"]) == ("corrupt_ipc", str(shard), 100)
    counters = json.loads((out / "stats.json").read_text())["steps"]["read"]["counters"]
    assert (counters["in"], counters["out"], counters["errors.corrupt_ipc"]) == (201, 200, 1)
