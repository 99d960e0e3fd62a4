"""``beamtrove train-classifier`` on real text: speeches as JSONL against web articles as a run's output folder."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.transforms.filters import Drop
from beamtrove.transforms.filters.classifier import FastTextClassifierFilter
from tests.conftest import child_processes, wait_for

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


@pytest.mark.slow
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
    # Quantization clusters the vectors: at the default --dim (100) it took 51 s of the test, at 16 10 s.
    assert main([*args, *_SMALL, "--dim", "16", "--quantize"]) == 0
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


def test_an_output_that_is_a_folder_or_under_a_file_is_refused_before_reading(sets, tmp_path, capsys):
    speeches, run = sets
    args = ["train-classifier", "--positive", str(speeches), "--negative", str(run)]
    folder = tmp_path / "models"
    folder.mkdir()
    refusals = {
        str(folder): f"--output {folder} is a folder: give the model's file, e.g. --output {folder}/model.bin",
        f"{tmp_path}/new/": f"--output {tmp_path}/new/ is a folder: give the model's file, e.g. --output "
        f"{tmp_path}/new/model.bin",
        f"{speeches}/model.bin": f"--output {speeches}/model.bin cannot be written: {speeches} is a file, not a folder",
    }
    for output, refusal in refusals.items():
        assert main([*args, "--output", output, *_SMALL]) == 2
        captured = capsys.readouterr()
        # Refused before reading the sets, which prints their counts.
        assert (captured.out, captured.err) == ("", f"beamtrove: error: {refusal}\n")
    (folder / "m.ftz").mkdir()
    assert main([*args, "--output", str(folder / "m.bin"), "--quantize", *_SMALL]) == 2
    assert capsys.readouterr().err == (
        f"beamtrove: error: --quantize writes {folder}/m.ftz, which is a folder: move it, or give another --output\n"
    )
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == [
        pathlib.Path("models"),
        pathlib.Path("models/m.ftz"),
    ]


def _start_training(sets, model: pathlib.Path, temporary: pathlib.Path) -> tuple[subprocess.Popen, int]:
    """Starts a long training in its own process group, as from a terminal, its TMPDIR ``temporary``.

    Returns:
        The command, once its trainer runs, and the trainer's pid.
    """
    speeches, run = sets
    command = [sys.executable, "-m", "beamtrove", "train-classifier", "--positive", str(speeches)]
    command += ["--negative", str(run), "--output", str(model), "--epoch", "200"]
    temporary.mkdir()
    training = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    return training, wait_for(lambda: _trainer(training.pid), what="fastText reading the training texts")


def _trainer(pid: int) -> int | None:
    """The child of ``pid`` that has the training texts open: fastText reads them as it trains."""
    for child in child_processes(pid):
        try:
            if any(link.readlink().name == "train.txt" for link in pathlib.Path(f"/proc/{child}/fd").iterdir()):
                return child
        except OSError:  # ended meanwhile, or a descriptor closed while being read
            continue
    return None


def _gone(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_an_interrupted_training_stops_its_trainer_and_leaves_nothing(sets, tmp_path, stop):
    model, temporary = tmp_path / "models" / "speeches.bin", tmp_path / "tmp"
    training, trainer = _start_training(sets, model, temporary)
    if stop == "ctrl-c":
        os.killpg(training.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
    else:
        training.send_signal(signal.SIGTERM)
    _, err = training.communicate(timeout=120)
    assert (training.returncode, err.decode().splitlines()[-1]) == (130, "beamtrove: interrupted")
    assert "Traceback" not in err.decode()
    assert wait_for(lambda: _gone(trainer), what="the trainer to end")
    # Nothing left beside the model, nor in the temporary folder.
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == [
        pathlib.Path("models"),
        pathlib.Path("tmp"),
    ]


@pytest.mark.slow
def test_a_killed_trainings_folder_is_removed_by_the_next_run(sets, tmp_path, capsys):
    model, temporary = tmp_path / "models" / "speeches.bin", tmp_path / "tmp"
    training, trainer = _start_training(sets, model, temporary)
    training.kill()
    training.communicate(timeout=120)
    # The trainer dies with the command, before writing its 100 MB model; the training texts stay beside it.
    assert wait_for(lambda: _gone(trainer), what="the trainer to end")
    assert list(temporary.iterdir()) == []
    (left,) = model.parent.iterdir()
    assert left.name.startswith(".speeches.bin.training-")
    assert sorted(path.name for path in left.iterdir()) == ["held_out.txt", "train.txt"]

    speeches, run = sets
    args = ["train-classifier", "--positive", str(speeches), "--negative", str(run), "--output", str(model)]
    assert main([*args, *_SMALL]) == 0
    assert [path.name for path in model.parent.iterdir()] == ["speeches.bin"]
