"""The embedded default corpus: the running Python's own documentation, nothing to download.

`pydoc_data.topics` (the language reference topics behind `help()`) plus the docstrings of the
standard library's top-level modules, read with `ast` (nothing is imported), about 1.3 MB of real
English technical prose. Deterministic for a given Python version.
"""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from lmforge.pipeline.filters.document import Document

SOURCE = "embedded:python-docs"


def _module_docstrings(path: Path) -> str:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return ""
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                parts.append(doc.strip())
    return "\n\n".join(parts)


def embedded_documents() -> Iterator[Document]:
    """One document per pydoc topic and per standard-library module with docstrings."""
    import pydoc_data.topics

    for name in sorted(pydoc_data.topics.topics):
        yield Document(
            id=f"pydoc/{name}", text=pydoc_data.topics.topics[name], source=SOURCE, meta={}
        )
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        text = _module_docstrings(path)
        if text:
            yield Document(id=f"stdlib/{path.stem}", text=text, source=SOURCE, meta={})
