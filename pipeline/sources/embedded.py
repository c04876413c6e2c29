"""The embedded default corpus: the running Python's own documentation, nothing to download.

`pydoc_data.topics` (the language reference topics behind `help()`) plus the longer docstrings of
the standard library's top-level modules, read with `ast` (nothing is imported): about 900
documents, 1 MB of real English technical prose. Deterministic for a given Python version.
"""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from lmforge.pipeline.filters.document import Document

SOURCE = "embedded:python-docs"


MIN_DOCSTRING_CHARS = 300
"""Shorter docstrings (one-liners) are left out: they are not documents."""


def _docstrings(path: Path) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) of the module, its classes and functions."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= MIN_DOCSTRING_CHARS:
                name = getattr(node, "name", "")
                yield f"{name}@{getattr(node, 'lineno', 0)}", doc.strip()


def embedded_documents() -> Iterator[Document]:
    """One document per pydoc topic and per long standard-library docstring."""
    import pydoc_data.topics

    for name in sorted(pydoc_data.topics.topics):
        yield Document(
            id=f"pydoc/{name}", text=pydoc_data.topics.topics[name], source=SOURCE, meta={}
        )
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        for name, text in _docstrings(path):
            yield Document(id=f"stdlib/{path.stem}/{name}", text=text, source=SOURCE, meta={})
