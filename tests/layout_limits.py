"""The limits of the package layout, so that the folders stay the architecture.

    python tests/layout_limits.py     # `make lint` runs it; exit 1 on any breach

- `pipeline/`'s root holds at most 8 `.py` files (`__init__.py` included): a concern is a folder;
- no folder holds more than 20 `.py` files;
- no folder named misc, utils, common or helpers (a module lives by its user or says its job);
- the installed top level is `lmforge` alone, with exactly the roots of `ROOTS` below;
- every folder holding `.py` files is a package (`__init__.py`): setup.py's `find_packages` skips
  any other, and its modules would be missing from the wheel.
"""

from __future__ import annotations

import sys
from pathlib import Path

from source_tree import REPO, package_folders

PIPELINE_ROOT_MAX = 8
FOLDER_MAX = 20
BANNED_FOLDERS = {"misc", "utils", "common", "helpers"}
ROOTS = {"lmforge", "lmforge.pipeline", "lmforge.model", "lmforge.tokenizer", "lmforge.conf"}
"""The installed packages that setup.py maps to folders; a new one is a new top-level folder."""


def breaches(repo: Path = REPO) -> list[str]:
    """One line per limit the tree at `repo` exceeds."""
    roots = package_folders(repo)
    found = []
    if set(roots) != ROOTS:
        found.append(
            f"setup.py: ROOTS maps {sorted(roots)}; the layout allows exactly {sorted(ROOTS)} "
            "(a new concern is a folder inside pipeline/, not a new top-level package)"
        )
    pipeline = repo / roots.get("lmforge.pipeline", "pipeline")
    at_root = _modules(pipeline)
    if len(at_root) > PIPELINE_ROOT_MAX:
        found.append(
            f"{_shown(pipeline, repo)}/: {len(at_root)} .py files at its root, at most "
            f"{PIPELINE_ROOT_MAX} ({', '.join(at_root)}): move a concern into a folder"
        )
    for folder in _folders([repo / f for f in roots.values()]):
        modules = _modules(folder)
        where = _shown(folder, repo)
        if len(modules) > FOLDER_MAX:
            found.append(
                f"{where}/: {len(modules)} .py files, at most {FOLDER_MAX}: split it by concern"
            )
        if folder.name in BANNED_FOLDERS:
            found.append(
                f"{where}/: no folder is named {folder.name}: put each module by its user "
                "or in a module named for its job"
            )
        if modules and "__init__.py" not in modules:
            found.append(
                f"{where}/: holds .py files but no __init__.py, so find_packages leaves it out "
                "of the wheel: add one"
            )
    return found


def _modules(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.py"))


def _folders(roots: list[Path]) -> list[Path]:
    """Every folder under the package roots (the roots too), `__pycache__` left out."""
    found = []
    for root in roots:
        found.append(root)
        found += [p for p in sorted(root.rglob("*")) if p.is_dir() and "__pycache__" not in p.parts]
    return found


def _shown(path: Path, repo: Path) -> str:
    return path.relative_to(repo).as_posix()


def main(argv: list[str]) -> int:
    """Check the tree at argv[0] (the repository by default)."""
    found = breaches(Path(argv[0]).resolve() if argv else REPO)
    for breach in found:
        print(breach)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
