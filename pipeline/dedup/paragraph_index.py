"""Write one read unit's paragraph index (`paragraph_keys.npy` + `paragraph_rows.npy`, beside
the unit's dedup index, `index.py`) batch by batch: hashes go to scratch files as batches
arrive, and `close` sorts them (12 bytes a unit hash), so a filter task never holds more."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lmforge.pipeline.dedup.index import unit_dir
from lmforge.pipeline.dedup.index_writer import SCRATCH
from lmforge.pipeline.filters.dedup_paragraph import ParagraphDedupConfig, unit_hashes_of_batch


class ParagraphIndexWriter:
    """`add` batches of (unit hash, row) pairs, rows counted from the unit's first document."""

    def __init__(self, directory: Path, unit: int) -> None:
        self.out = unit_dir(directory, unit)
        self.out.mkdir(parents=True, exist_ok=True)
        self.pairs = 0
        self._keys = (self.out / f"paragraph_keys{SCRATCH}").open("wb")
        self._rows = (self.out / f"paragraph_rows{SCRATCH}").open("wb")

    def add(self, hashes: np.ndarray, rows: np.ndarray) -> None:
        self._keys.write(np.ascontiguousarray(hashes, "<u8").tobytes())
        self._rows.write(np.ascontiguousarray(rows, "<u4").tobytes())
        self.pairs += len(hashes)

    def close(self) -> None:
        self._keys.close()
        self._rows.close()
        keys = np.fromfile(self.out / f"paragraph_keys{SCRATCH}", "<u8")
        rows = np.fromfile(self.out / f"paragraph_rows{SCRATCH}", "<u4")
        order = np.argsort(keys, kind="stable")
        np.save(self.out / "paragraph_keys.npy", keys[order])
        np.save(self.out / "paragraph_rows.npy", rows[order])
        for name in ("paragraph_keys", "paragraph_rows"):
            (self.out / f"{name}{SCRATCH}").unlink()


class ParagraphHashing:
    """A filter task's side of paragraph dedup: the unit hashes of each batch of survivors into
    the read unit's paragraph index, and the CPU time it took (nothing when it is off)."""

    def __init__(self, directory: Path, unit: int, cfg: ParagraphDedupConfig) -> None:
        self.cfg = cfg
        self.writer = ParagraphIndexWriter(directory, unit) if cfg.enabled else None
        self.cpu_seconds = 0.0

    @property
    def pairs(self) -> int:
        return self.writer.pairs if self.writer is not None else 0

    def add(self, first_row: int, texts: list[str]) -> None:
        """The survivors `texts`, the first of them at row `first_row` of the read unit."""
        if self.writer is None:
            return
        started = time.process_time()
        hashes, rows = unit_hashes_of_batch(texts, self.cfg)
        self.writer.add(hashes, rows + first_row)
        self.cpu_seconds += time.process_time() - started

    def close(self) -> None:
        if self.writer is not None:
            started = time.process_time()
            self.writer.close()
            self.cpu_seconds += time.process_time() - started
