"""NGramsDecontFilter on the State of the Union addresses against an index of the inaugural addresses.

Presidents quote inaugural addresses in later speeches: those State of the Union addresses are the real
contamination the index finds. Five more addresses get a piece of Kennedy's 1961 address planted in them.
"""

from __future__ import annotations

import dataclasses
import pickle

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.decont import DecontConfig, NGramsDecontFilter
from beamtrove.transforms.filters import Drop, Filter
from tests.transforms.decont.conftest import build_index

LABEL = (
    "Let every nation know, whether it wishes us well or ill, that we shall pay any price, bear any burden, meet any "
    "hardship, support any friend, oppose any foe to assure the survival and the success of liberty."
)
QUERY_END = "and to which we are committed today at home and around the world."

# Quotations the speakers made themselves: (address, task of the quoted address, first n-gram found).
QUOTED = [
    ("1963-Johnson", "1961-Kennedy", "this administration nor even perhaps in our lifetime on this planet but"),
    ("1972-Nixon", "1961-Kennedy", "shall pay any price bear any burden meet any hardship support any"),
    ("1982-Reagan", "1981-Reagan", "ills we suffer have come upon us over several decades they will"),
    ("1984-Reagan", "1981-Reagan", "a strong and prosperous america at peace with itself and the world"),
    # Bush's closing words of 1989 close other addresses too: the first task in the index's order names it.
    ("1996-Clinton", "1989-Bush", "thank you god bless you and god bless the united states of"),
    ("2005-GWBush", "1937-Roosevelt", "each age is a dream that is dying or one that is"),
]
PLANTED = {
    "1945-Truman": LABEL,
    # The end of the item's query and the start of its label: an n-gram spanning both.
    "1946-Truman": " ".join(QUERY_END.split()[-6:] + LABEL.split()[:6]),
    # Case, dashes, commas and an accent are normalized away.
    "1947-Truman": "LÉT EVERY NATION KNOW — WHETHER IT WISHES US, WELL OR ILL, THAT",
    # 11 words: shorter than an n-gram.
    "1948-Truman": "Let every nation know, whether it wishes us well or ill",
    # 12 words of the query alone: query n-grams are not indexed by default.
    "1949-Truman": "the torch has been passed to a new generation of Americans -- born",
}


def _addresses(state_union: dict[str, str]) -> list[Document]:
    documents = []
    for name, text in state_union.items():
        paragraphs = text.split("\n")
        if name in PLANTED:
            middle = len(paragraphs) // 2
            paragraphs[middle:middle] = [PLANTED[name]]
        documents.append(Document(text="\n".join(paragraphs), id=name))
    return documents


def _excluded_row(document: Document) -> tuple[str, str, str, str]:
    metadata = document.metadata
    return document.id, metadata["filter_reason"], metadata["contaminated_task"], metadata["contaminated_ngram"]


def test_drops_quoting_and_planted_addresses_with_task_and_ngram(state_union, inaugural_index):
    documents = _addresses(state_union)
    assert len(documents) == 65
    first = "let every nation know whether it wishes us well or ill that"
    expected = [(name, f"contaminated_{task}", task, ngram) for name, task, ngram in QUOTED] + [
        ("1945-Truman", "contaminated_1961-Kennedy", "1961-Kennedy", first),
        (
            "1946-Truman",
            "contaminated_1961-Kennedy",
            "1961-Kennedy",
            "at home and around the world let every nation know whether it",
        ),
        ("1947-Truman", "contaminated_1961-Kennedy", "1961-Kennedy", first),
    ]
    dropped = {row[0] for row in expected}
    with TestPipeline() as pipeline:
        outputs = pipeline | beam.Create(documents) | Filter(NGramsDecontFilter(str(inaugural_index)))
        assert_that(outputs.excluded | beam.Map(_excluded_row), equal_to(expected), label="Excluded")
        kept = [document.id for document in documents if document.id not in dropped]
        assert_that(outputs.kept | beam.Map(lambda document: document.id), equal_to(kept), label="Kept")
        assert_that(outputs.dead_letters, equal_to([]), label="NoDeadLetters")
    assert {"1948-Truman", "1949-Truman"} <= set(kept) and len(kept) == 56


def test_query_ngrams_are_found_when_the_index_holds_them(inaugural_items, tmp_path):
    kennedy = [item for item in inaugural_items if item.metadata["task"] == "1961-Kennedy"]
    build_index(kennedy, tmp_path, config=DecontConfig(find_query_ngrams=True))
    verdict = NGramsDecontFilter(str(tmp_path)).filter(Document(text=PLANTED["1949-Truman"], id="query"))
    assert isinstance(verdict, Drop)
    assert verdict.document.metadata["contaminated_ngram"] == (
        "the torch has been passed to a new generation of americans born"
    )


def test_several_indexes_of_different_settings_apply_together(inaugural_items, tmp_path):
    obama = [item for item in inaugural_items if item.metadata["task"] == "2009-Obama"]
    kennedy = [item for item in inaugural_items if item.metadata["task"] == "1961-Kennedy"]
    build_index(obama, tmp_path / "obama")
    build_index(kennedy, tmp_path / "kennedy", config=DecontConfig(n_grams=8, find_overlap_ngrams=False))
    rule = NGramsDecontFilter([str(tmp_path / "obama"), str(tmp_path / "kennedy")])
    # 8 words of a Kennedy label: too short for Obama's 12-grams, an n-gram of the 8-gram index.
    verdict = rule.filter(Document(text="Ask not what America will do for you.", id="ask"))
    assert isinstance(verdict, Drop)
    assert (verdict.reason, verdict.document.metadata["contaminated_ngram"]) == (
        "contaminated_1961-Kennedy",
        "ask not what america will do for you",
    )
    clean = Document(text="Ask not what America will do", id="short", metadata={"url": "u"})
    assert rule.filter(clean) is clean


def test_pickles_without_its_loaded_hashes_and_refuses_no_index(inaugural_index):
    rule = NGramsDecontFilter(str(inaugural_index))
    rule.setup()
    copy = pickle.loads(pickle.dumps(rule))
    assert copy._lookups is None
    assert dataclasses.replace(copy._manifests[0]) == rule._manifests[0]
    with pytest.raises(ValueError, match="at least one index folder"):
        NGramsDecontFilter([])
