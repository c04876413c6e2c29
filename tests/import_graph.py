"""Every installed module of the `package-dir` layout and every import it makes, read from the
source (AST), without importing anything.

setup.py's `ROOTS` maps each installed package to its folder (`lmforge.pipeline` -> `pipeline/`),
so a module's name is its root's package plus its path below the folder. Every import counts:
at module level, deferred inside a function, under `if TYPE_CHECKING:`, relative ones, and
`importlib.import_module("...")` with a literal name. `from pkg import sub` imports the module
`pkg.sub` when `sub` is one; otherwise it imports `pkg` (a name defined there).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from source_tree import REPO, package_folders


@dataclass(frozen=True, slots=True)
class Module:
    """One installed module and the file it is read from."""

    name: str
    path: Path
    is_package: bool


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target, as the importing module names it."""

    importer: str
    imported: str
    """The most specific module named: an installed module, or a dotted external name."""
    path: Path
    line: int
    internal: bool
    """Whether `imported` is one of the installed modules."""


@dataclass(frozen=True, slots=True)
class PathChange:
    """A statement that changes `sys.path` (installed code never should)."""

    module: str
    path: Path
    line: int


def installed_modules(repo: Path = REPO) -> dict[str, Module]:
    """{module name: module} for every `.py` file under every folder of setup.py's ROOTS."""
    modules: dict[str, Module] = {}
    for package, folder in package_folders(repo).items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            modules[name] = Module(name, path, is_package)
    return modules


def imports_of(module: Module, modules: dict[str, Module]) -> Iterator[Import]:
    """Every import `module` makes, wherever it sits in the file."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield _import(module, _resolve(alias.name, modules), node.lineno, modules)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                target = name if name in modules else _resolve(base, modules)
                yield _import(module, target, node.lineno, modules)
        elif _is_import_module_call(node) and isinstance(node.args[0], ast.Constant):
            yield _import(module, _resolve(node.args[0].value, modules), node.lineno, modules)


def all_imports(repo: Path = REPO) -> tuple[dict[str, Module], list[Import]]:
    """The installed modules and every import of theirs."""
    modules = installed_modules(repo)
    found = [i for m in modules.values() for i in imports_of(m, modules)]
    return modules, found


def path_changes(module: Module) -> Iterator[PathChange]:
    """Where `module` changes `sys.path` (`sys.path.insert/append/extend`, an assignment to it
    or into it, `site.addsitedir`)."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    for node in ast.walk(tree):
        if _changes_sys_path(node):
            yield PathChange(module.name, module.path, node.lineno)


def _import(module: Module, target: str, line: int, modules: dict[str, Module]) -> Import:
    return Import(module.name, target, module.path, line, target in modules)


def _resolve(name: str, modules: dict[str, Module]) -> str:
    """The longest installed module that `name` starts with, or `name` itself if none."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return name


def _absolute(node: ast.ImportFrom, module: Module) -> str:
    """The absolute package or module a `from ... import` reads from."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".")
    if not module.is_package:
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _is_import_module_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and bool(node.args)
        and _dotted(node.func) in {"importlib.import_module", "import_module", "__import__"}
    )


def _changes_sys_path(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, method = _dotted(node.func.value), node.func.attr
        return (owner == "sys.path" and method in {"insert", "append", "extend"}) or (
            owner == "site" and method == "addsitedir"
        )
    if isinstance(node, ast.Assign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(_is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in targets)
    return False


def _is_sys_path(node: ast.AST) -> bool:
    return _dotted(node) == "sys.path"


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of attributes on a name, else ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""
