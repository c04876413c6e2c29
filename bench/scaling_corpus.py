"""The scaling-law bench's corpus (`scaling_law.py`): real text that exists wherever lmforge is
installed, the Python sources (code and docstrings) under the interpreter's site-packages,
deduplicated by content and written as JSONL shards, with `CODE_FILTERS`, the clean settings that
suit code (`scaling_law.py`'s docstring says why each).

Validation holds whole packages. `clean` splits by a hash of the document id, which for files of
one package puts siblings on both sides: files of a package share license headers, imports and
idioms, and 22% of the distinct lines of 30 characters or more of such a validation split were
also in its training split (the bench's 64 MB), against 2% when whole top-level packages go to
one side. A held-out score that rewards memorising the training split falls faster with model
size and tokens than a law fitted on less-trained runs predicts. So each file's id is its path,
with a `#k` suffix where needed (`split_id`) for the hash to send it where its package goes."""

from __future__ import annotations

import hashlib
import json
import site
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.sources.parquet_shards import split_of

CODE_FILTERS = (
    "data.filters.language.enabled=false",
    "data.filters.gopher_quality.enabled=false",
    "data.filters.c4.enabled=false",
    "data.filters.gopher_repetition.max_dup_line_frac=0.6",
    "data.filters.gopher_repetition.max_dup_line_char_frac=0.4",
    "data.filters.gopher_repetition.max_dup_para_frac=0.6",
    "data.filters.gopher_repetition.max_dup_para_char_frac=0.4",
    "data.filters.gopher_repetition.top_ngram_max_char_frac=[[2,0.4],[3,0.36],[4,0.32]]",
    "data.filters.gopher_repetition.dup_ngram_max_char_frac="
    "[[5,0.6],[6,0.58],[7,0.56],[8,0.54],[9,0.52],[10,0.5]]",
)
"""The clean settings that suit Python sources (the module docstring says why each)."""
MAX_FILE_BYTES = 512 * 1024
"""Larger sources are mostly generated tables or vendored bundles: skipped."""
SHARD_BYTES = 32 * 2**20
VAL_FRACTION = 0.05
"""The share of packages in validation: the bench's `data.val_fraction`."""


def site_packages() -> list[Path]:
    """The running interpreter's site-packages folders: the virtualenv's and any it chains to
    (a `.pth` pointing at another environment's, as a worktree's virtualenv may)."""
    found = [Path(p) for p in site.getsitepackages()]
    found += [Path(p) for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(p.resolve() for p in found if p.is_dir()))


def python_sources(roots: list[Path]) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every readable UTF-8 `.py` file under `roots`, in path order,
    each content once (the first path that has it), each name once."""
    seen: set[bytes] = set()
    names: set[str] = set()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            try:
                if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            digest = hashlib.sha256(data).digest()
            name = path.relative_to(root).as_posix()
            if digest in seen or name in names or not data.strip():
                continue
            seen.add(digest)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            names.add(name)
            yield name, text


def package_of(name: str) -> str:
    """A source's top-level package (or module) under site-packages: `pkg/sub/a.py` -> `pkg`."""
    return name.split("/", 1)[0].split(".", 1)[0]


def split_id(name: str, val_fraction: float = VAL_FRACTION) -> str:
    """An id for the source `name` that `clean`'s split (`split_of`, a hash of the id) sends to
    the side its package is on: `name` itself, or `name#k` for the smallest k that does."""
    side = split_of(package_of(name), val_fraction)
    doc_id, k = name, 0
    while split_of(doc_id, val_fraction) != side:
        k += 1
        doc_id = f"{name}#{k}"
    return doc_id


@dataclass(frozen=True, slots=True)
class CorpusStats:
    files: int
    bytes: int
    shards: int

    def to_json(self) -> dict:
        return {"files": self.files, "bytes": self.bytes, "shards": self.shards}


def build_corpus(
    roots: list[Path], out: Path, target_bytes: int, val_fraction: float = VAL_FRACTION
) -> CorpusStats:
    """JSONL shards of `{"id", "text"}` from the sources under `roots`, up to `target_bytes` of
    text, into `out`; ids whose split puts whole packages in validation (`split_id`)."""
    out.mkdir(parents=True, exist_ok=True)
    files = size = shards = 0
    shard_size = SHARD_BYTES + 1
    handle = None
    try:
        for name, text in python_sources(roots):
            if size >= target_bytes:
                break
            if shard_size > SHARD_BYTES:
                if handle:
                    handle.close()
                handle = (out / f"python-{shards:04d}.jsonl").open("w", encoding="utf-8")
                shards, shard_size = shards + 1, 0
            doc = {"id": split_id(name, val_fraction), "text": text}
            line = json.dumps(doc, ensure_ascii=False) + "\n"
            handle.write(line)
            files += 1
            size += len(text.encode("utf-8"))
            shard_size += len(line)
    finally:
        if handle:
            handle.close()
    return CorpusStats(files, size, shards)
