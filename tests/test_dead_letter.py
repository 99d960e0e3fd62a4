"""Dead letters: what they record about a record a step could not handle."""

from __future__ import annotations

import json
import pickle

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document


def test_an_excerpt_is_the_start_of_the_record_decoded_leniently(state_union):
    speech = state_union["2006-GWBush"]
    assert DeadLetter.excerpt_of(speech) == speech[:1000]
    raw = b"\xff\xfe" + speech.encode("utf-8")
    excerpt = DeadLetter.excerpt_of(raw)
    assert excerpt.startswith("\ufffd\ufffd") and len(excerpt) == 1000
    assert excerpt[2:] == speech[:998]


def test_a_documents_dead_letter_names_its_id_and_url(state_union):
    document = Document(state_union["1945-Truman"], "1945-Truman", metadata={"url": "https://example.org/truman"})
    letter = DeadLetter.of_document("tokenize", "encode_failed", "boom", document)
    assert (letter.step, letter.reason, letter.record_id, letter.url) == (
        "tokenize",
        "encode_failed",
        "1945-Truman",
        "https://example.org/truman",
    )
    assert letter.excerpt == state_union["1945-Truman"][:1000]
    # Rows leave out what is unknown, and survive JSON and pickling (they cross shuffles and processes).
    row = letter.to_row()
    assert set(row) == {"step", "reason", "message", "record_id", "url", "excerpt"}
    assert DeadLetter(**json.loads(json.dumps(row))) == letter == pickle.loads(pickle.dumps(letter))


def test_describe_names_the_exception_and_where_it_was_raised():
    def parse_row(line: str) -> dict:
        return json.loads(line)

    try:
        parse_row('{"text": "an unfinished row')
    except ValueError as exc:
        described = DeadLetter.describe(exc)
    assert described.startswith("JSONDecodeError: Unterminated string starting at: line 1 column 10 (char 9) (at ")
    assert "json/decoder.py" in described and described.endswith(")")
    assert DeadLetter.describe(ValueError("never raised")) == "ValueError: never raised"
