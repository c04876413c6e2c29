"""PII redaction vectors: what must become a placeholder, and what must stay."""

import random
import re

import pytest

from lmforge.pipeline.filters.pii import PIIConfig, PIIRedactor, luhn_valid


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("Write to jane.doe+news@example.co.uk today.", "Write to <EMAIL> today.", "email"),
        ("Card 4111 1111 1111 1111 on file.", "Card <CREDIT_CARD> on file.", "credit_card"),
        ("Card 4111-1111-1111-1111.", "Card <CREDIT_CARD>.", "credit_card"),
        ("Amex 378282246310005 works.", "Amex <CREDIT_CARD> works.", "credit_card"),
        ("Call +1 555-123-4567 now.", "Call <PHONE> now.", "phone"),
        ("Call (555) 123-4567 now.", "Call <PHONE> now.", "phone"),
        ("Call +44 20 7946 0958 now.", "Call <PHONE> now.", "phone"),
        ("Call 555.123.4567 now.", "Call <PHONE> now.", "phone"),
        ("Server 192.168.1.10 is down.", "Server <IP_ADDRESS> is down.", "ip_address"),
        ("Host 2001:db8::8a2e:370:7334 is up.", "Host <IP_ADDRESS> is up.", "ip_address"),
        ("Full fe80:0:0:0:202:b3ff:fe1e:8329 too.", "Full <IP_ADDRESS> too.", "ip_address"),
    ],
)
def test_pii_becomes_a_typed_placeholder_and_is_counted(text, expected, kind):
    redacted, found = PIIRedactor().redact(text)
    assert redacted == expected
    assert found == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "Order 4111 1111 1111 1112 failed the checksum.",  # 16 digits, fails Luhn
        "Reference 1234567890123456 is not a card.",  # fails Luhn
        "Tracking number 1234567812345670 passes Luhn but no network starts with 1.",
        "The years 1999 2000 2001 2002 were busy.",
        "Meet at 12:30:45 on 2024-05-17.",
        "Version 1.2.3 and 999.1.1.1 are not addresses.",
        "Use std::vector and a::b in C++.",
        "Pi is 3.14159 and the answer is 42.",
        "ISBN 978-3-16-148410-0 is a book.",
    ],
)
def test_lookalikes_stay(text):
    assert PIIRedactor().redact(text) == (text, {})


def test_luhn_check():
    assert luhn_valid("4111111111111111")
    assert luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112")


def test_redactions_are_counted_per_type_on_the_step(doc_of):
    step = PIIRedactor()
    doc = doc_of("a@b.org, c@d.net, 10.0.0.1 and 4111111111111111")
    step.process(doc)
    assert doc.text == "<EMAIL>, <EMAIL>, <IP_ADDRESS> and <CREDIT_CARD>"
    assert step.counts.events == {
        "email": 2,
        "ip_address": 1,
        "credit_card": 1,
        "documents_changed": 1,
    }


def test_each_type_can_be_switched_off():
    text = "Mail a@b.org from 10.0.0.1"
    redacted, _ = PIIRedactor(PIIConfig(email=False)).redact(text)
    assert redacted == "Mail a@b.org from <IP_ADDRESS>"


def test_the_cheap_searches_before_each_pattern_change_nothing():
    rng = random.Random(0)
    pieces = ["call ", "+44 20 7946 0958", "555-123-4567", "(555) 123-4567", "4111 1111 1111 1111",
              "10.0.0.1", "1.2.3", "fe80::1", "a::b", "12:30:45", "x@y.org", " ", ".", ":", "-",
              "2019", "+", "(", ")", "5", "12", "123", "ab"]  # fmt: skip
    redactor = PIIRedactor()
    unfiltered = PIIRedactor()
    anything = re.compile("")
    unfiltered._rules = [(kind, anything, *rest) for kind, _, *rest in unfiltered._rules]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        assert redactor.redact(text) == unfiltered.redact(text), repr(text)
