"""SymbolLinesFormatter on real separator lines (gold articles) and on hostile lines."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.filters import Filter
from beamtrove.transforms.formatters import SymbolLinesFormatter
from beamtrove.transforms.formatters.symbol_lines import SYMBOLS
from tests.conftest import run_and_collect
from tests.transforms.filters.conftest import article

AP_DEBATE = "aec5deeaad"  # AP's debate preview: a "___" line after each of its sections
IGN_DEALS = "287e4d9f4a"  # IGN's deals list, ending with a line of 30 underscores


def formatted(text: str, **options) -> str:
    return SymbolLinesFormatter(**options).format(Document(text=text, id="doc")).text


def test_separator_lines_are_removed(ground_truth):
    body = article(ground_truth, AP_DEBATE)["articleBody"]
    lines = body.split("\n")
    assert lines.count("___") == 7 and lines[9:12] == ["", "___", ""]
    # The blank lines around each separator stay.
    assert formatted(body) == "\n".join(line for line in lines if line != "___")
    assert formatted(body).count("\n") == body.count("\n") - 7
    deals = article(ground_truth, IGN_DEALS)["articleBody"]
    assert deals.endswith("\n\n______________________________")
    # The blank line before it stays, without a line end after it.
    assert formatted(deals) == deals.removesuffix("\n______________________________")


def test_a_separator_can_leave_a_placeholder(ground_truth):
    body = article(ground_truth, AP_DEBATE)["articleBody"]
    assert formatted(body, replace_char="* * *") == body.replace("\n___\n", "\n* * *\n")


def test_runs_of_separator_lines_go_and_lines_with_words_stay():
    text = "|\n|\nScores after round 3\n\n\n-\n-\n-\nHome 2 - 1 Away\n||\n\n- pending -\nfinal whistle -\n-\n\nend"
    assert formatted(text) == "Scores after round 3\n\n\nHome 2 - 1 Away\n\n- pending -\nfinal whistle -\n\nend"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("intro\n* * *\n=====\n--- | ---\noutro", "intro\noutro"),  # symbols and spaces
        ("intro\n。！？\n、【】\noutro", "intro\noutro"),  # CJK punctuation
        ("intro\n\u17d6\u0964\u0965\noutro", "intro\noutro"),  # sentence terminals of other scripts
        ("intro\n\x01\x02\x7f\noutro", "intro\noutro"),  # control characters
        ("intro\n\t---\noutro", "intro\n\t---\noutro"),  # a tab is not a symbol
        ("intro\n-- a --\noutro", "intro\n-- a --\noutro"),  # a letter keeps the line
        ("intro\n§§§\n©\noutro", "intro\n§§§\n©\noutro"),  # not DataTrove's symbols
        ("intro\n   \n\noutro", "intro\n   \n\noutro"),  # blank lines are kept
        ("-----", ""),
        ("a\r\nb\rc\x0cd\u2028e\n", "a\nb\nc\nd\ne"),  # every line break becomes "\n", the last one goes
    ],
)
def test_hostile_lines(text, expected):
    assert formatted(text) == expected


def test_replace_char_replaces_each_run_once():
    text = "intro\n---\n***\n\n===\noutro"
    assert formatted(text, replace_char="\n") == "intro\n\n\n\n\n\noutro"
    assert formatted(text, replace_char="<hr>") == "intro\n<hr>\n\n<hr>\noutro"


def test_own_symbols():
    assert formatted("intro\n§§§\n---\noutro", symbols="§") == "intro\n---\noutro"


def test_datatrove_symbols():
    # DataTrove's punctuation (129 characters) and sentence terminals (159), 7 of them in both.
    assert len(SYMBOLS) == 281
    assert {"-", "|", "►", "\x00", "\x9f", "。", "\u17d6", "\u0964"} <= SYMBOLS
    assert not {" ", "\t", "\n", "§", "©", "\u2024", "a"} & SYMBOLS


def test_symbol_lines_formatter_in_a_pipeline(ground_truth):
    body = article(ground_truth, AP_DEBATE)["articleBody"]
    stadia = article(ground_truth, "e100c9612a")["articleBody"]

    def build(pipeline):
        result = pipeline | beam.Create([Document(text=body, id="ap"), Document(text=stadia, id="stadia")])
        kept = result | Filter(SymbolLinesFormatter())
        assert_that(
            kept.kept | beam.Map(lambda d: (d.id, d.text)),
            equal_to([("ap", body.replace("\n___\n", "\n")), ("stadia", stadia)]),
        )

    assert run_and_collect(build)["symbol_lines"]["counters"] == {"in": 2, "out": 2}
