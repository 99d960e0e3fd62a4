"""URLFilter with the real UT1 blocklist and DataTrove's banned word lists."""

from __future__ import annotations

import io
import itertools
import tarfile

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.filters import Drop, Filter, URLFilter
from beamtrove.transforms.filters import url as url_module
from tests.conftest import require, run_and_collect
from tests.transforms.filters.conftest import outcomes

# Real UT1 entries (checked against the tarball below).
LISTED_DOMAIN = "0-1avsex.com"  # the first line of `domains`
LISTED_SUBDOMAIN = "010206upi.blogspot.al"  # a blog on a public suffix's registered domain, blogspot.al
LISTED_IP = "1.0.218.19"  # the first IP address in `domains`
LISTED_URL = "0b1-bofa.org/bofa/"  # a line of `urls`: UT1 lists URLs without their scheme
# Real URLs from UT1's `urls`, on domains that are not listed themselves.
HARD = "https://0nlythrowharrybeaux.tumblr.com/post/717858886608093184/7-smut"
SOFT = "https://abc.net.au/triplej/programs/the-hook-up/can-you-suck-your-own-dick-and-will-anything-go-wrong/13922540"
SUBWORD = "https://abc7news.com/4-navy-sailors-accused-of-group-sex-with-underage-girl/4396206"


@pytest.fixture(scope="module")
def blocklist_dir(data_dir) -> str:
    return str(require(data_dir / "blocklists" / "ut1"))


@pytest.fixture(scope="module")
def ut1_lists(blocklist_dir) -> dict[str, set[str]]:
    """The first 3,000 lines of UT1's `domains` and all of `urls`, read from DataTrove's tarball."""
    with tarfile.open(f"{blocklist_dir}/url_filterblacklistsv0_3_0.tar.gz") as tar:
        urls = {line.decode().strip() for line in tar.extractfile("urls")}
        domains = {line.decode().strip() for line in itertools.islice(tar.extractfile("domains"), 3000)}
    return {"domains": domains, "urls": urls}


@pytest.fixture(scope="module")
def rule(blocklist_dir) -> URLFilter:
    # Loads 4.56 M domains (about 5 s); later instances with the same lists share them (load_once).
    rule = URLFilter(blocklist_dir)
    rule.setup()
    return rule


def word_list(blocklist_dir, name: str) -> list[str]:
    return [line.strip() for line in open(f"{blocklist_dir}/{name}", encoding="utf-8") if line.strip()]


def reason(rule, url: str | None) -> str:
    verdict = rule.filter(Document(text="", id="doc", metadata={} if url is None else {"url": url}))
    return verdict.reason if isinstance(verdict, Drop) else "kept"


def test_examples_are_real_list_entries(ut1_lists, blocklist_dir):
    assert {LISTED_DOMAIN, LISTED_SUBDOMAIN, LISTED_IP} <= ut1_lists["domains"]
    assert "blogspot.al" not in ut1_lists["domains"]
    assert {LISTED_URL, HARD.removeprefix("https://"), SOFT.removeprefix("https://")} <= ut1_lists["urls"]
    assert SUBWORD.removeprefix("https://") in ut1_lists["urls"]
    assert "smut" in word_list(blocklist_dir, "banned_words.txt")
    assert {"suck", "dick"} <= set(word_list(blocklist_dir, "soft_banned_words.txt"))
    assert "group sex" in word_list(blocklist_dir, "banned_subwords.txt")


def test_registered_domain_and_subdomains(rule):
    # The registered domain itself is listed, whatever the host under it.
    assert reason(rule, f"https://{LISTED_DOMAIN}/") == "domain"
    assert reason(rule, f"http://www.{LISTED_DOMAIN}/videos?page=2") == "domain"
    # blogspot.al is the registered domain (the bundled suffix list leaves out private suffixes) and is not
    # listed; the blog host is.
    assert reason(rule, f"https://{LISTED_SUBDOMAIN}/") == "subdomain"
    # Any suffix of the host longer than the registered domain counts, so www. in front does not hide it.
    assert reason(rule, f"https://www.{LISTED_SUBDOMAIN}/2019/") == "subdomain"
    assert reason(rule, "https://blogspot.al/") == "kept"


def test_listed_url_and_words(rule):
    # UT1's `urls` hold no scheme: the document URL must be written the same way to match.
    assert reason(rule, LISTED_URL) == "url"
    # "smut" is a hard-banned word of the URL.
    assert reason(rule, HARD) == "hard_blacklisted"
    # "suck" and "dick" are soft-banned: two reach the default threshold of two.
    assert reason(rule, SOFT) == "soft_blacklisted"
    # "group sex" occurs in the URL stripped of non-alphanumerics ("...accusedofgroupsexwith...").
    assert reason(rule, SUBWORD) == "blacklisted_subword"
    assert reason(rule, None) == "no_url"
    assert reason(rule, "") == "no_url"


def test_soft_word_threshold(blocklist_dir, rule):
    stricter = URLFilter(blocklist_dir, soft_word_threshold=3)
    stricter.setup()
    assert stricter._lists is rule._lists  # loaded once per process
    assert reason(stricter, SOFT) == "kept"


def test_real_article_urls_are_kept(rule, ground_truth):
    # The article-extraction benchmark's 181 news and blog URLs (wsj.com, reuters.com, wired.com, ...).
    urls = [entry["url"] for entry in ground_truth.values()]
    assert len(urls) == 181
    assert [url for url in urls if reason(rule, url) != "kept"] == []


def test_missing_lists_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"banned_words\.txt"):
        URLFilter(str(tmp_path))


def test_listed_ip_host_is_dropped(rule):
    assert reason(rule, f"http://{LISTED_IP}/") in {"domain", "subdomain"}


def test_url_filter_in_a_pipeline(blocklist_dir, rule, ground_truth):
    gold = list(ground_truth.values())[:3]
    docs = [
        Document(text=entry["articleBody"], id=f"gold{i}", metadata={"url": entry["url"]})
        for i, entry in enumerate(gold)
    ]
    for name, url in (("domain", f"https://www.{LISTED_DOMAIN}/"), ("subdomain", f"https://{LISTED_SUBDOMAIN}/"),
                      ("hard", HARD), ("soft", SOFT), ("subword", SUBWORD)):  # fmt: skip
        docs.append(Document(text=gold[0]["articleBody"], id=name, metadata={"url": url}))
    docs.append(Document(text=gold[1]["articleBody"], id="no_url"))

    def build(pipeline):
        result = pipeline | beam.Create(docs) | Filter(URLFilter(blocklist_dir))
        assert_that(
            outcomes(result),
            equal_to(
                [
                    ("kept", "gold0"),
                    ("kept", "gold1"),
                    ("kept", "gold2"),
                    ("excluded", "domain", "domain"),
                    ("excluded", "subdomain", "subdomain"),
                    ("excluded", "hard", "hard_blacklisted"),
                    ("excluded", "soft", "soft_blacklisted"),
                    ("excluded", "subword", "blacklisted_subword"),
                    ("excluded", "no_url", "no_url"),
                ]
            ),
        )

    counters = run_and_collect(build)["url_filter"]["counters"]
    assert counters == {
        "in": 9,
        "out": 3,
        "dropped.domain": 1,
        "dropped.subdomain": 1,
        "dropped.hard_blacklisted": 1,
        "dropped.soft_blacklisted": 1,
        "dropped.blacklisted_subword": 1,
        "dropped.no_url": 1,
    }


def test_the_big_lists_load_as_a_line_by_line_reading_reads_them(blocklist_dir, rule):
    # Every line of UT1's tarball decoded on its own, stripped, comments and blanks left out: what the lists hold.
    entries = {}
    with tarfile.open(f"{blocklist_dir}/url_filterblacklistsv0_3_0.tar.gz") as tar:
        for member in ("domains", "urls"):
            lines = (line.decode("utf-8", "replace").strip() for line in tar.extractfile(member))
            entries[member] = [line for line in lines if line and not line.startswith("#")]
    assert rule._lists.urls == set(entries["urls"])
    domains = np.sort(np.fromiter(map(hash, entries["domains"]), np.int64))
    assert len(domains) > 4_500_000 and np.array_equal(rule._lists.domain_hashes, domains)


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1 << 23])
def test_lines_decode_whole_across_pieces(monkeypatch, piece):
    monkeypatch.setattr(url_module, "_PIECE", piece)
    raw = "é.com\r\n# note\n\nиван.рф\n\ufffd\xff".encode() + b"\xffbad\nlast-without-newline"
    assert list(url_module._decoded_lines(io.BytesIO(raw))) == raw.decode("utf-8", "replace").split("\n")


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1 << 23])
def test_a_list_of_plain_lines_hashes_as_its_entries_read_as_text_do(monkeypatch, piece):
    # Plain ASCII lines are hashed as bytes, anything else is read as text: both must give the entries' hashes.
    monkeypatch.setattr(url_module, "_PIECE", piece)
    plain = b"0-1avsex.com\n010206upi.blogspot.al\n1.0.218.19"
    hostile = [
        plain,
        plain + b"\n",
        b"\n" + plain,
        b"a.com\n\nb.com",
        b"a.com\n# a comment\nb.com",
        b"  a.com \r\n\tb.org\x0c\nc.net\x1f",
        "é.fr\n\xa0y.com\xa0\nиван.рф".encode() + b"\n\xff\xfe.bad\n",
        b"",
        b"\n\n",
    ]
    for raw in hostile:
        as_text = [hash(entry) for entry in url_module._entries(url_module._decoded_lines(io.BytesIO(raw)))]
        assert list(url_module._entry_hashes(io.BytesIO(raw))) == as_text, raw
