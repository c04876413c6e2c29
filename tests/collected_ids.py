"""Which test ids the suite has now: what this pytest session collected, when it collected the
whole of tests/ (`make check`, `make test`: no collection of its own to wait for), else what
`pytest --collect-only` of tests/ lists in a fresh process (about 15 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

SESSION_IDS = pytest.StashKey[frozenset[str]]()
"""The ids of every test the session collected, those `-m` or `-k` deselect included; stashed
only when the session collected all of tests/."""


def record_collected(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the ids of `items` if they are the whole suite (called before any deselection)."""
    whole = [Path(arg.split("::")[0]).resolve() for arg in config.args] == [TESTS]
    ignored = config.getoption("ignore") or config.getoption("ignore_glob")
    if whole and not ignored:
        config.stash[SESSION_IDS] = frozenset(item.nodeid for item in items)


def current_ids(config: pytest.Config) -> frozenset[str]:
    """Every test id of tests/ as pytest names them now, relative to the repository."""
    if SESSION_IDS in config.stash:
        return config.stash[SESSION_IDS]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    return frozenset(line for line in listed.stdout.splitlines() if "::" in line)
