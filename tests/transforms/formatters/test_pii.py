"""PIIFormatter on real e-mail addresses (gold articles) and IP addresses (Wikipedia revision records)."""

from __future__ import annotations

import bz2
import json

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.filters import Filter
from beamtrove.transforms.formatters import PIIFormatter
from tests.conftest import require, run_and_collect


@pytest.fixture(scope="module")
def articles(data_dir) -> dict[str, str]:
    gold = json.loads(require(data_dir / "article-extraction-benchmark" / "ground-truth.json").read_text("utf-8"))
    return {key[:10]: entry["articleBody"] for key, entry in gold.items()}


@pytest.fixture(scope="module")
def wiki_lines(data_dir) -> list[str]:
    """The lines of the Wikipedia XML excerpt: page text plus revision records (<ip>, <comment>)."""
    path = require(
        data_dir / "text-corpora" / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    )
    return bz2.decompress(path.read_bytes()).decode("utf-8").split("\n")


def line_with(lines: list[str], needle: str) -> str:
    (line,) = {line for line in lines if needle in line}
    return line


def masked(text: str, **options) -> str:
    return PIIFormatter(**options).format(Document(text=text, id="doc")).text


def test_emails_are_masked(articles):
    givewell = line_with(articles["ac3c035520"].split("\n"), "info@givewell.org")
    assert masked(givewell) == givewell.replace("info@givewell.org", "email@example.com")
    wired = line_with(articles["d48aeb9cf2"].split("\n"), "@wired.com")
    # The sentence's final period is not part of the address; the phone number is not personal data here.
    assert "Email the writer at email@example.com. Signal: 347-966-3806." in masked(wired)
    # Korean bylines: "정덕현 칼럼니스트 thekian1@entermedia.co.kr", "칼럼니스트 박생강 pillgoo9@gmail.com".
    assert masked("정덕현 칼럼니스트 thekian1@entermedia.co.kr") == "정덕현 칼럼니스트 email@example.com"
    assert "칼럼니스트 박생강 pillgoo9@gmail.com" in articles["9da36ae471"]
    assert masked(articles["9da36ae471"]).count("email@example.com") == 1
    assert masked(givewell, email_replacement="<EMAIL>").count("<EMAIL>") == 1
    assert masked(givewell, remove_emails=False) == givewell


def test_twitter_handles_are_not_emails(articles):
    line = "— Robert Maguire (@RobertMaguire_) November 18, 2019"
    assert line in articles["156770d676"].split("\n")
    assert masked(line) == line


def test_public_ip_addresses_are_masked(wiki_lines):
    # Anonymous editors are recorded by address.
    assert masked(line_with(wiki_lines, "<ip>85.193.216.88</ip>")).strip() == "<ip>0.0.0.0</ip>"
    assert masked(line_with(wiki_lines, "<ip>2601:0:502:440:1119:806:F740:B3C9</ip>")).strip() == "<ip>0.0.0.0</ip>"
    revert = line_with(wiki_lines, "[[Special:Contributions/75.111.240.218|75.111.240.218]] identified as")
    assert "[[Special:Contributions/0.0.0.0|0.0.0.0]] identified as" in masked(revert)
    assert "75.111" not in masked(revert)
    assert masked(revert, ip_replacement="<IP>").count("<IP>") == 2
    assert masked(revert, remove_ips=False) == revert


def test_non_addresses_are_left_alone(wiki_lines):
    # Aardvark's dental formula "lower=0.0.2.3" is a valid address but in 0.0.0.0/8, not a public one.
    aardvark = line_with(wiki_lines, "{{DentalFormula|upper=0.0.2-3.3|lower=0.0.2.3}}")
    assert masked(aardvark) == aardvark
    # A CiteSeer DOI: 10.1.1.96.678 has five numbers; no four of them stand alone.
    citeseer = line_with(wiki_lines, "summary?doi=10.1.1.96.678}}")
    assert masked(citeseer) == citeseer
    # Clock times look like IPv6 groups but are no address.
    clock = line_with(wiki_lines, "Starting from Julian Date 2443144.5 (1 January 1977 00:00:00)")
    assert masked(clock) == clock


def test_wikitext_indentation_is_not_an_address(wiki_lines):
    line = line_with(wiki_lines, "::A tendency towards reciprocity implies")
    assert masked(line) == line


def test_ipv6_after_a_namespace_colon_is_masked(wiki_lines):
    ipv6 = "2601:3C6:4200:9D61:9045:1AA6:2043:F9D8"
    revert = line_with(wiki_lines, f"[[User talk:{ipv6}|talk]]")
    assert ipv6 not in masked(revert)


def test_ipv4_at_the_end_of_a_sentence_is_masked(wiki_lines):
    # The dump's anonymous editor 85.193.216.88 named at the end of a sentence, as edit summaries do.
    assert "<ip>85.193.216.88</ip>" in line_with(wiki_lines, "<ip>85.193.216.88</ip>")
    assert masked("Reverted edits by 85.193.216.88.") == "Reverted edits by 0.0.0.0."


def test_pii_formatter_in_a_pipeline(articles, wiki_lines):
    givewell = articles["ac3c035520"]
    revert = line_with(wiki_lines, "[[Special:Contributions/75.111.240.218|75.111.240.218]] identified as")
    docs = [
        Document(text=givewell, id="givewell"),
        Document(text=revert, id="revert"),
        Document(text=articles["e100c9612a"], id="stadia"),  # nothing to mask
    ]

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(PIIFormatter())
        assert_that(
            result.kept | beam.Map(lambda d: (d.id, d.text)),
            equal_to(
                [
                    ("givewell", givewell.replace("info@givewell.org", "email@example.com")),
                    ("revert", revert.replace("75.111.240.218", "0.0.0.0")),
                    ("stadia", articles["e100c9612a"]),
                ]
            ),
        )
        assert_that(
            (result.excluded, result.dead_letters) | beam.Flatten() | beam.combiners.Count.Globally(),
            equal_to([0]),
            label="NothingDropped",
        )

    counters = run_and_collect(build)["pii_formatter"]["counters"]
    assert counters == {"in": 3, "out": 3}
