"""The sample index: the global order of training windows, computed once and memory-mapped by
every rank (in the manner of Megatron's cached shuffle and sample indices).

A directory of two files:
- `order.bin`: for each epoch in turn, the permutation of all window indices that
  `GlobalWindowOrder` defines (numpy's `default_rng([seed, epoch])`), raw little-endian uint32
  (uint64 past 2^32 windows); global position `p` of a run reads window `order[p]`;
- `sample_index.json`: the header (seed, block size, window shift bound, windows, epochs, each
  epoch's shift, the fingerprint of the token data it was built for). Written last, by rename.

Each epoch is shuffled in place inside the memory-mapped file, so the builder holds no copy of
it: its pages belong to the page cache, not to the process. A rank maps the file and reads only
the slices of its steps; a resumed run reads its position from the same file. Epochs depend on
(seed, epoch) only, so an index built for more steps starts with the same windows.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from lmforge.durable import AtomicFile, write_atomic
from lmforge.pipeline.training.data.sampler import epoch_offset, max_window_offset
from lmforge.tokenizer.dataset import TokenDataset

FORMAT = "lmforge-sample-index"
FORMAT_VERSION = 1
HEADER = "sample_index.json"
ORDER = "order.bin"
FILL_CHUNK = 1 << 22
"""Window indices written per slice while an epoch is filled, before it is shuffled."""


def order_dtype(n_windows: int) -> np.dtype:
    """uint32 while every window index fits, else uint64 (little-endian)."""
    return np.dtype("<u4" if n_windows <= 1 << 32 else "<u8")


def epochs_for(positions: int, n_windows: int) -> int:
    """Whole epochs that hold `positions` global positions (at least one)."""
    return max(1, math.ceil(positions / n_windows))


def build_sample_index(
    out_dir: str | Path,
    *,
    n_windows: int,
    seed: int,
    max_offset: int,
    epochs: int,
    block_size: int,
    data_fingerprint: str,
) -> dict:
    """Write the order of `epochs` epochs of `n_windows` windows into `out_dir`; its header."""
    if n_windows < 1:
        raise ValueError(
            "the training split has no complete window of block_size + 1 tokens; "
            "add data or lower model.block_size"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = order_dtype(n_windows)
    with AtomicFile(out_dir / ORDER) as order:  # filled in place through maps of it
        order.handle.truncate(epochs * n_windows * dtype.itemsize)
        for epoch in range(epochs):
            _write_epoch(order.partial, dtype, n_windows, seed, epoch)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "seed": seed,
        "block_size": block_size,
        "max_offset": max_offset,
        "n_windows": n_windows,
        "epochs": epochs,
        "dtype": dtype.name,
        "offsets": [epoch_offset(seed, e, max_offset) for e in range(epochs)],
        "data_fingerprint": data_fingerprint,
    }
    write_atomic(out_dir / HEADER, json.dumps(header, indent=1))
    return header


def _write_epoch(path: Path, dtype: np.dtype, n: int, seed: int, epoch: int) -> None:
    """Fill epoch `epoch`'s slice of the file with 0..n-1 and shuffle it in place: the same
    Fisher-Yates draws as `default_rng([seed, epoch]).permutation(n)`, 4 bytes a window."""
    mapped = np.memmap(path, dtype=dtype, mode="r+", offset=epoch * n * dtype.itemsize, shape=(n,))
    view = mapped.view(np.ndarray)  # a plain ndarray: numpy shuffles it in C, in place
    for start in range(0, n, FILL_CHUNK):
        stop = min(n, start + FILL_CHUNK)
        view[start:stop] = np.arange(start, stop, dtype=dtype)
    np.random.default_rng([seed, epoch]).shuffle(view)
    mapped.flush()
    del view, mapped


class SampleIndex:
    """A built sample index, memory-mapped: the window and shift at every global position."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        header = _read_header(self.directory / HEADER)
        self.seed = int(header["seed"])
        self.block_size = int(header["block_size"])
        self.max_offset = int(header["max_offset"])
        self.n_windows = int(header["n_windows"])
        self.epochs = int(header["epochs"])
        self.data_fingerprint = str(header["data_fingerprint"])
        self.positions = self.epochs * self.n_windows
        """Global positions covered: a run may read positions [0, positions)."""
        self._offsets = np.asarray(header["offsets"], dtype=np.int64)
        dtype = np.dtype(header["dtype"])
        path = self.directory / ORDER
        if not path.is_file() or path.stat().st_size != self.positions * dtype.itemsize:
            raise ValueError(
                f"{path} is missing or not {self.positions} {dtype.name} entries as {HEADER} "
                "says; rerun the sample_index stage"
            )
        self._order = np.memmap(path, dtype=dtype, mode="r", shape=(self.positions,))

    def windows(self, start: int, count: int) -> np.ndarray:
        """Window indices at global positions [start, start + count), as int64."""
        self._check_range(start, count)
        return self._order[start : start + count].astype(np.int64)

    def offsets(self, start: int, count: int) -> np.ndarray:
        """The shift of the windows at global positions [start, start + count)."""
        self._check_range(start, count)
        return self._offsets[np.arange(start, start + count, dtype=np.int64) // self.n_windows]

    def _check_range(self, start: int, count: int) -> None:
        if start < 0 or start + count > self.positions:
            raise IndexError(
                f"positions [{start}, {start + count}) are past the {self.positions} that the "
                f"sample index {self.directory} covers ({self.epochs} epochs); rebuild it for "
                "more steps (the pipeline's sample_index stage extends it)"
            )

    def __deepcopy__(self, memo: dict) -> SampleIndex:
        return self  # read-only: a copy would read the whole map into memory

    def __reduce__(self) -> tuple:
        return (SampleIndex, (str(self.directory),))


def open_for_run(
    directory: str | Path, dataset: TokenDataset, seed: int, positions: int
) -> SampleIndex:
    """The sample index in `directory`, checked against the run: the same token data, block size,
    window shift and seed, and at least `positions` positions; errors say what to rebuild."""
    index = SampleIndex(directory)
    built = (index.data_fingerprint, index.n_windows, index.block_size, index.max_offset)
    fingerprint = getattr(dataset, "fingerprint", None) or dataset.index.fingerprint  # a mixture's
    wanted = (fingerprint, len(dataset), dataset.block_size, dataset.max_offset)
    if built != wanted or index.seed != seed:
        raise ValueError(
            f"sample index {directory} was built for other data or settings (fingerprint, "
            f"windows, block size, max offset, seed = {(*built, index.seed)}; this run has "
            f"{(*wanted, seed)}); rerun the sample_index stage"
        )
    if index.positions < positions:
        raise ValueError(
            f"sample index {directory} covers {index.positions} positions ({index.epochs} "
            f"epochs) but the run reads {positions}; rerun the sample_index stage for the new "
            "train.max_steps (the pipeline does it before pretrain)"
        )
    return index


def build_for_data(
    out_dir: str | Path,
    data_dir: str | os.PathLike[str],
    *,
    block_size: int,
    seed: int,
    epoch_offsets: bool,
    positions: int,
    split: str = "train",
) -> dict:
    """Build the index of the token shards in `data_dir` that a run with these settings reads,
    covering `positions` global positions (the sample_index stage, and callers of
    `run_pretraining` outside the pipeline); returns its header."""
    max_offset = max_window_offset(block_size, epoch_offsets)
    dataset = TokenDataset(data_dir, split, block_size, max_offset)
    return build_sample_index(
        out_dir,
        n_windows=len(dataset),
        seed=seed,
        max_offset=max_offset,
        epochs=epochs_for(positions, max(1, len(dataset))),
        block_size=block_size,
        data_fingerprint=dataset.index.fingerprint,
    )


def _read_header(path: Path) -> dict:
    try:
        header = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no sample index at {path.parent} ({HEADER} is missing); run the sample_index stage"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err}); rerun the sample_index stage") from err
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path}: not an lmforge sample index; rerun the sample_index stage")
    if header.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: sample index version {header.get('version')} is not supported")
    return header
