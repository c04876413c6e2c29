"""The repository's package layout as setup.py declares it: folder -> installed package."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def package_folders(repo: Path = REPO) -> dict[str, str]:
    """{installed package: source folder}, read from the `ROOTS` mapping of `repo`'s setup.py."""
    tree = ast.parse((repo / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no ROOTS mapping")
