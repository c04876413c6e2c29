"""The index of one split's token shards: what a reader needs to open the split without opening
any shard (in the manner of Megatron's `.idx`).

Two files beside the shards, written once all of them are committed (the `tokenize` stage writes
them when it commits its artifact):
- `<split>.index.npy`: int64 `[n_shards, 2]`, the tokens and documents of shards 0..n-1
  (`shard_name(split, k)`);
- `<split>.index.json`: the header (format, split, vocabulary and dtype shared by every shard,
  totals, and a sha256 of the `.npy` that identifies the data). Written last, by rename.

So a dataset of 100,000 shards opens by reading two small files, not 100,000 headers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmforge.durable import AtomicFile
from lmforge.tokenizer.packing import token_dtype
from lmforge.tokenizer.shards import HEADER_SUFFIX, ShardInfo, read_shard_info, shard_name

FORMAT = "lmforge-token-split-index"
FORMAT_VERSION = 1


def index_files(split: str) -> tuple[str, str]:
    """Names of the split's index header and shard table, e.g. `train.index.json`."""
    shard_name(split, 0)  # validates the split name
    return f"{split}.index.json", f"{split}.index.npy"


@dataclass(frozen=True, slots=True)
class SplitIndex:
    """Every shard of one split, as counts; shard `k` is named `shard_name(split, k)`."""

    split: str
    vocab_size: int
    dtype: str
    """`uint16` or `uint32`, shared by every shard."""
    n_tokens: np.ndarray
    """Tokens of each shard (int64)."""
    n_docs: np.ndarray
    """Documents of each shard (int64)."""
    fingerprint: str
    """sha256 of the shard table: equal fingerprints, equal shards and counts."""

    def __len__(self) -> int:
        return len(self.n_tokens)

    def shard_info(self, k: int, directory: Path) -> ShardInfo:
        """The header of shard `k` as the index knows it (its header file is not read)."""
        return ShardInfo(
            header=directory / f"{shard_name(self.split, k)}{HEADER_SUFFIX}",
            split=self.split,
            index=k,
            vocab_size=self.vocab_size,
            dtype=self.dtype,
            n_tokens=int(self.n_tokens[k]),
            n_docs=int(self.n_docs[k]),
        )


def write_split_index(out_dir: str | Path, split: str, shards: Sequence[ShardInfo]) -> Path:
    """Write the index of `split` from its committed shards' infos; returns the header path.

    The shards must be numbered 0..n-1 (any order) and share one vocabulary.
    """
    out_dir = Path(out_dir)
    ordered = sorted(shards, key=lambda s: s.index)
    if [s.index for s in ordered] != list(range(len(ordered))):
        raise ValueError(f"{split} shards in {out_dir} are not numbered 0..{len(ordered) - 1}")
    if any(s.split != split for s in ordered):
        raise ValueError(f"a shard given for the {split!r} index belongs to another split")
    vocab_sizes = {s.vocab_size for s in ordered}
    if len(vocab_sizes) > 1:
        raise ValueError(f"{split} shards in {out_dir} mix vocab sizes {sorted(vocab_sizes)}")
    vocab_size = vocab_sizes.pop() if vocab_sizes else 0
    table = np.array([[s.n_tokens, s.n_docs] for s in ordered], dtype=np.int64).reshape(-1, 2)
    header_name, table_name = index_files(split)
    _write_atomic(out_dir / table_name, lambda f: np.save(f, table))
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "split": split,
        "vocab_size": vocab_size,
        "dtype": token_dtype(vocab_size).name if vocab_size else "uint16",
        "n_shards": len(ordered),
        "n_tokens": int(table[:, 0].sum()),
        "n_docs": int(table[:, 1].sum()),
        "shards_file": table_name,
        "fingerprint": hashlib.sha256(table.tobytes()).hexdigest(),
    }
    text = json.dumps(header, indent=1).encode("utf-8")
    _write_atomic(out_dir / header_name, lambda f: f.write(text))
    return out_dir / header_name


def index_committed_shards(out_dir: str | Path, split: str) -> Path:
    """Write the index of every committed `split` shard in `out_dir`, reading their headers: for
    shards written outside the `tokenize` stage (tests, tools)."""
    headers = sorted(Path(out_dir).glob(f"{split}-*{HEADER_SUFFIX}"))
    return write_split_index(out_dir, split, [read_shard_info(h) for h in headers])


def read_split_index(locate: Callable[[str], Path], split: str) -> SplitIndex:
    """The index of `split`; `locate(name)` is where a file of the split is read from."""
    header_name, _ = index_files(split)
    header_path = locate(header_name)
    try:
        header = json.loads(header_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no committed {split!r} token shards in {header_path.parent} ({header_name} is "
            "missing); run the tokenize stage first"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{header_path}: not valid JSON ({err}); rerun tokenize") from err
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{header_path}: not an lmforge split index; rerun tokenize")
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(f"{header_path}: split index version {header.get('version')} unknown")
    table = _read_table(locate(header["shards_file"]), header)
    return SplitIndex(
        split=split,
        vocab_size=int(header["vocab_size"]),
        dtype=header["dtype"],
        n_tokens=table[:, 0],
        n_docs=table[:, 1],
        fingerprint=header["fingerprint"],
    )


def _read_table(path: Path, header: dict) -> np.ndarray:
    try:
        table = np.load(path, allow_pickle=False)
    except (FileNotFoundError, ValueError) as err:
        raise ValueError(f"{path}: unreadable shard table ({err}); rerun tokenize") from err
    n = header["n_shards"]
    if (
        table.dtype != np.int64
        or table.shape != (n, 2)
        or int(table[:, 0].sum()) != int(header["n_tokens"])
    ):
        raise ValueError(f"{path}: shard table does not match its header; rerun tokenize")
    return table


def _write_atomic(path: Path, write: Callable) -> None:
    with AtomicFile(path) as out:
        write(out.handle)
