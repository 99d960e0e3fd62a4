"""URL filtering with the UT1 adult blocklist and banned words."""

from __future__ import annotations

import codecs
import contextlib
import itertools
import re
import tarfile
from collections.abc import Iterable, Iterator
from typing import IO

import ahocorasick
import numpy as np
import tldextract
from isal import igzip

from beamtrove.document import Document
from beamtrove.fs import filesystem, is_local, join, read_lines
from beamtrove.resources import require_on_worker
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict, load_once

__all__ = ["URLFilter"]

_NON_ALPHANUMERIC = re.compile(r"[^a-zA-Z0-9]+")
_WORD_LISTS = ("banned_words.txt", "banned_subwords.txt", "soft_banned_words.txt")
_LIST_MEMBERS = ("domains", "urls")
# Bytes of a big list decoded at a time.
_PIECE = 1 << 23
# The bytes of a list that holds one domain a line and nothing else: printable ASCII but "#", and line breaks.
_PLAIN_ENTRY_BYTES = bytes(byte for byte in range(0x21, 0x7F) if byte != ord("#")) + b"\n"
_NEWLINE = ord("\n")


def _normalized(word: str) -> str:
    return _NON_ALPHANUMERIC.sub("", word).lower()


def _entries(lines: Iterable[str]) -> Iterator[str]:
    """The stripped, non-comment lines of a list."""
    # An index, not startswith: a method call per line is a second of UT1's 4.56 M.
    return (line for line in map(str.strip, lines) if line and line[0] != "#")


def _entry_hashes(raw: IO[bytes]) -> Iterator[int]:
    """The hashes of a list's entries (as :func:`_entries` reads them), read a piece at a time.

    A piece that is nothing but plain entries, one a line (all of UT1's
    domains), is split and hashed as bytes, which hash as the equal ASCII
    strings do: half a second less than making 4.56 M strings, in every
    process that loads the lists.
    """
    rest = b""
    while piece := raw.read(_PIECE):
        # Up to the last line break, which no UTF-8 character holds: what follows it begins the next piece.
        lines, line_break, rest = (rest + piece).rpartition(b"\n")
        if line_break:
            yield from _hashes_of_lines(lines)
    if rest:
        yield from _hashes_of_lines(rest)


def _hashes_of_lines(lines: bytes) -> Iterator[int]:
    """The hashes of the entries of ``lines`` (whole lines, without the last one's line break)."""
    empty_line = not lines or lines[0] == _NEWLINE or lines[-1] == _NEWLINE or b"\n\n" in lines
    if not empty_line and not lines.translate(None, _PLAIN_ENTRY_BYTES):
        return map(hash, lines.split(b"\n"))
    return map(hash, _entries(lines.decode("utf-8", "replace").split("\n")))


def _decoded_lines(raw: IO[bytes]) -> Iterator[str]:
    """The lines of a UTF-8 list (undecodable bytes replaced), decoded a piece at a time.

    Decoding and splitting pieces in C, rather than each of UT1's 4.56 M lines
    on its own, takes a second off loading the lists in every worker; only one
    piece's lines are held as strings at a time.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    while piece := raw.read(_PIECE):
        lines = (rest + decoder.decode(piece)).split("\n")
        rest = lines.pop()
        yield from lines
    rest += decoder.decode(b"", final=True)
    if rest:
        yield rest


class _Blocklist:
    """The lists in lookup-friendly form.

    Domains are held as a sorted array of 64-bit string hashes, not as
    strings: 4.56 M UT1 domains take 35 MiB instead of about 0.9 GiB. Python's
    string hash is randomized per process, which is harmless because each
    process builds and queries its own array; a false match would need a 64-bit
    collision with one of the listed domains.
    """

    def __init__(self, directory: str, extra_domains, extra_urls, banned, subwords, soft):
        with self._read_lists(directory) as lists:
            domains = np.fromiter(itertools.chain(_entry_hashes(lists["domains"]), map(hash, extra_domains)), np.int64)
            self.urls = frozenset(itertools.chain(_entries(_decoded_lines(lists["urls"])), extra_urls))
        domains.sort()
        self.domain_hashes = domains
        self.banned_words = frozenset(map(_normalized, (*lists["banned_words.txt"], *banned))) - {""}
        self.soft_banned_words = frozenset(map(_normalized, (*lists["soft_banned_words.txt"], *soft))) - {""}
        self.subwords = ahocorasick.Automaton(ahocorasick.STORE_INTS)
        for word in set(map(_normalized, (*lists["banned_subwords.txt"], *subwords))) - {""}:
            self.subwords.add_word(word, len(word))
        self.subwords.make_automaton()
        # The bundled public-suffix snapshot: no fetch at run time. Its rules are parsed on the first URL: one now
        # parses them with the lists (in the process that preloads them, if any).
        self.extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
        self.extract("example.com")

    @staticmethod
    @contextlib.contextmanager
    def _read_lists(directory: str) -> Iterator[dict[str, IO[bytes] | Iterator[str]]]:
        """The word lists as streams of entries, the big lists as open binary files: none is held whole."""
        fs, path = filesystem(directory)
        lists = {name: _entries(read_lines(join(directory, name))) for name in _WORD_LISTS}
        with contextlib.ExitStack() as stack:
            if all(fs.exists(join(path, member)) for member in _LIST_MEMBERS):
                for member in _LIST_MEMBERS:
                    lists[member] = stack.enter_context(fs.open(join(path, member), "rb"))
            else:
                # DataTrove's asset folder keeps the two big lists in a tarball.
                (archive,) = fs.glob(join(path, "*.tar.gz"))
                # ISA-L inflates the 124 MB of the tarball three times as fast as zlib.
                gzipped = stack.enter_context(fs.open(archive, "rb"))
                tar = stack.enter_context(tarfile.open(fileobj=igzip.IGzipFile(fileobj=gzipped), mode="r:"))
                for member in _LIST_MEMBERS:
                    lists[member] = tar.extractfile(member)
            yield lists

    def has_domain(self, domain: str) -> bool:
        key = hash(domain)
        index = np.searchsorted(self.domain_hashes, key)
        return index < len(self.domain_hashes) and self.domain_hashes[index] == key


class URLFilter(DocumentFilter):
    """Drops documents whose ``url`` metadata is on a blocklist or holds banned words.

    In order, a document is dropped when its registered domain is a listed
    domain (``domain``), any longer suffix of its host up to the full host name
    is (``subdomain``), the exact URL is listed (``url``), a banned word is one
    of the URL's alphanumeric words (``hard_blacklisted``), at least
    ``soft_word_threshold`` soft-banned words are (``soft_blacklisted``), or a
    banned subword occurs anywhere in the URL stripped of non-alphanumerics
    (``blacklisted_subword``). Words compare case-insensitively. Documents
    without a URL are dropped as ``no_url``.

    The lists load once per worker process and are shared by its threads.

    Args:
        blocklist_dir: Folder (local path or fsspec URL) with the UT1 ``domains``
            and ``urls`` files (or DataTrove's tarball of them) and
            ``banned_words.txt``, ``banned_subwords.txt``,
            ``soft_banned_words.txt``. ``beamtrove assets fetch`` provides one.
        soft_word_threshold: Soft-banned words that make a URL banned.
        extra_domains: Domains to block beside the lists.
        extra_urls: URLs to block beside the lists.
        banned_words: Extra hard-banned words.
        banned_subwords: Extra banned subwords.
        soft_banned_words: Extra soft-banned words.

    Raises:
        FileNotFoundError: ``blocklist_dir`` is not a folder, or lacks one of the files.
    """

    name = "url_filter"

    def __init__(
        self,
        blocklist_dir: str,
        soft_word_threshold: int = 2,
        extra_domains: tuple[str, ...] = (),
        extra_urls: tuple[str, ...] = (),
        banned_words: tuple[str, ...] = (),
        banned_subwords: tuple[str, ...] = (),
        soft_banned_words: tuple[str, ...] = (),
    ):
        self.blocklist_dir = blocklist_dir
        self.soft_word_threshold = soft_word_threshold
        self.extras = tuple(
            tuple(values) for values in (extra_domains, extra_urls, banned_words, banned_subwords, soft_banned_words)
        )
        _check_blocklist_dir(blocklist_dir)

    def setup(self) -> None:
        self._lists = load_once((_Blocklist, self.blocklist_dir, self.extras), self._load)

    def preload(self) -> None:
        if is_local(self.blocklist_dir):
            self.setup()

    def _load(self) -> _Blocklist:
        return _Blocklist(require_on_worker(self.blocklist_dir, "The URL blocklist", "--url_blocklist"), *self.extras)

    def filter(self, document: Document) -> Verdict:
        url = document.metadata.get("url")
        if not url:
            return Drop("no_url")
        lists = self._lists
        parts = lists.extract(url)
        # An IP address host has no registered domain: the blocklist lists it as is.
        registered = parts.top_domain_under_public_suffix or parts.ipv4 or parts.ipv6
        if registered and lists.has_domain(registered):
            return Drop("domain")
        host_labels = parts.fqdn.split(".")
        registered_labels = registered.count(".") + 1 if registered else len(host_labels)
        for start in range(len(host_labels) - registered_labels):
            if lists.has_domain(".".join(host_labels[start:])):
                return Drop("subdomain")
        if url in lists.urls:
            return Drop("url")
        words = {word.lower() for word in _NON_ALPHANUMERIC.split(url)}
        if not lists.banned_words.isdisjoint(words):
            return Drop("hard_blacklisted")
        if len(lists.soft_banned_words.intersection(words)) >= self.soft_word_threshold:
            return Drop("soft_blacklisted")
        if next(lists.subwords.iter(_normalized(url)), None) is not None:
            return Drop("blacklisted_subword")
        return document


def _check_blocklist_dir(directory: str) -> None:
    fs, path = filesystem(directory)
    if not fs.isdir(path):
        problem = "is a file, not a folder" if fs.exists(path) else "does not exist"
        raise FileNotFoundError(
            f"The URL blocklist folder {directory} {problem}. Run `beamtrove assets fetch` to download the UT1 "
            "lists into the cache, or pass --url_blocklist with the folder that holds them."
        )
    missing = [name for name in _WORD_LISTS if not fs.exists(join(path, name))]
    has_lists = all(fs.exists(join(path, member)) for member in _LIST_MEMBERS) or fs.glob(join(path, "*.tar.gz"))
    if missing or not has_lists:
        absent = missing + ([] if has_lists else ["domains and urls (or DataTrove's tarball of them)"])
        raise FileNotFoundError(
            f"The URL blocklist folder {directory} lacks {', '.join(absent)}. Run `beamtrove assets fetch` to "
            "download the UT1 lists into the cache, or pass --url_blocklist with a folder that holds them."
        )
