"""Token shards on disk: a streaming writer that commits atomically, and a reader that memory-maps.

One shard is three files named `<split>-<index:05d>.*`:
- `.tokens.bin`: the packed token stream, raw little-endian uint16 (vocabulary <= 65536) or uint32;
- `.docs.npy`: int64 start offset of every document in the stream (its leading `<|endoftext|>`);
- `.shard.json`: the header (dtype, counts, file names). It is written last, by rename, and a shard
  exists only once its header does: a writer that crashes or is never closed leaves only hidden
  `.*.partial-*` files that no reader looks at (`lmforge.durable`).

Once every shard of a split is committed, the split's index (`split_index`) lists them, and
readers (`TokenDataset`) open the split from it; `read_shard` opens one shard by its header.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmforge.durable import AtomicFile, WholeOrNothing, write_atomic
from lmforge.tokenizer.packing import PackedStream, pack_documents, token_dtype

FORMAT = "lmforge-token-shard"
FORMAT_VERSION = 1
HEADER_SUFFIX = ".shard.json"
TOKENS_SUFFIX = ".tokens.bin"
DOCS_SUFFIX = ".docs.npy"
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def shard_name(split: str, index: int) -> str:
    """File stem of shard `index` of `split`, e.g. `train-00003`."""
    if not _SPLIT_NAME.match(split):
        raise ValueError(f"split name must be letters, digits or '_', got {split!r}")
    if index < 0:
        raise ValueError(f"shard index must be >= 0, got {index}")
    return f"{split}-{index:05d}"


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """What a closed shard holds; also the content of its header."""

    header: Path
    """Path of the `.shard.json` header."""
    split: str
    """Dataset split, e.g. `train` or `val`."""
    index: int
    """Position of the shard within its split (shards are read in index order)."""
    vocab_size: int
    """Vocabulary size of the tokenizer that wrote it; every id is below it."""
    dtype: str
    """`uint16` or `uint32`."""
    n_tokens: int
    """Tokens in the stream, EOT separators included."""
    n_docs: int
    """Documents in the stream."""


class TokenShardWriter(WholeOrNothing):
    """Append documents to one shard; nothing is visible until `close()` commits it.

    Use as a context manager: leaving the block normally commits, an exception discards.
    """

    def __init__(self, out_dir: str | Path, split: str, index: int, vocab_size: int) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.split, self.index, self.vocab_size = split, index, vocab_size
        self.name = shard_name(split, index)
        self.dtype = token_dtype(vocab_size)
        self._final = {
            kind: self.out_dir / f"{self.name}{suffix}"
            for kind, suffix in (("tokens", TOKENS_SUFFIX), ("docs", DOCS_SUFFIX))
        }
        self._header = self.out_dir / f"{self.name}{HEADER_SUFFIX}"
        self._tokens = AtomicFile(self._final["tokens"])  # committed or aborted by close/abort
        self._doc_starts: list[np.ndarray] = []
        self.n_tokens = 0
        self.n_docs = 0
        self.info: ShardInfo | None = None
        """Set by `close()`: what the committed shard holds."""

    def write_documents(self, docs: list[list[int]]) -> None:
        """Append encoded documents (each already starting with EOT, see `convention`)."""
        self.write_packed(pack_documents(docs, dtype=self.dtype))

    def write_packed(self, packed: PackedStream) -> None:
        """Append an already packed stream; its doc starts are relative to its own first token."""
        if self._tokens.handle.closed:
            raise ValueError(f"shard {self._header} is already closed")
        tokens = packed.tokens
        if tokens.size and int(tokens.max()) >= self.vocab_size:
            raise ValueError(
                f"token id {int(tokens.max())} >= vocab_size {self.vocab_size} "
                f"while writing {self._header}: the tokenizer and vocab_size disagree"
            )
        on_disk = np.ascontiguousarray(tokens, dtype=self.dtype.newbyteorder("<"))
        self._tokens.write(on_disk.data)
        self._doc_starts.append(packed.doc_starts + self.n_tokens)
        self.n_tokens += len(tokens)
        self.n_docs += len(packed.doc_starts)

    def close(self) -> ShardInfo:
        """Commit the stream and doc starts, then the header, each atomically and durably."""
        if self.info is not None:
            return self.info
        if self._tokens.handle.closed:
            raise ValueError(f"shard {self._header} was aborted; nothing to commit")
        self._header.unlink(missing_ok=True)  # a shard rewritten in place is invisible meanwhile
        self._tokens.commit()
        starts = np.concatenate(self._doc_starts) if self._doc_starts else np.zeros(0, np.int64)
        with AtomicFile(self._final["docs"]) as docs:
            np.save(docs.handle, starts.astype(np.int64))
        info = ShardInfo(
            header=self._header,
            split=self.split,
            index=self.index,
            vocab_size=self.vocab_size,
            dtype=self.dtype.name,
            n_tokens=self.n_tokens,
            n_docs=self.n_docs,
        )
        write_atomic(self._header, json.dumps(_header_json(info, self._final), indent=1))
        self.info = info
        return info

    def commit(self) -> None:
        """`close`, at the end of a `with` block."""
        self.close()

    def abort(self) -> None:
        """Discard everything written; no shard appears."""
        self._tokens.abort()


def _header_json(info: ShardInfo, files: dict[str, Path]) -> dict:
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "split": info.split,
        "index": info.index,
        "vocab_size": info.vocab_size,
        "dtype": info.dtype,
        "byteorder": "little",
        "n_tokens": info.n_tokens,
        "n_docs": info.n_docs,
        "tokens_file": files["tokens"].name,
        "docs_file": files["docs"].name,
    }


@dataclass(frozen=True, slots=True)
class TokenShard:
    """One committed shard, opened for reading."""

    info: ShardInfo
    """Its header."""
    tokens: np.ndarray
    """The token stream, memory-mapped read-only (an empty array for an empty shard)."""
    doc_starts: np.ndarray
    """Start offset of every document in `tokens`, int64."""


def read_shard(header: str | Path) -> TokenShard:
    """Open a shard by its header, checking that its files match it; errors name the bad file."""
    header = Path(header)
    info = read_shard_info(header)
    stem = header.name.removesuffix(HEADER_SUFFIX)
    tokens = map_tokens(header.parent / f"{stem}{TOKENS_SUFFIX}", info)
    doc_starts = _read_doc_starts(header.parent / f"{stem}{DOCS_SUFFIX}", info)
    return TokenShard(info=info, tokens=tokens, doc_starts=doc_starts)


def read_shard_info(header: str | Path) -> ShardInfo:
    """What a shard holds, from its header alone (no token or document file is opened)."""
    header = Path(header)
    meta = _read_header(header)
    info = ShardInfo(
        header=header,
        split=meta["split"],
        index=int(meta["index"]),
        vocab_size=int(meta["vocab_size"]),
        dtype=meta["dtype"],
        n_tokens=int(meta["n_tokens"]),
        n_docs=int(meta["n_docs"]),
    )
    if info.dtype != token_dtype(info.vocab_size).name:
        raise ValueError(
            f"{header}: dtype {info.dtype} does not match vocab_size {info.vocab_size}; "
            "the header is inconsistent, rerun the tokenize stage"
        )
    return info


def map_tokens(path: Path, info: ShardInfo) -> np.ndarray:
    """The token stream of the shard `info` describes, memory-mapped read-only from `path`.

    A path that fetches its file on demand (one with a `memmap` method, as a store's input read
    through the node cache) maps only the ranges that are sliced."""
    dtype = np.dtype(info.dtype).newbyteorder("<")
    _check_size(path, info.n_tokens * dtype.itemsize)
    if not info.n_tokens:
        return np.zeros(0, dtype=dtype)
    lazy = getattr(path, "memmap", None)
    if lazy is not None:
        return lazy(dtype, info.n_tokens)
    return np.memmap(path, dtype=dtype, mode="r", shape=(info.n_tokens,))


def map_doc_starts(path: Path, info: ShardInfo) -> np.ndarray:
    """The document starts of the shard `info` describes, memory-mapped (pages read on use).

    Only the shape, dtype and both ends are checked: checking every offset would read them all.
    """
    try:
        starts = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"document index {path} of shard {info.header.name} is missing"
        ) from None
    except ValueError as err:
        raise ValueError(f"{path}: unreadable document index ({err}); rerun tokenize") from err
    if not _plausible_starts(starts, info):
        raise ValueError(
            f"{path}: document index does not match {info.header.name} "
            f"({info.n_docs} ascending offsets up to {info.n_tokens} expected); rerun tokenize"
        )
    return starts if len(starts) else np.zeros(0, np.int64)


def _plausible_starts(starts: np.ndarray, info: ShardInfo) -> bool:
    return (
        starts.ndim == 1
        and starts.dtype == np.int64
        and len(starts) == info.n_docs
        and (len(starts) == 0 or (starts[0] == 0 and starts[-1] <= info.n_tokens))
    )


def _read_header(header: Path) -> dict:
    try:
        meta = json.loads(header.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"token shard header {header} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{header}: not valid JSON ({err}); rerun the tokenize stage") from err
    required = {"format", "split", "index", "vocab_size", "dtype", "n_tokens", "n_docs"}
    required |= {"tokens_file", "docs_file"}
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{header}: not an lmforge token shard header (format != {FORMAT!r})")
    missing = sorted(required - meta.keys())
    if missing:
        raise ValueError(f"{header}: header lacks {missing}; rerun the tokenize stage")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{header}: shard format version {meta.get('version')} is not supported")
    return meta


def _check_size(path: Path, expected: int) -> None:
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"token file {path} named by its shard header is missing") from None
    if actual != expected:
        raise ValueError(
            f"{path} holds {actual} bytes but its header promises {expected}: "
            "the shard is truncated or corrupt; rerun the tokenize stage"
        )


def _read_doc_starts(path: Path, info: ShardInfo) -> np.ndarray:
    try:
        starts = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"document index {path} named by {info.header} is missing"
        ) from None
    except ValueError as err:
        raise ValueError(f"{path}: unreadable document index ({err}); rerun tokenize") from err
    if not (_plausible_starts(starts, info) and bool(np.all(np.diff(starts) >= 0))):
        raise ValueError(
            f"{path}: document index does not match {info.header} "
            f"({info.n_docs} ascending offsets up to {info.n_tokens} expected); rerun tokenize"
        )
    return starts
