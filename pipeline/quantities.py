"""Sizes, counts and durations as people write them: `256GB`, `1TB`, `64GiB`, `1e9`, `10M`, `3h20m`.

Byte units are SI (`GB` = 10^9 bytes, as disks and corpora are sized) or binary (`GiB` = 2^30,
as memory often is); counts take `K`, `M`, `B` (billion) or exponent notation.
"""

from __future__ import annotations

import math
import re

BYTE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "PB": 10**15,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "PIB": 2**50,
}
COUNT_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = _NUMBER.match(str(text))
    if not match:
        raise ValueError(
            f"bad {what} {text!r}: write a number with an optional unit, e.g. {example}"
        )
    return float(match.group(1)), match.group(2).upper()


def parse_bytes(text: str | int | float) -> int:
    """`256GB` -> 256 * 10^9, `64GiB` -> 64 * 2^30, `1e12` -> 10^12 bytes."""
    value, unit = _split(str(text), "size", "256GB, 1TB, 64GiB")
    if unit not in BYTE_UNITS:
        raise ValueError(f"bad size {text!r}: unknown unit {unit!r} (B, KB, MB, GB, TB, GiB, ...)")
    return int(round(value * BYTE_UNITS[unit]))


def parse_count(text: str | int | float) -> int:
    """`1e9`, `1B`, `10M`, `250k` -> an integer count."""
    value, unit = _split(str(text), "count", "1e9, 10M, 2.5B")
    if unit not in COUNT_UNITS:
        raise ValueError(f"bad count {text!r}: unknown suffix {unit!r} (K, M, B, T or 1e9)")
    return int(round(value * COUNT_UNITS[unit]))


def format_bytes(n: float) -> str:
    """Bytes in the largest SI unit that keeps the number >= 1: `1.2 TB`, `830 MB`."""
    for unit in ("PB", "TB", "GB", "MB", "KB"):
        if abs(n) >= BYTE_UNITS[unit]:
            return f"{_short(n / BYTE_UNITS[unit])} {unit}"
    return f"{int(n)} B"


def format_mb(mb: float) -> str:
    """Memory given in MiB as `850 MiB` or `12.4 GiB` (binary multiples, as RSS is counted)."""
    return f"{_short(mb / 1024)} GiB" if mb >= 1024 else f"{mb:.0f} MiB"


def format_duration(seconds: float) -> str:
    """`45s`, `12m30s`, `3h20m`, `4d06h`: the two largest units of the whole seconds rounded up
    (an estimate or a time left errs long); every estimate, ETA and elapsed time reads so."""
    s = max(0, int(math.ceil(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _short(x: float) -> str:
    return f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"
