"""Masking of personal data: e-mail and IP addresses, as DataTrove's ``PIIFormatter`` masks them."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import itertools
import re
from collections.abc import Callable, Sequence

from beamtrove.document import Document
from beamtrove.transforms.filters.base import DocumentFormatter

__all__ = ["DEFAULT_EMAIL_REPLACEMENTS", "DEFAULT_IP_REPLACEMENTS", "PIIFormatter"]

#: DataTrove's e-mail placeholders: example.com and example.org are reserved for examples.
DEFAULT_EMAIL_REPLACEMENTS = ("email@example.com", "firstname.lastname@example.org")
#: DataTrove's IP placeholders: addresses that did not answer pings when DataTrove chose them.
DEFAULT_IP_REPLACEMENTS = (
    "22.214.171.124",
    "126.96.36.199",
    "188.8.131.52",
    "184.108.40.206",
    "220.127.116.11",
    "18.104.22.168",
)

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
# A dotted quad anywhere, even inside a longer dotted number: the match itself is then checked as an address.
_IPV4 = re.compile(rf"(?:{_OCTET}\.){{3}}{_OCTET}")
_LOCAL_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
# An all-digit last label is allowed, so user@123.123.123.123 is an e-mail address (masked whole, before IPs).
_HOST = rf"(?:{_LABEL}\.)+{_LABEL}"
_ADDRESS_LITERAL = rf"\[(?:{_OCTET}\.){{3}}(?:{_OCTET}|[A-Za-z0-9-]*[A-Za-z0-9]:)\]"
_EMAIL = re.compile(rf"\b{_LOCAL_ATOM}(?:\.{_LOCAL_ATOM})*@(?:{_HOST}|{_ADDRESS_LITERAL})")
# At least three groups of hex digits: "::A" in wikitext is a valid address but not one.
_IPV6 = re.compile(r"(?<![\w])(?=(?:[0-9A-Fa-f]*:){2})(?:[0-9A-Fa-f]{1,4}::?){2,7}[0-9A-Fa-f]{1,4}(?![\w:])")


def _maskable_address(candidate: str, public_only: bool) -> bool:
    """True for a valid IP address (leading zeros make it invalid) that is global or ``public_only`` is off."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return address.is_global or not public_only


def _placeholders(replacement: str | Sequence[str], option: str) -> tuple[str, ...]:
    placeholders = (replacement,) if isinstance(replacement, str) else tuple(replacement)
    if not placeholders:
        raise ValueError(f"{option} needs at least one replacement string.")
    return placeholders


class _Masker:
    """Replaces the matches of a pattern with placeholders taken in turn, the turn starting over in each text."""

    def __init__(self, pattern: re.Pattern, placeholders: tuple[str, ...], accepts: Callable[[str], bool] | None):
        self._pattern = pattern
        self._placeholders = placeholders
        self._accepts = accepts

    def mask(self, text: str) -> str:
        turn = itertools.cycle(self._placeholders)

        def replace(match: re.Match) -> str:
            if self._accepts is not None and not self._accepts(match.group()):
                return match.group()
            return next(turn)

        return self._pattern.sub(replace, text)


class PIIFormatter(DocumentFormatter):
    """Replaces e-mail addresses and public IPv4 addresses in the text, as DataTrove does.

    E-mail addresses are masked first, whole, including those whose domain is an
    IP literal (``user@123.123.123.123``, ``user@[123.123.123.123]``); then
    every dotted quad that is a valid IPv4 address (and, with
    ``only_remove_public_ips``, a global one: private, loopback and reserved
    ranges identify no one). Each kind of address is replaced by its
    placeholders in turn, starting with the first in every document: DataTrove
    carries the turn over from one document to the next, which makes a
    document's text depend on the documents a worker formatted before it.

    Args:
        remove_emails: Mask e-mail addresses.
        remove_ips: Mask IPv4 addresses.
        only_remove_public_ips: Leave private, loopback and reserved addresses.
        email_replacement: Placeholder(s) of e-mail addresses, used in turn.
        ip_replacement: Placeholder(s) of IP addresses, used in turn.
        remove_ipv6: Also mask IPv6 addresses (with the IP placeholders), which
            DataTrove leaves; on with ``remove_ips`` only.

    Raises:
        ValueError: An empty list of placeholders.
    """

    name = "pii"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        only_remove_public_ips: bool = True,
        email_replacement: str | Sequence[str] = DEFAULT_EMAIL_REPLACEMENTS,
        ip_replacement: str | Sequence[str] = DEFAULT_IP_REPLACEMENTS,
        remove_ipv6: bool = False,
    ):
        self.remove_emails = remove_emails
        self.remove_ips = remove_ips
        self.remove_ipv6 = remove_ipv6
        self.only_remove_public_ips = only_remove_public_ips
        ip_placeholders = _placeholders(ip_replacement, "ip_replacement")
        accepts = functools.partial(_maskable_address, public_only=only_remove_public_ips)
        self._emails = _Masker(_EMAIL, _placeholders(email_replacement, "email_replacement"), None)
        self._ipv4 = _Masker(_IPV4, ip_placeholders, accepts)
        self._ipv6 = _Masker(_IPV6, ip_placeholders, accepts)

    def format(self, document: Document) -> Document:
        text = document.text
        if self.remove_emails:
            text = self._emails.mask(text)
        if self.remove_ips:
            text = self._ipv4.mask(text)
            if self.remove_ipv6:
                text = self._ipv6.mask(text)
        return document if text == document.text else dataclasses.replace(document, text=text)
