"""The workdir layout. Several pipelines may run in one workdir at once: each stage's key is
claimed by a lease before it is computed (`engine/stage_leases`), so none is computed twice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.errors import LmforgeError


@dataclass(frozen=True, slots=True)
class Workdir:
    """Where a pipeline keeps everything: store/, MLflow store, run records, checkpoints, logs."""

    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def records(self) -> Path:
        return self.root / "pipeline_runs"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def ray_storage(self) -> Path:
        return self.root / "ray_storage"

    def create(self) -> Workdir:
        """Make the workdir's folders; a path that cannot be one is a one-line LmforgeError."""
        if self.root.exists() and not self.root.is_dir():
            raise LmforgeError(f"workdir={self.root} is a file; give a directory")
        try:
            for path in (self.root, self.records, self.checkpoints):
                path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LmforgeError(
                f"cannot use workdir={self.root} ({exc.strerror}: {exc.filename}); "
                "give a directory you can write to"
            ) from exc
        return self
