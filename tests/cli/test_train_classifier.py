"""``beamtrove train-classifier`` on real text: speeches as JSONL against web articles as a run's output folder."""

from __future__ import annotations

import gzip
import json

import pytest

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.filters import Drop
from beamtrove.transforms.filters.classifier import FastTextClassifierFilter

_SMALL = ["--epoch", "25", "--lr", "0.5", "--bucket", "10000", "--seed", "3"]


@pytest.fixture(scope="module")
def sets(state_union, inaugural, data_dir, tmp_path_factory):
    """``(speeches.jsonl, a run's output folder holding the web articles)``."""
    root = tmp_path_factory.mktemp("sets")
    speeches = root / "speeches.jsonl"
    rows = {**state_union, **inaugural}.items()
    speeches.write_text("".join(json.dumps({"text": text, "id": name}) + "\n" for name, text in rows))
    articles = json.loads((data_dir / "article-extraction-benchmark" / "ground-truth.json").read_text())
    documents = root / "run" / "documents"
    documents.mkdir(parents=True)
    with gzip.open(documents / "part-00000.jsonl.gz", "wt", encoding="utf-8") as lines:
        for key, article in sorted(articles.items()):
            lines.write(json.dumps({"text": article["articleBody"], "id": key}) + "\n")
    # What makes it a run's folder, and what the run dropped: only documents/ is read.
    (root / "run" / "stats.json").write_text("{}")
    excluded = root / "run" / "excluded" / "gopher_quality"
    excluded.mkdir(parents=True)
    (excluded / "part-00000.jsonl").write_text(json.dumps({"text": "a dropped page", "id": "dropped"}) + "\n")
    return speeches, root / "run"


def test_trains_a_model_the_filter_uses(sets, tmp_path, capsys, inaugural):
    speeches, run = sets
    model = tmp_path / "models" / "speeches.bin"
    args = ["train-classifier", "--positive", str(speeches), "--negative", str(run), "--output", str(model)]
    assert main([*args, *_SMALL]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "documents: 114 hq (0 unreadable records), 181 lq (0 unreadable records)",
        "held out hq: 11 documents, precision 1.0000, recall 1.0000",
        "held out lq: 18 documents, precision 1.0000, recall 1.0000",
        str(model),
    ]
    # The model is written whole, under its name only.
    assert [path.name for path in model.parent.iterdir()] == ["speeches.bin"]
    _assert_judges(model, inaugural)

    again = tmp_path / "again.bin"
    assert (
        main(["train-classifier", "--positive", str(speeches), "--negative", str(run), "--output", str(again), *_SMALL])
        == 0
    )
    assert again.read_bytes() == model.read_bytes()


def _assert_judges(model, inaugural) -> None:
    rule = FastTextClassifierFilter(str(model), keep_labels=("hq", 0.5))
    rule.setup()
    speech = Document(inaugural["2009-Obama"], "2009-Obama")
    assert rule.filter(speech).text == speech.text
    assert isinstance(rule.filter(Document("Subscribe to our newsletter for the latest deals.", "ad")), Drop)


@pytest.mark.slow
def test_quantize(sets, tmp_path, capsys, inaugural):
    speeches, run = sets
    model = tmp_path / "speeches.bin"
    args = ["train-classifier", "--positive", str(speeches), "--negative", str(run), "--output", str(model)]
    assert main([*args, *_SMALL, "--quantize"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [str(model), str(model.with_suffix(".ftz"))]
    _assert_judges(model.with_suffix(".ftz"), inaugural)


def test_balance_and_limit(sets, tmp_path, capsys):
    speeches, run = sets
    model = tmp_path / "balanced.bin"
    args = ["train-classifier", "--positive", str(speeches), "--negative", str(run), "--output", str(model)]
    assert main([*args, *_SMALL, "--balance", "--limit", "150", "--validation", "0", "--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "documents: 114 hq (0 unreadable records), 150 lq (0 unreadable records)",
        str(model),
    ]


def test_refuses_bad_requests(sets, tmp_path, capsys):
    speeches, run = sets
    args = ["train-classifier", "--positive", str(speeches), "--output", str(tmp_path / "m.bin")]
    assert main([*args, "--negative", str(run), "--validation", "1"]) == 2
    assert "--validation is a share from 0 to below 1, not 1.0" in capsys.readouterr().err
    assert main([*args, "--negative", str(run), "--negative_label", "hq"]) == 2
    assert "--positive_label and --negative_label are both 'hq'" in capsys.readouterr().err
    assert main([*args, "--negative", str(tmp_path / "absent")]) == 2
    assert "absent" in capsys.readouterr().err
