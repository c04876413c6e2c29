"""PII redaction: e-mail addresses, card numbers, IP addresses and phone numbers become typed
placeholders (`<EMAIL>`, `<CREDIT_CARD>`, `<IP_ADDRESS>`, `<PHONE>`), counted per type.

Card numbers are redacted only when they are written as cards are (contiguous or in groups of
four), start with a major network's prefix and pass the Luhn check, so other long digit strings
(order numbers, ISBNs, rows of years) stay. IPv6 candidates need a digit and are confirmed with
`ipaddress`, so clock times (`12:30:45`) and C++ scopes (`a::b`) stay. Phone numbers need an
international `+` prefix or the grouped national form (`555-123-4567`, `(555) 123-4567`), so
runs of numbers such as years stay.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DocumentTransform

PLACEHOLDERS = {
    "email": "<EMAIL>",
    "credit_card": "<CREDIT_CARD>",
    "ip_address": "<IP_ADDRESS>",
    "phone": "<PHONE>",
}

_EMAIL_RE = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}(?![\w-])"
)
_CARD_RE = re.compile(
    r"(?<![\w-])(?:\d{13,19}"  # contiguous
    r"|\d{4}([ -])\d{4}\1\d{4}\1\d{1,7}"  # 4-4-4-x groups
    r"|\d{4}([ -])\d{6}\2\d{4,5})(?![\w-])"  # 4-6-5 (American Express)
)
# Issuer prefixes of the major networks: Visa, Mastercard, Amex, Discover, JCB, Diners.
_CARD_PREFIX_RE = re.compile(r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[0-8]|6")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4_RE = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)")
_IPV6_RE = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_PHONE_RE = re.compile(
    r"(?<![\w+])(?:"
    r"\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]\d{2,4}){1,4}"  # international
    r"|(?:\(\d{3}\)[ .-]?|\d{3}[.-])\d{3}[.-]\d{4}"  # national grouped
    r")(?!\w)"
)

# What any match of the pattern beside it holds: four digits in a card number, a dotted pair of
# digits in an IPv4 address, two colons at most four hex digits apart in an IPv6 address (one
# without a digit is never redacted), `+digit` or `ddd-dddd` in a phone number.
_HAS_AT = re.compile("@")
_HAS_CARD = re.compile(r"\d{4}")
_HAS_IPV4 = re.compile(r"\d\.\d")
_HAS_IPV6 = re.compile(r":[0-9A-Fa-f]{0,4}:")
_HAS_PHONE = re.compile(r"\+\d|\d{3}[.-]\d{4}")


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum used by payment cards."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@dataclass(kw_only=True, slots=True)
class PIIConfig:
    """Settings of `PIIRedactor`."""

    enabled: bool = True
    "Run this step."
    email: bool = True
    "Redact e-mail addresses."
    credit_card: bool = True
    "Redact Luhn-valid card numbers (13-19 digits, spaces or dashes allowed)."
    ip_address: bool = True
    "Redact IPv4 and IPv6 addresses."
    phone: bool = True
    "Redact phone numbers."


def _redact_card(match: re.Match) -> str | None:
    digits = re.sub(r"\D", "", match.group())
    if len(digits) > 19 or not _CARD_PREFIX_RE.match(digits) or not luhn_valid(digits):
        return None
    return PLACEHOLDERS["credit_card"]


def _redact_ipv6(match: re.Match) -> str | None:
    candidate = match.group()
    if not any(ch.isdigit() for ch in candidate):
        return None  # C++ scopes such as a::b are valid IPv6 syntax, real addresses have digits
    try:
        ipaddress.IPv6Address(candidate)
    except ValueError:
        return None
    return PLACEHOLDERS["ip_address"]


def _redact_phone(match: re.Match) -> str | None:
    n_digits = sum(ch.isdigit() for ch in match.group())
    return PLACEHOLDERS["phone"] if 7 <= n_digits <= 15 else None


class PIIRedactor(DocumentTransform):
    """Replaces PII with typed placeholders; `counts.events` holds redactions per type."""

    name = "pii"

    def __init__(self, config: PIIConfig | None = None, exclusion_sink=None) -> None:
        super().__init__(exclusion_sink)
        self.config = config or PIIConfig()
        cfg = self.config
        email = PLACEHOLDERS["email"]
        ipv4 = PLACEHOLDERS["ip_address"]
        # (type, switched on, what every redacted match holds (a cheap search that spares the
        # costly pattern most texts), pattern, replacement or None to leave the match)
        rules = [
            ("email", cfg.email, _HAS_AT, _EMAIL_RE, lambda m: email),
            ("credit_card", cfg.credit_card, _HAS_CARD, _CARD_RE, _redact_card),
            ("ip_address", cfg.ip_address, _HAS_IPV4, _IPV4_RE, lambda m: ipv4),
            ("ip_address", cfg.ip_address, _HAS_IPV6, _IPV6_RE, _redact_ipv6),
            ("phone", cfg.phone, _HAS_PHONE, _PHONE_RE, _redact_phone),
        ]
        self._rules = [rule[:1] + rule[2:] for rule in rules if rule[1]]

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """`text` with PII replaced, and the number of redactions per type."""
        found: dict[str, int] = {}
        for kind, needed, pattern, replacement_for in self._rules:
            if not needed.search(text):
                continue
            hits = 0

            def substitute(match: re.Match, replacement_for=replacement_for) -> str:
                nonlocal hits
                replacement = replacement_for(match)
                if replacement is None:
                    return match.group()
                hits += 1
                return replacement

            text = pattern.sub(substitute, text)
            if hits:
                found[kind] = found.get(kind, 0) + hits
        return text, found

    def transform(self, doc: Document) -> str:
        text, found = self.redact(doc.text)
        for kind, n in found.items():
            self.counts.add_event(kind, n)
        return text
