"""Exact-substring removal on real texts, against a brute force over token windows."""

from __future__ import annotations

import json
import pathlib
import tempfile

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from tokenizers import Tokenizer

from beamtrove.document import Document
from beamtrove.metrics import collect_stats
from beamtrove.text import split_words
from beamtrove.transforms.dedup import substrings
from beamtrove.transforms.dedup.substrings import SubstringDedup, cut_token_spans, merge_spans
from tests.conftest import require


@pytest.fixture(scope="module")
def gpt2(data_dir) -> str:
    return str(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"))


def _brute_force(documents: list[Document], tokenizer_path: str, min_tokens: int, rank=None) -> dict[str, str]:
    """Every window of min_tokens token ids compared as a tuple; a character goes when all its tokens go."""
    tokenizer = Tokenizer.from_file(tokenizer_path)
    rank = rank or (lambda document: document.id)
    encodings = {d.id: tokenizer.encode(d.text, add_special_tokens=False) for d in documents}
    first = {}
    for document in sorted(documents, key=rank):
        ids = encodings[document.id].ids
        for start in range(len(ids) - min_tokens + 1):
            first.setdefault(tuple(ids[start : start + min_tokens]), (document.id, start))
    texts = {}
    for document in documents:
        ids, offsets = encodings[document.id].ids, encodings[document.id].offsets
        removed = set()
        for start in range(len(ids) - min_tokens + 1):
            if first[tuple(ids[start : start + min_tokens])] != (document.id, start):
                removed.update(range(start, start + min_tokens))
        # A character stays unless tokens cover it and every one of them goes.
        covered, kept = bytearray(len(document.text)), bytearray(len(document.text))
        for token, (begin, end) in enumerate(offsets):
            covered[begin:end] = b"\x01" * (end - begin)
            if token not in removed:
                kept[begin:end] = b"\x01" * (end - begin)
        texts[document.id] = "".join(
            char for position, char in enumerate(document.text) if kept[position] or not covered[position]
        )
    return texts


def _run(documents, **options):
    """``({id: text} kept, {id: reason} excluded, counters)`` of SubstringDedup over ``documents``."""
    pipeline = TestPipeline()
    result = pipeline | beam.Create(documents, reshuffle=False) | SubstringDedup(**options)
    with tempfile.TemporaryDirectory() as folder:
        _ = (
            result.kept
            | "Kept" >> beam.Map(lambda d: json.dumps([d.id, d.text]))
            | "WriteKept" >> beam.io.WriteToText(f"{folder}/kept", shard_name_template="")
        )
        _ = (
            result.excluded
            | "Excluded" >> beam.Map(lambda d: json.dumps([d.id, d.metadata["filter_reason"]]))
            | "WriteExcluded" >> beam.io.WriteToText(f"{folder}/excluded", shard_name_template="")
        )
        outcome = pipeline.run()
        outcome.wait_until_finish()
        rows = {
            name: dict(json.loads(line) for line in pathlib.Path(folder, name).read_text().splitlines())
            for name in ("kept", "excluded")
        }
    counters = collect_stats(outcome, pipeline)["substring"]["counters"]
    return rows["kept"], rows["excluded"], counters


@pytest.fixture(scope="module")
def corpus(movie_reviews, state_union) -> list[Document]:
    """300 real movie reviews and 20 addresses, plus copies of real passages into other documents."""
    documents = [Document(text, name) for name, text in list(movie_reviews.items())[:300]]
    speeches = [Document(text, f"speech/{name}") for name, text in list(state_union.items())[:20]]
    documents += speeches
    reviews = [d.text for d in documents[:300]]
    documents += [
        # A passage of one review at the start of a later document, and a whole address again.
        Document(reviews[10][200:1500] + "\n" + reviews[20], "zz/copy-start"),
        Document(speeches[3].text, "zz/whole-copy"),
        # A passage repeated inside its own document, and one appearing in an earlier-sorting id.
        Document(reviews[30] + "\n" + reviews[30][100:900], "zz/self-repeat"),
        Document(reviews[250][50:1200] + " " + reviews[40], "aa/earlier-copy"),
    ]
    return documents


@pytest.fixture(scope="module")
def corpus_expected(corpus, gpt2) -> dict[str, str]:
    """What brute force keeps of each document of the corpus."""
    return _brute_force(corpus, gpt2, 50)


def test_equals_brute_force_over_token_windows(corpus, corpus_expected, gpt2):
    expected = corpus_expected
    kept, excluded, counters = _run(corpus, tokenizer_path=gpt2, min_doc_words=0)
    # A document left with no word goes even with min_doc_words=0.
    emptied = {id_ for id_, text in expected.items() if not split_words(text)}
    assert "zz/whole-copy" in emptied and set(excluded) == emptied
    assert kept == {id_: text for id_, text in expected.items() if id_ not in emptied}
    changed = [d.id for d in corpus if expected[d.id] != d.text]
    # The four built copies and their originals' later twins, plus repeats the real texts hold themselves.
    assert {"zz/copy-start", "zz/whole-copy", "zz/self-repeat", corpus[250].id} <= set(changed)
    assert (counters["in"], counters["out"]) == (len(corpus), len(corpus) - len(emptied))
    assert counters["chars_removed"] == sum(len(d.text) - len(expected[d.id]) for d in corpus)
    assert counters["chars_out"] == sum(len(text) for text in kept.values())


def test_copied_paragraph_is_removed_from_the_later_document_only(state_union, gpt2):
    johnson, reagan = state_union["1965-Johnson-1"], state_union["1984-Reagan"]
    paragraph = max(johnson.split("\n\n"), key=len)
    documents = [
        Document(johnson, "speech-a"),
        Document(reagan + "\n\n" + paragraph + "\n\nThank you all.", "speech-b"),
    ]
    kept, excluded, counters = _run(documents, tokenizer_path=gpt2)
    assert excluded == {}
    assert kept["speech-a"] == johnson
    # The cut follows token bounds: the newline tokens beside the paragraph are part of the repeated run.
    assert kept["speech-b"] == reagan + "\n\n\nThank you all."
    assert counters["spans_removed"] == 1
    assert counters["chars_removed"] == len(paragraph) + 1


def test_repeats_inside_one_document_keep_the_first(inaugural, gpt2):
    text = inaugural["1961-Kennedy"]
    passage = text[1000:2500]
    document = Document(text + "\n" + passage + "\n" + passage, "kennedy")
    kept, _, counters = _run([document], tokenizer_path=gpt2)
    assert kept["kennedy"] == _brute_force([document], gpt2, 50)["kennedy"]
    # The passage ends inside "required": its " requ" token ends a run first seen at the end of the first copy,
    # so both copies go but for that token there (and the newlines, whose runs are new).
    assert passage.endswith(" requ")
    assert kept["kennedy"] == text + "\n requ\n"
    assert counters["spans_removed"] == 2


def test_texts_shorter_than_min_tokens_stay(gpt2):
    short = "Short remarks. Thank you all for coming tonight."
    kept, excluded, counters = _run(
        [Document(short, "a"), Document(short, "b")], tokenizer_path=gpt2, min_tokens=20, min_doc_words=0
    )
    assert kept == {"a": short, "b": short}
    assert "spans_removed" not in counters
    # Exactly min_tokens tokens: the later copy loses everything and is excluded for being too short.
    kept, excluded, _ = _run([Document(short, "a"), Document(short, "b")], tokenizer_path=gpt2, min_tokens=10)
    assert len(Tokenizer.from_file(gpt2).encode(short).ids) == 10
    assert kept == {"a": short}
    assert excluded == {"b": "substring_dedup_too_short"}


def test_characters_split_across_tokens_go_only_whole(udhr_texts, gpt2):
    # 😀 and 🙀 are each several byte-level tokens sharing their last one (byte 0x80), so the repeated run in
    # "b" starts inside 🙀: that character stays, the text after it goes.
    tokenizer = Tokenizer.from_file(gpt2)
    passage = udhr_texts["rus"][:1500]
    documents = [Document("Opening line 😀" + passage, "a"), Document("Другой текст 🙀" + passage, "b")]
    assert tokenizer.encode("Opening line 😀").ids[-1] == tokenizer.encode("Другой текст 🙀").ids[-1]
    kept, _, _ = _run(documents, tokenizer_path=gpt2, min_doc_words=0)
    assert kept == {"a": documents[0].text, "b": "Другой текст 🙀"}
    assert kept == _brute_force(documents, gpt2, 50)


@pytest.mark.slow
def test_result_does_not_depend_on_input_order_and_keep_by_picks_the_survivor(corpus, gpt2):
    # Four reviews, the first four addresses (the one copied whole among them) and the four built copies.
    sample = corpus[296:304] + corpus[-4:]
    forward, _, _ = _run(sample, tokenizer_path=gpt2, min_doc_words=0)
    backward, _, _ = _run(sample[::-1], tokenizer_path=gpt2, min_doc_words=0)
    assert forward == backward
    ranked = [Document(d.text, d.id, metadata={"rank": number}) for number, d in enumerate(sample)]
    latest, _, _ = _run(ranked, tokenizer_path=gpt2, min_doc_words=0, keep_by="-rank")

    def by_rank(document):
        return -document.metadata["rank"]

    expected = _brute_force(ranked, gpt2, 50, rank=by_rank)
    assert latest == {id_: text for id_, text in expected.items() if split_words(text)}
    # Highest rank first: the whole copy of an address keeps its text; by id it loses all of it and leaves.
    assert latest["zz/whole-copy"] == corpus[-3].text
    assert "zz/whole-copy" not in forward


@pytest.mark.slow
def test_too_short_after_cut_is_excluded_and_counted(corpus, corpus_expected, gpt2):
    kept, excluded, counters = _run(corpus, tokenizer_path=gpt2, min_doc_words=50)
    expected = corpus_expected
    short = {d.id for d in corpus if expected[d.id] != d.text and len(split_words(expected[d.id])) < 50}
    assert "zz/whole-copy" in short
    assert excluded == dict.fromkeys(short, "substring_dedup_too_short")
    assert kept == {key: text for key, text in expected.items() if key not in short}
    assert counters["dropped.substring_dedup_too_short"] == len(short)
    assert counters["in"] == len(corpus) and counters["out"] == len(corpus) - len(short)


def test_untokenizable_text_is_kept_as_it_is(gpt2):
    text = "A lone surrogate \ud800 breaks the tokenizer. " * 20
    kept, _, counters = _run([Document(text, "a"), Document(text, "b")], tokenizer_path=gpt2)
    assert kept == {"a": text, "b": text}
    assert counters["not_tokenized"] == 2


def test_groups_beyond_a_batch_and_a_chunk_give_the_same_result(corpus, state_union, monkeypatch, gpt2):
    # A closing passage of one address pasted at the end of 12 reviews: its anchor groups hold 13 runs, here more
    # than a batched group (2 runs) and a chunk (3 runs), so they take the two-pass path.
    passage = state_union["1984-Reagan"][-900:]
    documents = corpus[:40] + [Document(d.text + "\n" + passage, f"boilerplate/{d.id}") for d in corpus[100:112]]
    documents.append(Document(state_union["1984-Reagan"], "reagan"))
    monkeypatch.setattr(substrings, "_BATCHED_RUNS", 2)
    monkeypatch.setattr(substrings, "_GROUP_BATCH", 4)
    monkeypatch.setattr(substrings, "_CHUNK_RUNS", 3)
    kept, _, _ = _run(documents, tokenizer_path=gpt2, min_doc_words=0)
    assert kept == _brute_force(documents, gpt2, 50)
    # "boilerplate/..." ids sort before "reagan": the first of them keeps the passage, the others and the address
    # lose it.
    assert [key for key, text in kept.items() if passage in text] == [min(d.id for d in documents[40:52])]


def test_cut_token_spans_keeps_characters_shared_with_kept_tokens(gpt2):
    text = "Smile 😀 and wave 🙀 goodbye."
    encoding = Tokenizer.from_file(gpt2).encode(text, add_special_tokens=False)
    tokens = [text[start:end] for start, end in encoding.offsets]
    # Each emoji is split into byte-level tokens that all cover the whole character.
    assert tokens == ["Sm", "ile", " 😀", "😀", " and", " wave", " 🙀", "🙀", "🙀", " goodbye", "."]
    # 😀 and 🙀 keep one of their tokens: they stay.
    assert cut_token_spans(text, encoding.offsets, [(0, 3), (5, 8)]) == "😀 and🙀 goodbye."
    assert cut_token_spans(text, encoding.offsets, [(2, 4), (6, 9), (10, 11)]) == "Smile and wave goodbye"
    assert cut_token_spans(text, encoding.offsets, []) == text


def test_merge_spans():
    assert merge_spans([(5, 9), (0, 2), (2, 3), (8, 12), (20, 21)]) == [(0, 3), (5, 12), (20, 21)]


def test_arguments_are_checked(tmp_path, gpt2):
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        SubstringDedup(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="min_tokens must be at least 1"):
        SubstringDedup(gpt2, min_tokens=0)
    with pytest.raises(ValueError, match="min_doc_words"):
        SubstringDedup(gpt2, min_doc_words=-1)
    with pytest.raises(ValueError, match="keep_by"):
        SubstringDedup(gpt2, keep_by="-")
