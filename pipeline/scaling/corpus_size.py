"""The corpus a scaling plan or a compute budget is sized against: given on the command line
(`--docs`/`--bytes`, as `lmforge estimate` takes it), else what the newest `clean` and
`tokenize` artifacts in the workdir's store measured (documents and bytes read, the share kept,
the training split's tokens).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CorpusSize:
    corpus: dict[str, float]
    """What flows into `clean` for the estimate: docs, bytes and measured shares."""
    train_tokens: float | None
    """Tokens of the training split, measured by `tokenize` (None: the estimate's guess)."""
    source: str
    train_docs: float | None = None
    """Documents of the training split, as `tokenize` counted them."""


def newest_manifest(store: Path, stage: str) -> dict | None:
    """The manifest of `stage`'s most recently committed artifact in `store`, if any."""
    found = sorted(store.glob(f"{stage}/*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    return json.loads(found[-1].read_text(encoding="utf-8"))


def corpus_from_store(workdir: Path) -> CorpusSize | None:
    """The corpus the workdir's newest `clean` read, and the tokens `tokenize` made of it."""
    store = workdir / "store"
    clean = newest_manifest(store, "clean")
    if clean is None:
        return None
    size = (clean.get("estimate") or {}).get("size") or {}
    if not size.get("docs") or not size.get("bytes"):
        return None
    corpus = {"docs": float(size["docs"]), "bytes": float(size["bytes"])}
    if size.get("keep_fraction"):
        corpus["keep_fraction"] = float(size["keep_fraction"])
    tokenize = newest_manifest(store, "tokenize")
    summary = (tokenize or {}).get("summary", {})
    tokens, docs = summary.get("train_tokens"), summary.get("train_docs")
    return CorpusSize(
        corpus,
        float(tokens) if tokens else None,
        f"{store}/clean (newest)",
        float(docs) if docs else None,
    )


def corpus_size(given: dict[str, float] | None, workdir: Path) -> CorpusSize:
    """The corpus given on the command line, else the workdir's; one line when neither."""
    if given is not None:
        return CorpusSize(given, None, "the command line")
    found = corpus_from_store(workdir)
    if found is None:
        raise ConfigError(
            f"no corpus size: give --docs N and/or --bytes B, or run `lmforge run --until "
            f"tokenize workdir={workdir}` first so its measured corpus is used"
        )
    return found
