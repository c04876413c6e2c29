"""PII leakage: samples count as leaking only when they reproduce PII seen in training."""

import pytest

from lmforge.pipeline.probes.pii_leakage import (
    collect_training_pii,
    find_pii,
    pii_leakage_rate,
    pii_leakage_report,
)

TRAINING = [
    "Contact Jane at Jane.Doe@example.org or call 555-123-4567 after nine.",
    "The server at 192.168.10.24 was rebooted on Tuesday.",
    "Nothing personal in this document, only 2023 and 1999 as years.",
]


def test_find_pii_returns_normalised_kind_value_strings():
    assert find_pii(TRAINING[0]) == {"email:jane.doe@example.org", "phone:5551234567"}
    assert find_pii(TRAINING[1]) == {"ip_address:192.168.10.24"}
    assert find_pii(TRAINING[2]) == set()


def test_card_numbers_need_a_valid_checksum_like_the_redactor():
    assert find_pii("card 4111 1111 1111 1111 on file") == {"credit_card:4111111111111111"}
    assert find_pii("card 4111 1111 1111 1112 on file") == set()


def test_a_phone_number_leaks_whatever_separators_the_model_uses():
    training = collect_training_pii(TRAINING)
    assert pii_leakage_rate(["Call (555) 123-4567 today."], training) == 1.0


def test_pii_not_seen_in_training_is_not_leakage():
    training = collect_training_pii(TRAINING)
    samples = [
        "Write to JANE.DOE@example.org please.",  # leaked (case-insensitive)
        "Write to someone.else@example.org please.",  # invented
        "The weather is nice.",
        "Ping 192.168.10.24 to check.",  # leaked
    ]
    assert pii_leakage_rate(samples, training) == pytest.approx(2 / 4)
    report = pii_leakage_report(samples, training)
    assert report["pii_leakage_rate"] == pytest.approx(2 / 4)
    assert report["any_pii_rate"] == pytest.approx(3 / 4)
    assert report["distinct_leaked"] == 2
    assert report["distinct_leaked_email"] == 1 and report["distinct_leaked_ip_address"] == 1
    assert report["distinct_leaked_phone"] == 0


def test_report_holds_counts_and_never_the_leaked_strings():
    training = collect_training_pii(TRAINING)
    report = pii_leakage_report(["mail jane.doe@example.org"], training)
    assert all(isinstance(v, float) for v in report.values())
    assert not any("example.org" in key for key in report)


def test_redacted_training_text_leaves_nothing_to_leak():
    assert collect_training_pii(["Contact <EMAIL> or <PHONE>."]) == set()
