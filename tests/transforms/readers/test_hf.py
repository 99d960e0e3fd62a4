"""ReadHuggingFace on datasets written by ``save_to_disk`` and prepared by ``load_dataset`` in its cache."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.readers import ReadHuggingFace, reader_for
from tests.conftest import jsonl_rows, run_and_collect

datasets = pytest.importorskip(
    "datasets", reason="the `datasets` package writes these tests' data (beamtrove reads it without the package)"
)

from benchmarks.readers_parity import prepare_as_hub_dataset  # noqa: E402  (it needs datasets)

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
    assert json.loads((out / "stats.json").read_text())["steps"]["Read"]["counters"]["out"] == 5


def test_hf_options_are_refused_for_other_inputs(tmp_path, udhr_texts, capsys):
    (tmp_path / "udhr.jsonl").write_text(json.dumps({"text": udhr_texts["eng"]}) + "\n")
    out = tmp_path / "out"
    assert (
        main(["run", "convert", "--input", str(tmp_path / "udhr.jsonl"), "--hf_split", "a", "--output", str(out)]) == 2
    )
    assert capsys.readouterr().err.endswith(
        "beamtrove: error: --hf_split and --hf_config apply to Hugging Face datasets (--input_format hf) only.\n"
    )
