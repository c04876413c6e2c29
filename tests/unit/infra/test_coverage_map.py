"""Every test of 0.1.0 still exists, or the coverage map in docs/architecture.md names the tests
that now cover what it checked: a behaviour tested then is tested now.

The ids of 0.1.0 are kept in tests/fixtures/test_ids_0.1.0.txt (`pytest --collect-only -q` of
that release). The map is the table of the `## Coverage map` section: its first column a 0.1.0
id in backquotes, its second the ids of the tests that cover it now, each in backquotes."""

from __future__ import annotations

import re

import pytest
from collected_ids import REPO, current_ids

RELEASE_IDS = REPO / "tests" / "fixtures" / "test_ids_0.1.0.txt"
ARCHITECTURE = REPO / "docs" / "architecture.md"


def release_ids() -> list[str]:
    return [line for line in RELEASE_IDS.read_text(encoding="utf-8").splitlines() if line]


def coverage_map(text: str) -> dict[str, list[str]]:
    """{0.1.0 id: [ids covering it now]} from the table of the `## Coverage map` section."""
    section = re.search(r"^## Coverage map\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, f"{ARCHITECTURE} has no `## Coverage map` section"
    mapping: dict[str, list[str]] = {}
    for row in re.findall(r"^\|(.+)\|\s*$", section.group(1), re.M):
        cells = row.split("|")
        old = re.findall(r"`([^`]+)`", cells[0])
        if not old:  # the header and its rule
            continue
        assert len(cells) == 2 and len(old) == 1, f"a row maps one id to its tests: {row}"
        assert old[0] not in mapping, f"{old[0]} is mapped twice"
        mapping[old[0]] = re.findall(r"`([^`]+)`", cells[1])
    return mapping


@pytest.fixture(scope="module")
def mapped() -> dict[str, list[str]]:
    return coverage_map(ARCHITECTURE.read_text(encoding="utf-8"))


@pytest.fixture
def now(request) -> frozenset[str]:
    return current_ids(request.config)


def test_the_release_ids_are_the_whole_0_1_0_suite():
    ids = release_ids()
    assert len(ids) == len(set(ids)) == 1184
    assert all(i.startswith("tests/") and "::" in i for i in ids)


def test_every_0_1_0_test_still_exists_or_is_mapped(mapped, now):
    lost = [i for i in release_ids() if i not in now and i not in mapped]
    assert lost == [], f"neither collected now nor in the coverage map: {lost}"


def test_the_map_points_only_to_tests_that_exist(mapped, now):
    assert all(mapped.values()), [old for old, new in mapped.items() if not new]
    missing = {old: [n for n in new if n not in now] for old, new in mapped.items()}
    assert {old: gone for old, gone in missing.items() if gone} == {}


def test_the_map_holds_only_0_1_0_tests_that_are_gone(mapped, now):
    release = set(release_ids())
    assert [old for old in mapped if old not in release] == [], "not a 0.1.0 test id"
    assert [old for old in mapped if old in now] == [], "still exists: no mapping needed"


def test_a_map_row_names_its_old_test_and_the_tests_that_cover_it():
    text = (
        "# Architecture\n\n## Coverage map\n\nEvery other id still exists.\n\n"
        "| 0.1.0 test | covered now by |\n|---|---|\n"
        "| `tests/a.py::test_x[1]` | `tests/b.py::test_y`, `tests/c.py::test_z` |\n\n"
        "## After\n\n| `tests/d.py::test_w` | `tests/e.py::test_v` |\n"
    )
    assert coverage_map(text) == {
        "tests/a.py::test_x[1]": ["tests/b.py::test_y", "tests/c.py::test_z"]
    }
