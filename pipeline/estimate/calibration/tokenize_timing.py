"""The tokenize path timed on English text: the `tokenize` calibration case and
`bench/tokenize_throughput.py` time lmforge's `tokenize_partition` (encoding, packing, shard
writing) on the same documents in the same batches.

The text is Python's own English documentation (the `pydoc` help topics and the docstrings of
the standard library, read with `ast`, nothing imported or downloaded), repeated to the size
asked for. `tokenize_partition` encodes on the calling thread: one CPU's rate.
"""

from __future__ import annotations

import ast
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from lmforge.tokenizer import tokenize_partition

BATCH = 1024
"""Documents per `encode_batch` call."""
MB = 1e6


def documentation_corpus(target_bytes: int) -> list[str]:
    """Distinct English documents from the Python docs, then repeated to `target_bytes`."""
    from pydoc_data.topics import topics

    docs = [text for text in topics.values() if text.strip()]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if {"test", "tests", "site-packages"} & {path.parent.name} or path.name.startswith("test"):
            continue
        docs += _docstrings(path)
    unique = sum(len(d.encode()) for d in docs)
    out, size = [], 0
    while size < target_bytes:
        for doc in docs:
            out.append(doc)
            size += len(doc.encode())
            if size >= target_bytes:
                break
    print(f"corpus: {len(docs)} distinct documents, {unique / MB:.2f} MB distinct text")
    return out


def _docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = (ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, kinds))
    return [doc for doc in found if doc and len(doc) >= 200]


def lmforge_encode(tok: Tokenizer, texts: list[str], out_dir: Path) -> None:
    """The tokenize stage's path over `texts`: one shard of the train split in `out_dir`."""
    tokenize_partition(tok, texts, out_dir, "train", 0, batch_size=BATCH)


def timed(run: Callable[[], None]) -> float:
    """Seconds `run` takes."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start
