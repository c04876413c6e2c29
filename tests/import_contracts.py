"""The import contracts of the installed package, checked over its whole import graph
(`import_graph`: every module of setup.py's ROOTS, every import wherever it sits).

    python tests/import_contracts.py     # `make lint` runs it; exit 1 on any violation

One line per violation: `file:line: importer imports imported: contract`. The contracts:
- the model and the tokenizer never import the pipeline;
- the engine and storage never import the model, the tokenizer, the stages or the
  language-model parts (training, evaluation);
- the libraries (filters, dedup, sources, probes, training) never import the engine;
- no import cycles (deferred and TYPE_CHECKING imports count);
- no installed module imports bench/ or changes sys.path (bench/ is not installed).
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from import_graph import REPO, Import, Module, all_imports, path_changes

P = "lmforge.pipeline"


@dataclass(frozen=True, slots=True)
class Forbidden:
    """Modules under any of `importers` never import a module under any of `imported`."""

    contract: str
    importers: tuple[str, ...]
    imported: tuple[str, ...]


FORBIDDEN = (
    Forbidden(
        "the model and the tokenizer never import the pipeline",
        ("lmforge.model", "lmforge.tokenizer"),
        (P,),
    ),
    Forbidden(
        "the engine and storage never import the model, the tokenizer, the stages, training "
        "or evaluation",
        (f"{P}.engine", f"{P}.storage"),
        ("lmforge.model", "lmforge.tokenizer", f"{P}.stages", f"{P}.training", f"{P}.evaluation"),
    ),
    Forbidden(
        "the libraries (filters, dedup, sources, probes, training) never import the engine",
        (f"{P}.filters", f"{P}.dedup", f"{P}.sources", f"{P}.probes", f"{P}.training"),
        (f"{P}.engine",),
    ),
)
NO_CYCLES = "no import cycles"
NO_BENCH = "no installed module imports bench/ or changes sys.path (bench/ is not installed)"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken contract, where it is broken."""

    contract: str
    importer: str
    imported: str
    path: Path
    line: int
    detail: str = ""
    action: str = "imports"
    """What the importer does to `imported`: imports it, or changes it (sys.path)."""

    def describe(self, repo: Path = REPO) -> str:
        where = f"{_shown(self.path, repo)}:{self.line}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{where}: {self.importer} {self.action} {self.imported}: {self.contract}{detail}"


def violations(repo: Path = REPO) -> list[Violation]:
    """Every violation of every contract in the tree at `repo`."""
    modules, imports = all_imports(repo)
    found = forbidden_imports(imports) + cycles(imports, repo) + bench_uses(modules, imports, repo)
    return sorted(found, key=lambda v: (v.contract, str(v.path), v.line, v.imported))


def forbidden_imports(imports: list[Import]) -> list[Violation]:
    """The imports that a `FORBIDDEN` contract rules out."""
    return [
        Violation(rule.contract, i.importer, i.imported, i.path, i.line)
        for i in imports
        for rule in FORBIDDEN
        if i.internal and _under(i.importer, rule.importers) and _under(i.imported, rule.imported)
    ]


def cycles(imports: list[Import], repo: Path = REPO) -> list[Violation]:
    """One cycle of each strongly connected group of modules, reported at its first edge."""
    edges: dict[str, dict[str, Import]] = {}
    for i in imports:
        if i.internal and i.imported != i.importer:
            edges.setdefault(i.importer, {}).setdefault(i.imported, i)
    found = []
    for group in _strongly_connected(edges):
        start = min(group)
        path = _shortest_cycle(start, group, edges)
        steps = [edges[a][b] for a, b in zip(path, path[1:], strict=False)]
        others = ", ".join(f"{_shown(s.path, repo)}:{s.line}" for s in steps[1:])
        detail = f"{' -> '.join(path)}; the cycle's other imports at {others}"
        first = steps[0]
        found.append(
            Violation(NO_CYCLES, first.importer, first.imported, first.path, first.line, detail)
        )
    return found


def bench_uses(modules: dict[str, Module], imports: list[Import], repo: Path) -> list[Violation]:
    """Imports of bench/'s scripts (or a `bench` package) and changes to sys.path."""
    scripts = {p.stem for p in (repo / "bench").glob("*.py")} | {"bench"}
    found = [
        Violation(NO_BENCH, i.importer, i.imported, i.path, i.line)
        for i in imports
        if not i.internal and i.imported.split(".")[0] in scripts
    ]
    for module in modules.values():
        found += [
            Violation(NO_BENCH, c.module, "sys.path", c.path, c.line, action="changes")
            for c in path_changes(module)
        ]
    return found


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _shown(path: Path, repo: Path) -> str:
    try:
        return path.relative_to(repo).as_posix()
    except ValueError:
        return str(path)


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Groups of more than one module that all reach each other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def _shortest_cycle(start: str, group: set[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """The shortest path start -> ... -> start inside `group` (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(edges.get(node, {})):
            if child not in group:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is in a cycle but reaches no way back")


def main(argv: list[str]) -> int:
    """Check the tree at argv[0] (the repository by default)."""
    repo = Path(argv[0]).resolve() if argv else REPO
    found = violations(repo)
    for violation in found:
        print(violation.describe(repo))
    if found:
        print(f"{len(found)} import contract violation(s) (tests/import_contracts.py)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
