"""Write one read unit's dedup index (`pipeline/dedup/index.py` describes the files) batch by
batch, so a filter task holds one batch of signatures, never its whole unit's: a compressed
source file is read whole by one task, however big it is.

Signatures and band keys go to scratch files as batches arrive; `close` sorts the exact hashes
(8 bytes a document) and each band's keys in turn (12 bytes a document, one band at a time).
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import numpy as np

from lmforge.pipeline.dedup.index import unit_dir
from lmforge.pipeline.filters.minhash import EMPTY

SCRATCH = ".scratch"
"""Suffix of the scratch files (removed by `close`; a rerun truncates those of a killed one)."""


class UnitIndexWriter:
    """`add` batches of row-aligned ids, exact hashes, signatures and band keys, then `close`."""

    def __init__(self, directory: Path, unit: int, num_perm: int | None, bands: int | None):
        """`num_perm`/`bands` None: near dedup is off (no signatures, no band keys)."""
        self.out = unit_dir(directory, unit)
        self.out.mkdir(parents=True, exist_ok=True)
        self.near = num_perm is not None and bands is not None
        self.num_perm, self.bands = num_perm or 0, bands or 0
        self.rows = 0
        self._id_bytes = 0
        self._offsets: list[np.ndarray] = [np.zeros(1, np.int64)]
        self._hashes: list[np.ndarray] = []
        self._files = ExitStack()
        self._ids = self._files.enter_context((self.out / "ids.bin").open("wb"))
        self._scratch: dict[str, BinaryIO] = {}
        if self.near:
            names = ["signatures", "valid", *(f"band{b}" for b in range(self.bands))]
            for name in names:
                path = self.out / f"{name}{SCRATCH}"
                self._scratch[name] = self._files.enter_context(path.open("wb"))

    def add(
        self,
        ids: list[str],
        exact_hashes: np.ndarray,
        signatures: np.ndarray | None,
        band_keys: np.ndarray | None,
    ) -> None:
        encoded = [i.encode("utf-8", errors="surrogateescape") for i in ids]
        ends = self._id_bytes + np.cumsum([len(e) for e in encoded], dtype=np.int64)
        self._ids.write(b"".join(encoded))
        if len(ends):
            self._id_bytes = int(ends[-1])
            self._offsets.append(ends)
        self._hashes.append(np.asarray(exact_hashes, np.uint64))
        if self.near and len(ids):
            assert signatures is not None and band_keys is not None
            self._scratch["signatures"].write(np.ascontiguousarray(signatures, "<u4").tobytes())
            valid = np.flatnonzero(signatures[:, 0] != EMPTY)
            self._scratch["valid"].write((valid + self.rows).astype("<u4").tobytes())
            for band in range(self.bands):
                keys = np.ascontiguousarray(band_keys[valid, band], "<u8")
                self._scratch[f"band{band}"].write(keys.tobytes())
        self.rows += len(ids)

    def close(self) -> None:
        self._files.close()
        np.save(self.out / "id_offsets.npy", np.concatenate(self._offsets))
        hashes = np.concatenate(self._hashes) if self._hashes else np.zeros(0, np.uint64)
        order = np.argsort(hashes, kind="stable")
        np.save(self.out / "exact_keys.npy", hashes[order])
        np.save(self.out / "exact_rows.npy", order.astype(np.uint32))
        del hashes, order
        if not self.near:
            return
        self._write_signatures()
        self._write_bands()
        for name in self._scratch:
            (self.out / f"{name}{SCRATCH}").unlink()

    def _write_signatures(self) -> None:
        with open(self.out / "signatures.npy", "wb") as out:
            _header(out, (self.rows, self.num_perm), "<u4")
            with open(self.out / f"signatures{SCRATCH}", "rb") as scratch:
                shutil.copyfileobj(scratch, out, 1 << 20)

    def _write_bands(self) -> None:
        valid = np.fromfile(self.out / f"valid{SCRATCH}", "<u4")
        shape = (self.bands, len(valid))
        with (
            open(self.out / "band_keys.npy", "wb") as keys_out,
            open(self.out / "band_rows.npy", "wb") as rows_out,
        ):
            _header(keys_out, shape, "<u8")
            _header(rows_out, shape, "<u4")
            for band in range(self.bands):
                keys = np.fromfile(self.out / f"band{band}{SCRATCH}", "<u8")
                order = np.argsort(keys, kind="stable")
                keys_out.write(keys[order].tobytes())
                rows_out.write(valid[order].tobytes())


def _header(out, shape: tuple[int, int], dtype: str) -> None:
    np.lib.format.write_array_header_1_0(
        out, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
    )


def write_unit_index(
    directory: Path,
    unit: int,
    ids: list[str],
    exact_hashes: np.ndarray,
    signatures: np.ndarray | None,
    band_keys: np.ndarray | None,
) -> None:
    """Write one unit's index in one batch (`signatures`/`band_keys` None: near dedup is off)."""
    near = signatures is not None and band_keys is not None
    writer = UnitIndexWriter(
        directory,
        unit,
        signatures.shape[1] if near else None,
        band_keys.shape[1] if near else None,
    )
    writer.add(ids, exact_hashes, signatures, band_keys)
    writer.close()
