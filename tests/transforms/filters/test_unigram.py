"""UnigramLogProbFilter on real text: wordfreq's table, a table counted from real reviews, both splitters."""

from __future__ import annotations

import collections
import csv
import math
import re

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.cli import main
from beamtrove.document import Document
from beamtrove.text import split_words
from beamtrove.transforms.filters import Drop, Filter
from beamtrove.transforms.filters.unigram import UnigramLogProbFilter, read_unigram_table, wordfreq_unigram_counts
from tests.transforms.filters.conftest import outcomes

pytest.importorskip("wordfreq")


@pytest.fixture(scope="module")
def review_table(movie_reviews, tmp_path_factory) -> str:
    """A word,count table of the alphabetic words of the 2,000 movie reviews, most frequent first."""
    counts = collections.Counter(
        word.lower() for text in movie_reviews.values() for word in split_words(text) if word.isalpha()
    )
    path = tmp_path_factory.mktemp("unigrams") / "reviews.csv"
    with path.open("w", encoding="utf-8", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["word", "count"])
        writer.writerows(counts.most_common())
    return str(path)


def _ready(rule: UnigramLogProbFilter) -> UnigramLogProbFilter:
    rule.setup()
    return rule


@pytest.mark.parametrize("splitter", ["beamtrove", "spacy"])
def test_scores_with_wordfreqs_table(inaugural, udhr_texts, splitter):
    if splitter == "spacy":
        pytest.importorskip("spacy")
    rule = _ready(UnigramLogProbFilter(word_splitter=splitter))
    assert round(rule.score(inaugural["1789-Washington"]), 6) == -8.248905
    assert round(rule.score(udhr_texts["eng"]), 6) == -8.433967
    assert rule.score("") == 0.0


@pytest.mark.slow
def test_keeps_english_and_drops_the_other_languages_of_the_udhr(udhr_texts):
    documents = [Document(text, name) for name, text in udhr_texts.items()]
    # nku.txt is empty: no words score 0, above the threshold, as in DataTrove.
    expected = [("kept", "eng"), ("kept", "nku")]
    expected += [("excluded", name, "unigram_logprob") for name in udhr_texts if name not in {"eng", "nku"}]
    assert len(expected) == 388

    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | Filter(UnigramLogProbFilter())
        assert_that(outcomes(result), equal_to(expected))


def test_a_users_table(review_table, inaugural, udhr_texts):
    assert len(read_unigram_table(review_table)) == 38_825
    rule = _ready(UnigramLogProbFilter(table=review_table))
    assert round(rule.score(inaugural["1789-Washington"]), 6) == -8.679618
    assert round(rule.score(udhr_texts["eng"]), 6) == -8.890427
    stricter = _ready(UnigramLogProbFilter(-8.8, table=review_table))
    washington = Document(inaugural["1789-Washington"], "1789-Washington")
    assert stricter.filter(washington) is washington
    assert stricter.filter(Document(udhr_texts["eng"], "eng")) == Drop("unigram_logprob")


def test_wordfreq_counts_keep_its_frequencies():
    counts = wordfreq_unigram_counts()
    assert len(counts) == 321_180
    assert counts["the"] == 53_703_179_637
    assert min(counts.values()) == 10_233


def test_refuses_bad_configuration(tmp_path):
    with pytest.raises(FileNotFoundError, match="No unigram table at"):
        UnigramLogProbFilter(table=str(tmp_path / "absent.csv"))
    headless = tmp_path / "headless.csv"
    headless.write_text("the,23135851162\nof,13151942776\n")
    with pytest.raises(ValueError, match="header must name word and count"):
        UnigramLogProbFilter(table=str(headless))
    with pytest.raises(ValueError, match="one of beamtrove, spacy"):
        UnigramLogProbFilter(word_splitter="nltk")


@pytest.mark.parametrize("threshold", [math.nan, math.inf, -math.inf, 0, 0.5])
def test_refuses_a_threshold_that_no_score_can_exceed(threshold):
    # A score averages log probabilities, at most 0: from 0 up (or NaN) every document would be dropped.
    refusal = rf"^logprobs_threshold must be a finite number below 0 \(got {threshold!r}\)\.$"
    with pytest.raises(ValueError, match=refusal):
        UnigramLogProbFilter(threshold)


@pytest.mark.parametrize("count", ["0", "-3", "nan", "inf", "1.5", "many", ""])
def test_refuses_a_table_with_a_count_that_is_no_positive_integer(review_table, tmp_path, count, review_jsonl, capsys):
    # The reviews' table with its 5th row's count damaged: line 6 of the file, after the header.
    with open(review_table, encoding="utf-8", newline="") as real:
        rows = list(csv.reader(real))
    assert len(rows) == 38_826
    rows[5][1] = count
    damaged = tmp_path / "damaged.csv"
    with damaged.open("w", encoding="utf-8", newline="") as table:
        csv.writer(table).writerows(rows)
    message = f"{damaged}, line 6: the count {count!r} is not a positive integer."
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        UnigramLogProbFilter(table=str(damaged))
    # On the command line: refused before the run, in one line, and nothing written.
    output = tmp_path / "out"
    argv = ["run", "filter", "--steps", "unigram_logprob", "--unigram_table", str(damaged), "--input",
            str(review_jsonl), "--output", str(output)]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err == f"beamtrove: error: {message}\n"
    assert not output.exists()


def test_refuses_a_table_of_no_counts(tmp_path):
    header_only = tmp_path / "header_only.csv"
    header_only.write_text("word,count\n")
    with pytest.raises(ValueError, match=r"header_only.csv is not a unigram table: it holds no word,count rows"):
        UnigramLogProbFilter(table=str(header_only))
