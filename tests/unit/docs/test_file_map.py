"""docs/architecture.md's file map lists every module of the installed packages, and only those."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ARCHITECTURE = REPO / "docs" / "architecture.md"
PACKAGES = ("pipeline", "model", "tokenizer", "lmforge", "conf")
ROW = re.compile(r"^\| `([^`]+)` \|\s*\S")


def mapped_paths(text: str) -> list[str]:
    """The paths in the first column of the tables under `## File map` (up to the next `## `)."""
    section = text.split("\n## File map\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for line in section.splitlines() if (m := ROW.match(line))]


def modules() -> set[str]:
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def test_the_file_map_section_parses_as_rows_of_path_and_purpose():
    paths = mapped_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    assert paths, "docs/architecture.md has no `## File map` table rows"
    assert len(paths) == len(set(paths)), "a module is listed twice in the file map"


def test_every_module_is_in_the_file_map():
    missing = sorted(modules() - set(mapped_paths(ARCHITECTURE.read_text(encoding="utf-8"))))
    assert not missing, (
        f"modules missing from docs/architecture.md's file map: {missing}; add a row for each"
    )


def test_the_file_map_names_no_path_that_does_not_exist():
    stale = sorted(set(mapped_paths(ARCHITECTURE.read_text(encoding="utf-8"))) - modules())
    assert not stale, (
        f"docs/architecture.md's file map names modules that do not exist: {stale}; remove them"
    )


def test_a_missing_module_or_a_stale_row_is_seen():
    text = "# A\n\n## File map\n\n| module | what |\n|---|---|\n| `model/gpt.py` | the model |\n"
    text += "| `model/gone.py` | removed |\n\n## Coverage map\n\n"
    text += "| `model/other.py` | not mapped |\n"
    assert mapped_paths(text) == ["model/gpt.py", "model/gone.py"]
