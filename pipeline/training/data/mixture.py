"""A data mixture at training time: which source each global position reads, the windows of
every source as one window space, and the sample index that draws them by weight.

The mixture is applied here, where the sample index is built, so changing only the weights
rebuilds the index (and trains again) without cleaning or tokenizing anything.

Schedule: source `s` (normalised weight `w_s`) makes its `j`-th draw at time `(j + 0.5) / w_s`,
and positions take the draws in order of time (then of source). So every prefix of the order
holds each source's share to within one window, whatever its length: the shares drawn are the
weights, and an index built for more steps starts with the same positions. A source's `k`-th
draw reads window `k mod N_s` of its own permutation for epoch `k // N_s` (seed, source,
epoch), so a source too small for its weight is repeated, each pass in a new order, and its
epochs are reported.

Windows: source `s`'s windows are `base_s + i`, the sources laid end to end in their order
(`MixtureDataset`), so the order file and every reader of a `SampleIndex` stay as they are.
The builder works through memory maps a chunk at a time: its memory does not grow with the
corpus.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from lmforge.durable import AtomicFile, write_atomic

CHUNK = 1 << 20
"""Positions scheduled or filled at a time."""


def normalised(weights: Sequence[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0 or (w <= 0).any():
        raise ValueError(f"mixture weights must all be > 0, got {list(weights)}")
    return w / w.sum()


def schedule(weights: Sequence[float], positions: int, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The source of each of the first `positions` global positions, chunk by chunk (int16)."""
    w = normalised(weights)
    drawn = np.zeros(w.size, dtype=np.int64)  # draws made so far, per source
    done, horizon = 0, 0.0
    while done < positions:
        horizon += max(chunk, 1)
        upto = np.maximum(np.ceil(horizon * w - 0.5), drawn).astype(np.int64)
        times = [(np.arange(drawn[s], upto[s]) + 0.5) / w[s] for s in range(w.size)]
        sources = np.concatenate([np.full(t.size, s, np.int16) for s, t in enumerate(times)])
        order = np.lexsort((sources, np.concatenate(times)))
        take = sources[order][: positions - done]
        drawn += np.bincount(take, minlength=w.size)
        if take.size < sources.size:  # the rest are drawn in no chunk: stop here
            done += take.size
            yield take
            return
        done += take.size
        yield take


def drawn_counts(weights: Sequence[float], positions: int) -> np.ndarray:
    """How many of the first `positions` positions each source gives."""
    counts = np.zeros(len(weights), dtype=np.int64)
    for part in schedule(weights, positions):
        counts += np.bincount(part, minlength=len(weights))
    return counts


def build_mixture_index(
    out_dir: str | Path,
    *,
    names: Sequence[str],
    windows: Sequence[int],
    weights: Sequence[float],
    seed: int,
    max_offset: int,
    positions: int,
    block_size: int,
    data_fingerprint: str,
    run_positions: int,
) -> dict:
    """Write the order of a mixture into `out_dir` (a `SampleIndex`: same files, its header
    with a `mixture` entry per source); its header. `run_positions`: the positions the run
    reads, over which the shares drawn are reported."""
    from lmforge.pipeline.training.data.sample_index import (
        FORMAT,
        FORMAT_VERSION,
        HEADER,
        ORDER,
        epochs_for,
        order_dtype,
    )
    from lmforge.pipeline.training.data.sampler import epoch_offset

    for name, n in zip(names, windows, strict=True):
        if n < 1:
            raise ValueError(
                f"source {name!r} has no complete window of block_size + 1 tokens in its "
                "training split; add data to it or lower model.block_size"
            )
    total = int(sum(windows))
    epochs = epochs_for(positions, total)
    length = epochs * total
    bases = np.concatenate([[0], np.cumsum(windows)[:-1]]).astype(np.int64)
    counts = drawn_counts(weights, length)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = order_dtype(total)
    scratch = out_dir / ".permutations"
    scratch.mkdir(exist_ok=True)
    perms = [
        _permutations(scratch / f"{k}.bin", int(n), seed, k, math.ceil(int(c) / int(n)))
        for k, (n, c) in enumerate(zip(windows, counts, strict=True))
    ]
    with AtomicFile(out_dir / ORDER) as order:
        order.handle.truncate(length * dtype.itemsize)
        mapped = np.memmap(order.partial, dtype=dtype, mode="r+", shape=(length,))
        next_draw = np.zeros(len(windows), dtype=np.int64)
        at = 0
        for part in schedule(weights, length):
            out = np.empty(part.size, dtype=np.int64)
            for k in range(len(windows)):
                mine = np.flatnonzero(part == k)
                draws = next_draw[k] + np.arange(mine.size)
                out[mine] = bases[k] + perms[k][draws]
                next_draw[k] += mine.size
            mapped[at : at + part.size] = out
            at += part.size
        mapped.flush()
        del mapped
    for k in range(len(windows)):
        os.unlink(scratch / f"{k}.bin")
    scratch.rmdir()
    run = drawn_counts(weights, min(run_positions, length))
    w = normalised(weights)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "seed": seed,
        "block_size": block_size,
        "max_offset": max_offset,
        "n_windows": total,
        "epochs": epochs,
        "dtype": dtype.name,
        "offsets": [epoch_offset(seed, e, max_offset) for e in range(epochs)],
        "data_fingerprint": data_fingerprint,
        "mixture": [
            {
                "source": name,
                "windows": int(n),
                "base": int(base),
                "weight": float(weight),
                "share_asked": float(share),
                "draws": int(r),
                "share_drawn": float(r / max(1, run.sum())),
                "epochs": round(int(r) / int(n), 4),
            }
            for name, n, base, weight, share, r in zip(
                names, windows, bases, weights, w, run, strict=True
            )
        ],
    }
    write_atomic(out_dir / HEADER, _json(header))
    return header


def _json(header: dict) -> str:
    import json

    return json.dumps(header, indent=1)


def _permutations(path: Path, n: int, seed: int, source: int, epochs: int) -> np.memmap:
    """`epochs` permutations of a source's `n` windows, end to end in a scratch map: epoch e is
    `default_rng([seed, source, e])`'s, shuffled in place so no copy is held."""
    epochs = max(1, epochs)
    dtype = np.dtype("<u4" if n <= 1 << 32 else "<u8")
    with open(path, "wb") as handle:
        handle.truncate(epochs * n * dtype.itemsize)
    mapped = np.memmap(path, dtype=dtype, mode="r+", shape=(epochs * n,))
    for e in range(epochs):
        view = mapped[e * n : (e + 1) * n].view(np.ndarray)
        view[:] = np.arange(n, dtype=dtype)
        np.random.default_rng([seed, source, e]).shuffle(view)
    mapped.flush()
    return np.memmap(path, dtype=dtype, mode="r", shape=(epochs * n,))


class MixtureDataset:
    """The windows of several sources' token shards as one window space, the sources laid end
    to end in their order: window `base_s + i` is window `i` of source `s`."""

    def __init__(self, sources: Sequence, split: str, block_size: int, max_offset: int = 0) -> None:
        from lmforge.tokenizer.dataset import TokenDataset

        self.sources = list(sources)
        self.split, self.block_size, self.max_offset = split, block_size, max_offset
        self.parts = [TokenDataset(s, split, block_size, max_offset) for s in self.sources]
        self.windows = [len(p) for p in self.parts]
        self._bases = np.concatenate([[0], np.cumsum(self.windows)]).astype(np.int64)
        digest = hashlib.sha256("|".join(p.index.fingerprint for p in self.parts).encode())
        self.fingerprint = digest.hexdigest()[:16]

    def __len__(self) -> int:
        return int(self._bases[-1])

    def window_at(self, i: int, offset: int) -> np.ndarray:
        k = int(np.searchsorted(self._bases, i, side="right")) - 1
        return self.parts[k].window_at(i - int(self._bases[k]), offset)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.window_at(i, 0)

    def __reduce__(self) -> tuple:
        return (MixtureDataset, (self.sources, self.split, self.block_size, self.max_offset))


def open_training_data(data, split: str, block_size: int, max_offset: int):
    """One source's `TokenDataset`, or a `MixtureDataset` for a list of sources' directories."""
    from lmforge.tokenizer.dataset import TokenDataset

    if isinstance(data, list | tuple):
        return MixtureDataset(data, split, block_size, max_offset)
    return TokenDataset(data, split, block_size, max_offset)
