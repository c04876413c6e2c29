"""The workdir layout and its lock: one live pipeline per workdir at a time."""

from __future__ import annotations

import fcntl
import os
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


class WorkdirLock:
    """An exclusive flock on `<workdir>/.lock`, released by the kernel even on SIGKILL."""

    def __init__(self, workdir: Workdir) -> None:
        self.path = workdir.root / ".lock"
        self._fd: int | None = None

    def __enter__(self) -> WorkdirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise LmforgeError(
                f"another lmforge pipeline is running in {self.path.parent}; wait for it to "
                "finish or use another workdir=DIR"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
