"""PIIFormatter: unit cases, real e-mail addresses (gold articles) and IP addresses (Wikipedia)."""

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

FIRST_IP, SECOND_IP = "22.214.171.124", "126.96.36.199"


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


def labelled(text: str) -> str:
    """``text`` masked with the placeholders EMAIL and IP."""
    return masked(text, email_replacement="EMAIL", ip_replacement="IP")


# --- Unit cases, input -> output (DataTrove 0.10.1's PIIFormatter gives the same for every one) ------------------

# Not an address, or not a valid one: octets over 255, leading zeros, three parts, a letter for a digit.
INVALID_IPS = ["300.20.10.5.", "8.8.8.08", "1.2.3", "10.0.0.x", "00.000.0.00", "81.2O9.14.3", "777.654.321.123"]
# Private, loopback, link-local, shared (carrier-grade NAT) and unspecified addresses identify no one.
PRIVATE_IPS = ["192.168.0.10", "192.168.200.1", "10.20.30.40", "10.0.0.254", "172.20.1.1", "172.31.0.2"]
PRIVATE_IPS += ["127.0.0.1", "127.1.2.3", "169.254.3.4", "100.64.1.1", "0.0.0.0"]
PUBLIC_IPS = ["8.8.8.8", "1.1.1.1", "151.101.1.69", "93.184.216.34", "140.82.112.3", "185.199.108.153"]
PUBLIC_IPS += ["31.13.64.35", "104.16.132.229"]

VALID_EMAILS = [
    "jane.doe@example.org",
    "j.doe+news@mail.example.co.uk",
    "user_01@sub.example.net",
    "info@8.8.8.8",
    "info@[8.8.8.8]",
    "o'brien@example.ie",
    "x@example-shop.de",
    "42@example.com",
    "a@b.travel",
    "tom@example.invalid",
    # Not a valid address, but the pattern takes it whole.
    "desk@300.20.10.5000",
]
EMAILS_INSIDE = [
    ("Contact: Jane <jane@example.org>.", "Contact: Jane <EMAIL>."),
    ("mailto:sales@example.com?subject=Hi", "mailto:EMAIL?subject=Hi"),
    ("a..b@example.com", "a..EMAIL"),
    ("first@second@example.com", "first@EMAIL"),
    ("(mail) ops@example.net, thanks", "(mail) EMAIL, thanks"),
    (".dot@example.com", ".EMAIL"),
    ("see desk@example.com (9-5)", "see EMAIL (9-5)"),
]
NOT_EMAILS = [
    "user@localhost",
    "@handle",
    "name.example.com",
    "user@.example.com",
    "名前@example.com",
    "user@-bad.com",
    "user.@example.com",
    "user@example..com",
    '"quoted"@example.com',
    'quoted"name"@example.com',
    "#@%^%#$@#$@#.com",
]


@pytest.mark.parametrize("text", INVALID_IPS + PRIVATE_IPS)
def test_invalid_and_private_ips_are_kept(text):
    assert labelled(text) == text


@pytest.mark.parametrize("text", PUBLIC_IPS)
def test_public_ips_are_masked(text):
    assert labelled(text) == "IP"


def test_an_ip_after_a_dot_is_masked():
    assert labelled(".3.3.3.0") == ".IP"


@pytest.mark.parametrize("text", VALID_EMAILS)
def test_valid_emails_are_masked_whole(text):
    assert labelled(text) == "EMAIL"


@pytest.mark.parametrize(("text", "expected"), EMAILS_INSIDE)
def test_the_address_part_of_odd_strings_is_masked(text, expected):
    assert labelled(text) == expected


@pytest.mark.parametrize("text", NOT_EMAILS)
def test_non_emails_are_kept(text):
    assert labelled(text) == text


# --- Placeholders -------------------------------------------------------------------------------------------


def test_ip_literal_emails_are_masked_as_emails_before_ips():
    # Masking IPs first would leave the mailbox name: "email@22.214.171.124".
    text = "write to email@123.123.123.123 or email@[123.123.123.123], not from 8.8.8.8"
    assert masked(text) == f"write to email@example.com or firstname.lastname@example.org, not from {FIRST_IP}"
    assert (
        masked(text, remove_emails=False) == f"write to email@{FIRST_IP} or email@[{SECOND_IP}], not from 188.8.131.52"
    )


def test_placeholders_are_used_in_turn_starting_over_in_each_document():
    formatter = PIIFormatter()
    first = formatter.format(Document(text="a@b.com 8.8.8.8 c@d.com", id="1")).text
    second = formatter.format(Document(text="e@f.com 1.1.1.1 9.9.9.9 4.4.4.4 5.5.5.5 6.6.6.6 7.7.7.7", id="2")).text
    assert first == f"email@example.com {FIRST_IP} firstname.lastname@example.org"
    assert second == (
        f"email@example.com {FIRST_IP} {SECOND_IP} 188.8.131.52 184.108.40.206 220.127.116.11 18.104.22.168"
    )
    # The same document gives the same text whatever came before it.
    assert formatter.format(Document(text="a@b.com 8.8.8.8 c@d.com", id="1")).text == first
    # A kept (private) address does not take a turn.
    assert masked("10.0.0.1 8.8.8.8") == f"10.0.0.1 {FIRST_IP}"
    assert masked("a@b.com c@d.com", email_replacement=["<EMAIL>"]) == "<EMAIL> <EMAIL>"


def test_only_remove_public_ips_off_masks_every_valid_address():
    assert masked("10.0.0.1 and 127.0.0.2 and 108.0.0.01", only_remove_public_ips=False) == (
        f"{FIRST_IP} and {SECOND_IP} and 108.0.0.01"
    )


def test_empty_placeholder_lists_are_refused():
    with pytest.raises(ValueError, match="ip_replacement"):
        PIIFormatter(ip_replacement=())
    with pytest.raises(ValueError, match="email_replacement"):
        PIIFormatter(email_replacement=[])


# --- Real text ----------------------------------------------------------------------------------------------


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
    assert masked(line_with(wiki_lines, "<ip>85.193.216.88</ip>")).strip() == f"<ip>{FIRST_IP}</ip>"
    revert = line_with(wiki_lines, "[[Special:Contributions/75.111.240.218|75.111.240.218]] identified as")
    assert f"[[Special:Contributions/{FIRST_IP}|{SECOND_IP}]] identified as" in masked(revert)
    assert "75.111" not in masked(revert)
    assert masked(revert, ip_replacement="<IP>").count("<IP>") == 2
    assert masked(revert, remove_ips=False) == revert
    assert masked("Reverted edits by 85.193.216.88.") == f"Reverted edits by {FIRST_IP}."


def test_ipv6_addresses_are_masked_only_when_asked(wiki_lines):
    record = line_with(wiki_lines, "<ip>2601:0:502:440:1119:806:F740:B3C9</ip>")
    assert masked(record) == record  # as DataTrove: IPv4 only
    assert masked(record, remove_ipv6=True).strip() == f"<ip>{FIRST_IP}</ip>"
    assert masked(record, remove_ipv6=True, remove_ips=False) == record
    ipv6 = "2601:3C6:4200:9D61:9045:1AA6:2043:F9D8"
    assert ipv6 not in masked(line_with(wiki_lines, f"[[User talk:{ipv6}|talk]]"), remove_ipv6=True)
    # "::A" wikitext indentation and clock times are no IPv6 addresses.
    for needle in ("::A tendency towards reciprocity implies", "(1 January 1977 00:00:00)"):
        line = line_with(wiki_lines, needle)
        assert masked(line, remove_ipv6=True) == line


def test_non_public_dotted_numbers_are_left_alone(wiki_lines):
    # Aardvark's dental formula "lower=0.0.2.3" is a valid address but in 0.0.0.0/8, not a public one.
    aardvark = line_with(wiki_lines, "{{DentalFormula|upper=0.0.2-3.3|lower=0.0.2.3}}")
    assert masked(aardvark) == aardvark
    # A CiteSeer DOI: the quad 10.1.1.96 inside 10.1.1.96.678 is a private address.
    citeseer = line_with(wiki_lines, "summary?doi=10.1.1.96.678}}")
    assert masked(citeseer) == citeseer


def test_a_public_quad_inside_a_longer_number_is_masked(wiki_lines):
    # DataTrove's pattern has no boundaries, so part of this DOI is masked as an address: "98.100.3.71".
    doi = line_with(wiki_lines, "| doi = 10.1525/aa.1998.100.3.716")
    assert masked(doi) == doi.replace("10.1525/aa.1998.100.3.716", f"10.1525/aa.19{FIRST_IP}6")


def test_pii_formatter_in_a_pipeline(articles, wiki_lines):
    givewell = articles["ac3c035520"]
    record = line_with(wiki_lines, "<ip>85.193.216.88</ip>")
    docs = [
        Document(text=givewell, id="givewell"),
        Document(text=record, id="record"),
        Document(text=articles["e100c9612a"], id="stadia"),  # nothing to mask
    ]

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(PIIFormatter(email_replacement="EMAIL", ip_replacement="IP"))
        assert_that(
            result.kept | beam.Map(lambda d: (d.id, d.text)),
            equal_to(
                [
                    ("givewell", givewell.replace("info@givewell.org", "EMAIL")),
                    ("record", record.replace("85.193.216.88", "IP")),
                    ("stadia", articles["e100c9612a"]),
                ]
            ),
        )
        assert_that(
            (result.excluded, result.dead_letters) | beam.Flatten() | beam.combiners.Count.Globally(),
            equal_to([0]),
            label="NothingDropped",
        )

    counters = run_and_collect(build)["pii"]["counters"]
    assert counters == {"in": 3, "out": 3}
