"""Sizes and counts as the estimate command reads them."""

from __future__ import annotations

import pytest

from lmforge.pipeline.quantities import (
    format_bytes,
    format_duration,
    format_mb,
    parse_bytes,
    parse_count,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256GB", 256 * 10**9),
        ("1TB", 10**12),
        ("1.5 TB", 15 * 10**11),
        ("64GiB", 64 * 2**30),
        ("512mib", 512 * 2**20),
        ("1e12", 10**12),
        ("4096", 4096),
        ("10B", 10),
    ],
)
def test_sizes_take_si_and_binary_units_and_exponents(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e9", 10**9), ("10M", 10**7), ("2.5B", 25 * 10**8), ("250k", 250_000), ("7", 7)],
)
def test_counts_take_suffixes_and_exponents(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "1XB", "one TB", "1..2GB", "-5GB"])
def test_a_bad_size_names_itself_and_the_units(text):
    with pytest.raises(ValueError, match="bad size"):
        parse_bytes(text)


def test_a_count_with_a_byte_unit_is_refused():
    with pytest.raises(ValueError, match="unknown suffix 'GB'"):
        parse_count("1GB")


def test_formats_read_as_people_write_them():
    assert format_bytes(1.2e12) == "1.2 TB"
    assert format_bytes(830e6) == "830 MB"
    assert format_bytes(512) == "512 B"
    assert format_mb(850) == "850 MiB"
    assert format_mb(12.5 * 1024) == "12.5 GiB"
    assert format_duration(44.2) == "45s"
    assert format_duration(750) == "12m30s"
    assert format_duration(3 * 3600 + 20 * 60) == "3h20m"
    assert format_duration(4 * 86400 + 6 * 3600) == "4d06h"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(7, "7s"), (80, "1m20s"), (3720, "1h02m"), (-3, "0s"), (59.2, "1m00s"), (90000, "1d01h")],
)
def test_every_duration_reads_the_same_way(seconds, text):
    """Estimates, training and scoring ETAs and transfer times alike: rounded up, two units."""
    assert format_duration(seconds) == text
