"""C4-style span dedup on State of the Union addresses."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.dedup import SentenceDedup, split_sentences


def test_sentences_tile_the_text(state_union):
    for text in list(state_union.values())[:10]:
        sentences = split_sentences(text)
        assert "".join(text[start:end] for start, end in sentences) == text
        assert len(sentences) > 50
    text = 'He said "Stop!" Then left.\nNew line e.g. here'
    assert [text[start:end] for start, end in split_sentences(text)] == [
        'He said "Stop!" ',
        "Then left.\n",
        "New line e.g. ",
        "here",
    ]


@pytest.fixture(scope="module")
def speeches(state_union) -> list[Document]:
    """Three real addresses (of three presidents) sharing a boilerplate paragraph; one repeats a passage of another."""
    texts = [state_union[name] for name in ("1965-Johnson-1", "1984-Reagan", "2002-GWBush")]
    boilerplate = (
        "This transcript is provided for reference only. It may differ from the speech as delivered. "
        "Copyright notices apply to the original recording. "
    )
    first, second, third = texts[0], texts[1], texts[2]
    sentences = split_sentences(first)
    quoted = first[sentences[3][0] : sentences[8][1]]
    return [
        Document(boilerplate + first, "speech-a"),
        Document(boilerplate + second + "\n" + quoted, "speech-b"),
        Document(boilerplate + third, "speech-c"),
        Document(boilerplate + "Short remarks. Thank you.", "speech-d"),
    ]


def test_repeated_spans_stay_only_where_they_first_occur(speeches, state_union):
    state_union_texts = [state_union[name] for name in ("1965-Johnson-1", "1984-Reagan", "2002-GWBush")]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(speeches) | SentenceDedup()
        kept = result.kept | beam.Map(lambda d: (d.id, d.text))

        def check(rows):
            texts = dict(rows)
            assert sorted(texts) == ["speech-a", "speech-b", "speech-c"]
            assert texts["speech-a"] == speeches[0].text
            for later in ("speech-b", "speech-c"):
                assert "This transcript is provided" not in texts[later]
            # speech-b loses the boilerplate, the passage it repeats from speech-a and one real repeat:
            # digits normalize to 0, so its "January 25, 1984 / Mr. / Speaker, Mr." opening spans the same
            # three sentences as Johnson's "January 4, 1965 ..." in speech-a.
            reagan = state_union_texts[1]
            opening = split_sentences(reagan)
            assert [reagan[start:end] for start, end in opening[1:4]] == [
                "January 25, 1984\n\n",
                "Mr. ",
                "Speaker, Mr. ",
            ]
            # The cut takes the whitespace before each sentence it removes ("THE UNION\n\n" loses its line
            # breaks) and leaves the space after the last one.
            before_cut = reagan[: opening[0][1]].rstrip()
            after_cut = reagan[opening[3][0] + len(reagan[opening[3][0] : opening[3][1]].rstrip()) :]
            assert texts["speech-b"] == (before_cut + after_cut).strip()
            assert texts["speech-c"] == state_union_texts[2].strip()

        assert_that(kept, check)
        dropped = result.excluded | beam.Map(lambda d: (d.id, d.metadata["filter_reason"]))
        assert_that(dropped, equal_to([("speech-d", "sentence_dedup_too_short")]), label="Dropped")


def _opening(state_union, name: str, count: int) -> str:
    text = state_union[name]
    sentences = [text[start:end] for start, end in split_sentences(text) if any(c.isalpha() for c in text[start:end])]
    return "".join(sentences[10 : 10 + count])


def test_a_cut_takes_the_whitespace_before_it_and_an_emptied_document_is_dropped(state_union):
    passage = _opening(state_union, "1984-Reagan", 3).strip()
    own = _opening(state_union, "2002-GWBush", 4).strip()
    other = _opening(state_union, "1965-Johnson-1", 4).strip()
    documents = [
        Document(passage, "a-original"),
        Document(own + " " + passage + "\n", "b-repeat-at-end"),
        Document(passage + "\n\n" + other, "c-repeat-at-start"),
        Document(passage, "d-copy"),
    ]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | SentenceDedup(min_doc_words=0, min_doc_sentences=0)
        assert_that(
            result.kept | beam.Map(lambda d: (d.id, d.text)),
            equal_to([("a-original", passage), ("b-repeat-at-end", own), ("c-repeat-at-start", other)]),
        )
        dropped = result.excluded | beam.Map(lambda d: (d.id, d.metadata["filter_reason"]))
        assert_that(dropped, equal_to([("d-copy", "sentence_dedup_too_short")]), label="Dropped")


def test_a_cut_document_needs_min_doc_sentences_sentences_left(state_union):
    passage = _opening(state_union, "1984-Reagan", 3).strip()
    two = _opening(state_union, "2002-GWBush", 2).strip()
    three = _opening(state_union, "2002-GWBush", 3).strip()
    documents = [Document(passage, "a"), Document(two + " " + passage, "b"), Document(three + " " + passage, "c")]
    with TestPipeline() as pipeline:
        result = pipeline | beam.Create(documents) | SentenceDedup(min_doc_words=0)
        assert_that(result.kept | beam.Map(lambda d: (d.id, d.text)), equal_to([("a", passage), ("c", three)]))
        assert_that(result.excluded | beam.Map(lambda d: d.id), equal_to(["b"]), label="Dropped")
