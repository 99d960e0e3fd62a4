"""FastTextClassifierFilter with a small classifier trained here on real text.

The classifier learns US presidential speeches (State of the Union and
inaugural addresses) as ``hq`` against the gold text of real web articles
(article-extraction-benchmark) as ``lq``; every fourth speech and the last
31 articles are held out and judged. The scores are those of fasttext-numpy2
0.10.4's training in a fresh process, which is how ``train_classifier`` trains.
"""

from __future__ import annotations

import math
import pathlib
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli.train_classifier import TrainingSettings, train_classifier
from beamtrove.document import Document
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.transforms.filters import Drop, Filter
from beamtrove.transforms.filters.classifier import FastTextClassifierFilter, label_thresholds
from tests.transforms.filters.conftest import outcomes


@pytest.fixture(scope="module")
def speeches(state_union, inaugural) -> dict[str, str]:
    return dict(sorted({**state_union, **inaugural}.items()))


@pytest.fixture(scope="module")
def held_out(speeches, ground_truth) -> list[Document]:
    """28 speeches and 31 web articles the classifier was not trained on."""
    names = list(speeches)[3::4]
    keys = sorted(ground_truth)[150:]
    return [Document(speeches[name], name) for name in names] + [
        Document(ground_truth[key]["articleBody"], key[:8]) for key in keys
    ]


@pytest.fixture(scope="module")
def model(speeches, ground_truth, tmp_path_factory) -> str:
    positive = [text for number, text in enumerate(speeches.values()) if number % 4 != 3]
    negative = [ground_truth[key]["articleBody"] for key in sorted(ground_truth)[:150]]
    path = tmp_path_factory.mktemp("classifier") / "speeches.bin"
    train_classifier(positive, negative, path, TrainingSettings(epoch=25, lr=0.5, bucket=10_000))
    return str(path)


def test_keeps_held_out_speeches_and_drops_web_articles(model, held_out):
    rule = FastTextClassifierFilter(model, keep_labels=("hq", 0.5))
    # 27 of the 28 speeches are kept; Lincoln's 1865 inaugural address is not.
    expected = [("kept", doc.id) for doc in held_out[:28] if doc.id != "1865-Lincoln"]
    expected += [("excluded", doc.id, "classifier") for doc in held_out if doc.id == "1865-Lincoln"]
    expected += [("excluded", doc.id, "classifier") for doc in held_out[28:]]

    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(held_out) | Filter(rule)
        assert_that(outcomes(result), equal_to(expected))


def test_writes_every_label_score_under_its_full_name(model, held_out):
    rule = FastTextClassifierFilter(model, keep_labels=[("hq", 0.5)])
    rule.setup()
    jefferson, *_, last_article = rule.filter_batch([held_out[0], held_out[-1]])
    assert jefferson.text == held_out[0].text
    assert round(jefferson.metadata["__label__hq"], 6) == 0.903683
    assert round(jefferson.metadata["__label__lq"], 6) == 0.096337
    assert isinstance(last_article, Drop)
    assert round(last_article.document.metadata["__label__lq"], 6) == 0.95392
    assert round(last_article.document.metadata["__label__hq"], 6) == 0.0461


def test_one_at_a_time_equals_batches(model, held_out):
    rule = FastTextClassifierFilter(model, remove_labels=("lq", 0.5))
    rule.setup()
    assert [rule.filter(doc) for doc in held_out] == rule.filter_batch(held_out)


def test_without_labels_it_only_labels(model, held_out):
    rule = FastTextClassifierFilter(model, save_labels_in_metadata=True)
    rule.setup()
    verdicts = rule.filter_batch(held_out)
    assert not any(isinstance(verdict, Drop) for verdict in verdicts)
    assert all(set(verdict.metadata) == {"__label__hq", "__label__lq"} for verdict in verdicts)


def test_paragraph_mode_keeps_the_speech_and_removes_the_article(model, held_out, speeches):
    speech, article = held_out[0].text[:3000], held_out[28].text[:3000]
    mixed = Document(f"{speech}\n\n{article}", "mixed")
    rule = FastTextClassifierFilter(model, keep_labels=("hq", 0.5), filter_mode="paragraph")
    rule.setup()
    kept = rule.filter(mixed)
    # The speech's lines (each a paragraph, with the blank line after the last), none of the article's.
    assert kept.text == speech + "\n\n"
    assert round(kept.metadata["__label__hq"], 6) == 0.286873


def test_sentence_mode_removes_the_articles_sentences(model, held_out):
    pytest.importorskip("spacy")
    speech, article = held_out[0].text[:3000], held_out[28].text[:3000]
    rule = FastTextClassifierFilter(model, remove_labels=("lq", 0.5), filter_mode="sentence")
    rule.setup()
    kept = rule.filter(Document(f"{speech}\n\n{article}", "mixed"))
    assert len(kept.text) == 3045
    assert kept.text.startswith(speech[:2000])


def test_refuses_bad_configuration(model, tmp_path):
    with pytest.raises(FileNotFoundError, match="beamtrove train-classifier"):
        FastTextClassifierFilter(str(tmp_path / "absent.bin"))
    with pytest.raises(ValueError, match="not both"):
        FastTextClassifierFilter(model, keep_labels=("hq", 0.5), remove_labels=("lq", 0.5))
    with pytest.raises(ValueError, match=r"'edu' is not a label of .*; its labels: hq, lq"):
        FastTextClassifierFilter(model, keep_labels=("edu", 0.5))
    with pytest.raises(ValueError, match="document, paragraph, sentence"):
        FastTextClassifierFilter(model, filter_mode="line")


@pytest.mark.parametrize("minimum", [math.nan, math.inf, -math.inf, 2, -0.1, "nan"])
@pytest.mark.parametrize("labels", ["keep_labels", "remove_labels"])
def test_refuses_a_minimum_score_no_probability_can_meet(model, labels, minimum):
    # fastText's scores are from 0 to 1: NaN or 2 as a minimum would keep (or remove) nothing.
    refusal = rf"^The minimum score of label 'lq' must be a number from 0 to 1 \(got {float(minimum)!r}\)\.$"
    with pytest.raises(ValueError, match=refusal):
        FastTextClassifierFilter(model, **{labels: [("hq", 0.5), ("__label__lq", minimum)]})


def test_label_thresholds_reads_label_minimum_pairs():
    assert label_thresholds("hq:0.5, lq:0,,__label__x:1") == [("hq", 0.5), ("lq", 0.0), ("__label__x", 1.0)]
    assert label_thresholds("") == []
    with pytest.raises(ValueError, match=r"^--labels takes label:minimum pairs such as hq:0.5, each minimum a number"):
        label_thresholds("hq:0.5,lq:1.5", "--labels")


def test_the_filter_pipeline_builds_the_classifier_with_the_labels_given(model, review_jsonl, tmp_path):
    filter_pipeline = pipeline_spec("filter")
    argv = ["--steps", "classifier", "--classifier_model", model, "--input", str(review_jsonl), "--output",
            str(tmp_path / "out")]  # fmt: skip
    keeping = filter_pipeline.flow(parse(filter_pipeline, [*argv, "--classifier_labels", "hq:0.5,lq:0"]))
    assert keeping.steps[0].fn._rule.keep_labels == (("hq", 0.5), ("lq", 0.0))
    removing = filter_pipeline.flow(parse(filter_pipeline, [*argv, "--classifier_remove_labels=lq:1"]))
    assert (removing.steps[0].fn._rule.keep_labels, removing.steps[0].fn._rule.remove_labels) == ((), (("lq", 1.0),))


def test_a_classifier_model_cut_short_fails_the_run_in_one_line_naming_it(model, review_jsonl, tmp_path):
    # fastText loaded the cut model, its missing rows as garbage, and the run went on classifying with it.
    whole = pathlib.Path(model).read_bytes()
    cut = tmp_path / "speeches.bin"
    cut.write_bytes(whole[: len(whole) // 2])
    command = [sys.executable, "-m", "beamtrove", "run", "filter", "--steps", "classifier", "--classifier_model",
               str(cut), "--input", str(review_jsonl), "--output", str(tmp_path / "out")]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert (result.returncode, result.stderr) == (
        2,
        f"beamtrove: error: The classifier model {cut} (--classifier_model) is not a whole fastText model: the file "
        f"ends at byte {len(whole) // 2}, inside its input matrix (a copy cut short?); replace it.\n",
    )
    assert not (tmp_path / "out").exists()
