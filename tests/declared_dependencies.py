"""Dependencies as declared: what is imported is declared in pyproject.toml, what is declared is
used.

    python tests/declared_dependencies.py     # `make lint` runs it; exit 1 on any mismatch

- every third-party import of an installed module (`import_graph`) is a distribution of
  `[project] dependencies`;
- every runtime dependency is imported by the installed code, or is in `RUNTIME_UNIMPORTED`
  with the reason;
- every third-party import of tests/ and bench/ is a runtime or a `dev` dependency (or in
  `BENCH_ELSEWHERE`), and every `dev` dependency is imported there or in `DEV_UNIMPORTED`.

An import name maps to its distributions with `importlib.metadata.packages_distributions()`
(`profanity_check` -> alt-profanity-check), so it reads the installed environment.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib
from import_graph import all_imports
from source_tree import REPO

RUNTIME_UNIMPORTED: dict[str, str] = {}
"""Runtime dependencies no installed module imports, each with why it is declared (e.g. a plugin
loaded by name). None today: the extras of ray[default,train] are ray's own."""

DEV_UNIMPORTED = {
    "ruff": "the linter, run as a command by `make lint`",
    "pytest-timeout": "a pytest plugin (the `timeout` option of pyproject's pytest settings)",
    "pytest-cov": "a pytest plugin (`pytest --cov`: line coverage of the package's folders)",
    "lm-eval": "lm-evaluation-harness, run as `python -m lm_eval` by test_lm_eval_interop",
    "psycopg": "the PostgreSQL driver MLflow's server loads (test_mlflow_postgres)",
    "flask-wtf": "MLflow's auth app loads it (test_mlflow_postgres)",
    "mkdocs": "the docs site's builder, run as a command by `make docs` and `make lint`",
    "mkdocs-material": "the docs site's theme, which mkdocs loads by name",
}
"""`dev` dependencies that no test or bench imports, each with why it is declared."""

BENCH_ELSEWHERE = {
    "datatrove": "the comparison baseline of the clean benches, run in a virtualenv of its own "
    "(bench/clean_throughput.py's docstring), never in lmforge's",
}
"""Imports of bench/ that are deliberately not lmforge's dependencies."""


@dataclass(frozen=True, slots=True)
class Use:
    """One third-party import: its top-level name and where it is."""

    name: str
    path: Path
    line: int


def mismatches(repo: Path = REPO, distributions: dict | None = None) -> list[str]:
    """One line per import that is not declared and per declaration that is not used."""
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_normalized(r) for r in project.get("dependencies", [])}
    dev = {_normalized(r) for r in project.get("optional-dependencies", {}).get("dev", [])}
    of = distributions if distributions is not None else packages_distributions()
    found = []

    installed = installed_uses(repo)
    found += _undeclared(installed, runtime, of, repo, "[project] dependencies")
    used = _distributions_used(installed, of)
    for name in sorted(runtime - used - set(RUNTIME_UNIMPORTED)):
        found.append(
            f"pyproject.toml: {name} is a dependency that no installed module imports: remove "
            "it, or list it in RUNTIME_UNIMPORTED (tests/declared_dependencies.py) with the reason"
        )

    suite = suite_uses(repo)
    suite = [u for u in suite if u.name not in BENCH_ELSEWHERE]
    found += _undeclared(suite, runtime | dev, of, repo, "the dev extra (or the dependencies)")
    used_by_suite = _distributions_used(suite, of)
    for name in sorted(dev - used_by_suite - {_normalized(n) for n in DEV_UNIMPORTED}):
        found.append(
            f"pyproject.toml: {name} is a dev dependency that no test or bench imports: remove "
            "it, or list it in DEV_UNIMPORTED (tests/declared_dependencies.py) with the reason"
        )
    return found


def installed_uses(repo: Path = REPO) -> list[Use]:
    """The third-party imports of the installed modules (deferred and TYPE_CHECKING included)."""
    _, imports = all_imports(repo)
    bench = {p.stem for p in (repo / "bench").glob("*.py")}  # import_contracts reports those
    uses = [Use(i.imported.split(".")[0], i.path, i.line) for i in imports if not i.internal]
    return [u for u in uses if not _is_standard(u.name) and u.name not in {"lmforge", *bench}]


def suite_uses(repo: Path = REPO) -> list[Use]:
    """The third-party imports of tests/ and bench/ (their own modules left out)."""
    files = [p for top in ("tests", "bench") for p in sorted((repo / top).rglob("*.py"))]
    local = {p.stem for p in files} | {p.parent.name for p in files}
    uses = []
    for path in files:
        for name, line in _absolute_imports(path):
            top = name.split(".")[0]
            if top not in local and top != "lmforge" and not _is_standard(top):
                uses.append(Use(top, path, line))
    return uses


def _undeclared(
    uses: Iterable[Use], declared: set[str], of: dict, repo: Path, where: str
) -> list[str]:
    found = []
    for use in uses:
        candidates = {_normalized(d) for d in of.get(use.name, [])}
        if not candidates & declared:
            shown = use.path.relative_to(repo).as_posix()
            dist = ", ".join(sorted(candidates)) or "a distribution not installed here"
            found.append(
                f"{shown}:{use.line}: imports {use.name} ({dist}), not declared in {where}: "
                "declare it in pyproject.toml"
            )
    return found


def _distributions_used(uses: Iterable[Use], of: dict) -> set[str]:
    return {_normalized(d) for u in uses for d in of.get(u.name, [])}


def _absolute_imports(path: Path) -> Iterable[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, node.lineno


def _normalized(requirement: str) -> str:
    """The PEP 503 name of a requirement string (`Flask-WTF>=1.1` -> `flask-wtf`)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_standard(name: str) -> bool:
    return name in sys.stdlib_module_names


def main(argv: list[str]) -> int:
    """Check the tree at argv[0] (the repository by default)."""
    found = mismatches(Path(argv[0]).resolve() if argv else REPO)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
