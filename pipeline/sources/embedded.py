"""The embedded default corpus: the running Python's own documentation, nothing to download.

`pydoc_data.topics` (the language reference topics behind `help()`) plus the longer docstrings of
the standard library's top-level modules, read with `ast` (nothing is imported): about 900
documents, 1 MB of real English technical prose. Deterministic for a given Python version.
"""

from __future__ import annotations

import ast
import functools
import sysconfig
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from lmforge.pipeline.document import Document

SOURCE = "embedded:python-docs"


MIN_DOCSTRING_CHARS = 300
"""Shorter docstrings (one-liners) are left out: they are not documents."""


_DEFINITIONS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _definitions(tree: ast.Module) -> Iterator[ast.AST]:
    """The module, class and function nodes of `tree` in `ast.walk`'s breadth-first order,
    visiting statements only: a definition is always a statement, so no expression (most of a
    module's nodes) needs a visit. Its ancestors are statements, exception handlers and match
    cases, met in the same order as `ast.walk` meets them, so the definitions come out in the
    same order too."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                queue.extend(
                    child
                    for child in value
                    if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
                )
        if isinstance(node, _DEFINITIONS):
            yield node


def _docstrings(path: Path) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) of the module, its classes and functions."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return
    for node in _definitions(tree):
        doc = ast.get_docstring(node)
        if doc and len(doc) >= MIN_DOCSTRING_CHARS:
            name = getattr(node, "name", "")
            yield f"{name}@{getattr(node, 'lineno', 0)}", doc.strip()


@functools.cache
def _texts() -> tuple[tuple[str, str], ...]:
    """(id, text) of every document, built once per process (parsing the standard library
    takes seconds): a test session or a worker reading the corpus twice pays it once."""
    import pydoc_data.topics

    texts = [
        (f"pydoc/{name}", pydoc_data.topics.topics[name])
        for name in sorted(pydoc_data.topics.topics)
    ]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        texts.extend((f"stdlib/{path.stem}/{name}", text) for name, text in _docstrings(path))
    return tuple(texts)


def embedded_documents() -> Iterator[Document]:
    """One document per pydoc topic and per long standard-library docstring (new `Document`s
    on every call: the cleaning steps change them)."""
    for doc_id, text in _texts():
        yield Document(id=doc_id, text=text, source=SOURCE, meta={})
