"""A read unit's dedup index on disk, and random access to the indexes of all units.

`<dir>/u<unit>/` holds (numpy `.npy`, read back with `allow_pickle=False` and memory-mapped):

- `ids.bin` + `id_offsets.npy`: the survivors' ids (UTF-8, concatenated) in row order;
- `exact_keys.npy` + `exact_rows.npy`: the exact hashes sorted, with their rows;
- `band_keys.npy` + `band_rows.npy` (bands x documents with a signature): each band's keys
  sorted, with their rows;
- `signatures.npy` (rows x num_perm): the MinHash signatures in row order;
- `paragraph_keys.npy` + `paragraph_rows.npy`: the hashes of the documents' lines or paragraphs
  (each distinct one once a document, `paragraph_index.py`) sorted, with their rows.

A task reads the part of a key range it needs by binary search (`key_range`), a row's id or
signature by offset, so nothing is loaded whole.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lmforge.pipeline.dedup.sorted_sets import sorted_unique

KEY_SPACE = 1 << 64
ROW_BITS = 32
OFFSET_PAIR = struct.Struct("<qq")
"""Two consecutive entries of `id_offsets.npy`: where an id starts and ends in `ids.bin`."""


def node_of(unit: int | np.ndarray, row: int | np.ndarray) -> np.ndarray:
    """unit << 32 | row, as int64 (units and rows below 2**31)."""
    return (np.asarray(unit, np.int64) << ROW_BITS) | np.asarray(row, np.int64)


def split_node(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return nodes >> ROW_BITS, nodes & ((1 << ROW_BITS) - 1)


def unit_dir(directory: Path, unit: int) -> Path:
    return directory / f"u{unit:06d}"


def unit_index_files(directory: Path, unit: int) -> list[Path]:
    """The files `UnitIndexWriter` wrote for `unit`."""
    return sorted(p for p in unit_dir(directory, unit).iterdir() if p.is_file())


def key_ranges(partitions: int) -> list[tuple[int, int]]:
    """The 64-bit key space cut into `partitions` equal [lo, hi) ranges."""
    bounds = [KEY_SPACE * p // partitions for p in range(partitions + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


class IndexReader:
    """Memory-mapped access to the indexes of every unit under `directory`."""

    def __init__(self, directory: str | Path, fetch: Callable[[Path], Path] | None = None) -> None:
        """`fetch` turns a file's path under `directory` into a local path to read (a work
        directory shared through a bucket fetches it on first use); default: the path itself."""
        self.directory = Path(directory)
        self.fetch = fetch or (lambda path: path)
        self._arrays: dict[tuple[int, str], np.ndarray] = {}
        self._signature_files: dict[int, tuple[int, int, int]] = {}
        self._id_file_fds: dict[int, tuple[int, int, int]] = {}

    def _array(self, unit: int, name: str) -> np.ndarray:
        key = (unit, name)
        if key not in self._arrays:
            path = self.fetch(unit_dir(self.directory, unit) / name)
            if name == "ids.bin":
                empty = path.stat().st_size == 0  # numpy cannot map an empty file
                self._arrays[key] = np.zeros(0, np.uint8) if empty else np.memmap(path, "u1", "r")
            else:
                self._arrays[key] = np.load(path, mmap_mode="r", allow_pickle=False)
        return self._arrays[key]

    def exact_range(self, unit: int, lo: int, hi: int) -> np.ndarray:
        """(hashes, nodes) of the unit's documents with a hash in [lo, hi)."""
        keys, rows = self._array(unit, "exact_keys.npy"), self._array(unit, "exact_rows.npy")
        return self._slice(unit, keys, rows, lo, hi)

    def paragraph_range(self, unit: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(unit hashes, nodes) of the unit's lines or paragraphs with a hash in [lo, hi)."""
        keys = self._array(unit, "paragraph_keys.npy")
        return self._slice(unit, keys, self._array(unit, "paragraph_rows.npy"), lo, hi)

    def band_range(self, unit: int, band: int, lo: int, hi: int):
        """(keys, nodes) of the unit's documents whose key of `band` lies in [lo, hi)."""
        keys = self._array(unit, "band_keys.npy")
        rows = self._array(unit, "band_rows.npy")
        if keys.shape[1] == 0:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        return self._slice(unit, keys[band], rows[band], lo, hi)

    @staticmethod
    def _slice(unit: int, keys: np.ndarray, rows: np.ndarray, lo: int, hi: int):
        start = int(np.searchsorted(keys, np.uint64(lo), side="left"))
        stop = len(keys) if hi >= KEY_SPACE else int(np.searchsorted(keys, np.uint64(hi), "left"))
        return np.array(keys[start:stop]), node_of(unit, np.array(rows[start:stop]))

    def ids(self, nodes: np.ndarray) -> list[bytes]:
        """The ids of `nodes` (UTF-8 bytes: their order is the order of the strings).

        Read with `pread`, not through maps: duplicates are spread over every unit, and the
        kernel maps the pages around each page a map reads (fault-around), so a few thousand
        random ids would bring most of the corpus's ids into this process's resident memory."""
        units, rows = split_node(np.asarray(nodes, np.int64))
        out = []
        for unit, row in zip(units.tolist(), rows.tolist(), strict=True):
            ids_fd, offsets_fd, offsets_at = self._id_files(unit)
            start, end = OFFSET_PAIR.unpack(os.pread(offsets_fd, 16, offsets_at + 8 * row))
            out.append(os.pread(ids_fd, end - start, start))
        return out

    def _id_files(self, unit: int) -> tuple[int, int, int]:
        """(ids.bin descriptor, id_offsets.npy descriptor, where its data starts) of a unit."""
        if unit not in self._id_file_fds:
            ids_path = self.fetch(unit_dir(self.directory, unit) / "ids.bin")
            offsets_path = self.fetch(unit_dir(self.directory, unit) / "id_offsets.npy")
            at, shape, dtype = _npy_layout(offsets_path)
            if dtype != np.dtype("<i8") or len(shape) != 1:
                raise ValueError(f"{offsets_path}: not an int64 vector")
            self._id_file_fds[unit] = (
                os.open(ids_path, os.O_RDONLY),
                os.open(offsets_path, os.O_RDONLY),
                at,
            )
        return self._id_file_fds[unit]

    def fixed_width_ids(self, nodes: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
        """The ids of `nodes` as one fixed-width bytes array (NUL-padded), gathered unit by unit
        in numpy; each unit's id files are unmapped once read, so the mapped pages of all units
        never count in this process's memory at once."""
        units, rows = split_node(np.asarray(nodes, np.int64))
        starts = np.zeros(len(nodes), np.int64)
        lengths = np.zeros(len(nodes), np.int64)
        for unit in sorted_unique(units).tolist():
            pick = np.flatnonzero(units == unit)
            offsets = self._array(unit, "id_offsets.npy")
            starts[pick] = offsets[rows[pick]]
            lengths[pick] = offsets[rows[pick] + 1] - starts[pick]
            del offsets
            self._arrays.pop((unit, "id_offsets.npy"), None)
        width = max(1, int(lengths.max(initial=0)))
        out = np.zeros((len(nodes), width), np.uint8)
        columns = np.arange(width)
        for unit in sorted_unique(units).tolist():
            data = self._array(unit, "ids.bin")
            pick = np.flatnonzero(units == unit)
            for first in range(0, len(pick), chunk):
                part = pick[first : first + chunk]
                inside = columns < lengths[part, None]
                at = np.minimum(starts[part, None] + columns, max(0, len(data) - 1))
                out[part] = np.where(inside, data[at] if len(data) else 0, 0)
            del data
            self._arrays.pop((unit, "ids.bin"), None)
        return out.view(f"S{width}").ravel()

    def signatures(self, nodes: np.ndarray) -> np.ndarray:
        """The signatures of `nodes`, row-aligned.

        Read row by row with `pread`, not through a memory map: candidate pairs are spread over
        every unit, and mapped pages would count in this process's resident memory until the
        whole file had been touched. The rows of one unit are read in one list of `pread`s and
        joined, so numpy converts each unit once, not each row."""
        units, rows = split_node(np.asarray(nodes, np.int64))
        if not len(nodes):
            return np.zeros((0, 0), np.uint32)
        out = None
        for unit in sorted_unique(units).tolist():
            fd, offset, width = self._signature_file(unit)
            if out is None:
                out = np.empty((len(nodes), width), np.uint32)
            pick = np.flatnonzero(units == unit)
            size = width * 4
            starts = (offset + rows[pick] * size).tolist()
            data = b"".join([os.pread(fd, size, at) for at in starts])
            if len(data) != size * len(pick):
                raise ValueError(f"unit {unit}: signatures.npy is shorter than its rows")
            out[pick] = np.frombuffer(data, "<u4").reshape(len(pick), width)
        return out

    def _signature_file(self, unit: int) -> tuple[int, int, int]:
        """(file descriptor, data offset, values per row) of a unit's `signatures.npy`."""
        if unit not in self._signature_files:
            path = self.fetch(unit_dir(self.directory, unit) / "signatures.npy")
            offset, shape, dtype = _npy_layout(path)
            if dtype != np.dtype("<u4") or len(shape) != 2:
                raise ValueError(f"{path}: not a C-ordered uint32 matrix")
            self._signature_files[unit] = (os.open(path, os.O_RDONLY), offset, shape[1])
        return self._signature_files[unit]

    def close(self) -> None:
        for fd, _, _ in self._signature_files.values():
            os.close(fd)
        self._signature_files.clear()
        for ids_fd, offsets_fd, _ in self._id_file_fds.values():
            os.close(ids_fd)
            os.close(offsets_fd)
        self._id_file_fds.clear()

    def __del__(self) -> None:
        self.close()


def _npy_layout(path: Path) -> tuple[int, tuple[int, ...], np.dtype]:
    """(where the data starts, shape, dtype) of a C-ordered `.npy` file, from its header."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read_header(handle)
        if fortran:
            raise ValueError(f"{path}: Fortran-ordered")
        return handle.tell(), shape, dtype
