"""Dependencies as declared (tests/declared_dependencies.py, run by `make lint`): the repository's
imports and pyproject.toml agree, and a planted undeclared import or unused declaration fails."""

from __future__ import annotations

import pytest
from declared_dependencies import mismatches
from fake_tree import write_tree

PYPROJECT = """\
[project]
name = "fake"
dependencies = ["numpy>=1.26", "alt-profanity-check>=1.5", "mlflow>=3"]

[project.optional-dependencies]
dev = ["pytest>=8", "ruff>=0.6"]
"""

DISTRIBUTIONS = {
    "numpy": ["numpy"],
    "profanity_check": ["alt-profanity-check"],
    "mlflow": ["mlflow-skinny", "mlflow"],
    "pytest": ["pytest"],
    "scipy": ["scipy"],
    "yaml": ["PyYAML"],
    "tqdm": ["tqdm"],
}
"""Import name -> distributions, as `packages_distributions()` gives them."""

KEPT = {
    "pipeline/probes/toxicity.py": "def score():\n    import profanity_check\n",
    "pipeline/engine/tracking.py": "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    import mlflow.entities\n",
}


def _tree(tmp_path, planted=None, pyproject=PYPROJECT):
    root = write_tree(tmp_path, {**KEPT, **(planted or {})})
    (root / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return root


def test_the_repository_imports_what_it_declares_and_declares_what_it_imports():
    assert mismatches() == []


def test_a_tree_that_declares_what_it_imports_passes(tmp_path):
    assert mismatches(_tree(tmp_path), DISTRIBUTIONS) == []


@pytest.mark.parametrize(
    ("planted", "mismatch"),
    [
        (
            {"pipeline/estimate/calibrate.py": "def fit():\n    from scipy.optimize import nnls\n"},
            "pipeline/estimate/calibrate.py:2: imports scipy (scipy), not declared in [project]",
        ),
        (
            {"model/gpt.py": "import yaml\n"},
            "model/gpt.py:2: imports yaml (pyyaml), not declared in [project]",
        ),
        (
            {"tests/test_fake.py": "import yaml\n"},
            "tests/test_fake.py:2: imports yaml (pyyaml), not declared in the dev extra",
        ),
        (
            {"bench/estimate_cases.py": "import tqdm\n"},
            "bench/estimate_cases.py:2: imports tqdm (tqdm), not declared in the dev extra",
        ),
        (
            {"pipeline/filters/base.py": "import not_installed_anywhere\n"},
            "pipeline/filters/base.py:2: imports not_installed_anywhere (a distribution not "
            "installed here)",
        ),
    ],
    ids=["deferred", "module level", "tests", "bench", "not installed"],
)
def test_an_undeclared_import_fails(tmp_path, planted, mismatch):
    [found] = mismatches(_tree(tmp_path, planted), DISTRIBUTIONS)
    assert found.startswith(mismatch), found


def test_a_declared_dependency_that_nothing_imports_fails(tmp_path):
    runtime = PYPROJECT.replace('"mlflow>=3"', '"mlflow>=3", "tqdm>=4.66"')
    [found] = mismatches(_tree(tmp_path, pyproject=runtime), DISTRIBUTIONS)
    assert found.startswith("pyproject.toml: tqdm is a dependency that no installed module imports")

    dev = PYPROJECT.replace('"ruff>=0.6"', '"ruff>=0.6", "PyYAML>=6"')
    [found] = mismatches(_tree(tmp_path, pyproject=dev), DISTRIBUTIONS)
    assert found.startswith("pyproject.toml: pyyaml is a dev dependency that no test or bench")


def test_a_runtime_import_of_tests_or_bench_is_covered_by_the_runtime_dependencies(tmp_path):
    planted = {"tests/test_fake.py": "import numpy\n", "bench/estimate_cases.py": "import mlflow\n"}
    assert mismatches(_tree(tmp_path, planted), DISTRIBUTIONS) == []
