"""The layout's limits (tests/layout_limits.py, run by `make lint`) hold for the repository, and
each fails on a planted breach."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fake_tree import ROOTS, write_tree
from layout_limits import breaches
from source_tree import REPO


def test_the_repository_keeps_the_layout_limits():
    assert breaches() == []


def test_a_tree_within_the_limits_passes(tmp_path):
    root = write_tree(
        tmp_path,
        {
            **{f"pipeline/m{n}.py": "" for n in range(6)},  # with __init__ and errors: 8
            **{f"pipeline/filters/f{n}.py": "" for n in range(17)},  # 20 with the others
        },
    )
    assert breaches(root) == []


def _new_modules(folder: str, count: int) -> dict[str, str]:
    return {f"{folder}/planted_{n}.py": "" for n in range(count)}


BREACHES = [
    (
        "pipeline/ root",
        _new_modules("pipeline", 7),
        "pipeline/: 9 .py files at its root, at most 8",
    ),
    ("a folder of 21", _new_modules("model", 20), "model/: 22 .py files, at most 20"),
    (
        "a deep folder of 21",
        _new_modules("pipeline/stages/clean", 19),
        "pipeline/stages/clean/: 21 .py files, at most 20",
    ),
    *(
        (
            f"a folder named {name}",
            {f"{where}/{name}/__init__.py": ""},
            f"{where}/{name}/: no folder is named {name}",
        )
        for name, where in [
            ("utils", "pipeline"),
            ("helpers", "pipeline/stages/clean"),
            ("common", "model"),
            ("misc", "conf"),
        ]
    ),
    (
        "a folder that find_packages skips",
        {"pipeline/engine/plans/order.py": ""},
        "pipeline/engine/plans/: holds .py files but no __init__.py",
    ),
]


@pytest.mark.parametrize(
    ("planted", "breach"), [b[1:] for b in BREACHES], ids=[b[0] for b in BREACHES]
)
def test_each_limit_fails_on_a_planted_breach(tmp_path, planted, breach):
    [found] = breaches(write_tree(tmp_path, planted))
    assert found.startswith(breach), found


@pytest.mark.parametrize(
    "roots",
    [
        {**ROOTS, "lmforge.extra": "extra"},
        {**ROOTS, "bench": "bench"},
        {k: v for k, v in ROOTS.items() if k != "lmforge.conf"},
    ],
    ids=["a new root under lmforge", "a new top-level package", "a root fewer"],
)
def test_the_installed_roots_are_exactly_the_five(tmp_path, roots):
    root = write_tree(tmp_path, roots=roots)
    for folder in roots.values():
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").touch()
    [found] = breaches(root)
    assert found.startswith("setup.py: ROOTS maps"), found


def test_make_lint_runs_the_script_which_fails_on_a_breach(tmp_path):
    lint = (REPO / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "tests/layout_limits.py" in lint
    script = [sys.executable, str(REPO / "tests" / "layout_limits.py")]
    kept = subprocess.run([*script, str(write_tree(tmp_path / "kept"))], capture_output=True)
    assert (kept.returncode, kept.stdout) == (0, b"")
    broken = write_tree(tmp_path / "broken", {"pipeline/utils/__init__.py": ""})
    done = subprocess.run([*script, str(broken)], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stdout.startswith("pipeline/utils/: no folder is named utils")
