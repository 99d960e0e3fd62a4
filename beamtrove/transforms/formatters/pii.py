"""Masking of personal data: e-mail and IP addresses."""

from __future__ import annotations

import dataclasses
import ipaddress
import re

from beamtrove.document import Document
from beamtrove.transforms.filters.base import DocumentFormatter

__all__ = ["PIIFormatter"]

_EMAIL = re.compile(
    r"\b[\w!#$%&'*+/=?^`{|}~-]+(?:\.[\w!#$%&'*+/=?^`{|}~-]+)*"  # local part
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}\b"  # domain
)
# Not inside a longer dotted number (a version string), but possibly before a full stop.
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
# At least three groups of hex digits: "::A" in wikitext is a valid address but not one.
_IPV6 = re.compile(r"(?<![\w])(?=(?:[0-9A-Fa-f]*:){2})(?:[0-9A-Fa-f]{1,4}::?){2,7}[0-9A-Fa-f]{1,4}(?![\w:])")


def _public_address(candidate: str) -> bool:
    """True for a valid IP address that could identify someone (not private, loopback, reserved...)."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return address.is_global


class PIIFormatter(DocumentFormatter):
    """Replaces e-mail addresses and public IP addresses in the text.

    Private, loopback and reserved IP ranges are left alone: they identify no
    one and often appear in technical text. Replacements default to
    placeholders in the style of the FineWeb release.

    Args:
        remove_emails: Mask e-mail addresses.
        remove_ips: Mask public IPv4 and IPv6 addresses.
        email_replacement: What replaces an e-mail address.
        ip_replacement: What replaces an IP address.
    """

    name = "pii_formatter"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        email_replacement: str = "email@example.com",
        ip_replacement: str = "0.0.0.0",
    ):
        self.remove_emails = remove_emails
        self.remove_ips = remove_ips
        self.email_replacement = email_replacement
        self.ip_replacement = ip_replacement

    def _mask_ip(self, match: re.Match) -> str:
        return self.ip_replacement if _public_address(match.group()) else match.group()

    def format(self, document: Document) -> Document:
        text = document.text
        if self.remove_emails:
            text = _EMAIL.sub(self.email_replacement, text)
        if self.remove_ips:
            text = _IPV6.sub(self._mask_ip, _IPV4.sub(self._mask_ip, text))
        return document if text == document.text else dataclasses.replace(document, text=text)
