"""Making a directory survive a crash: fsync of its files and directories, a durable rename.

A rename publishes a directory atomically only if its content reached the disk first: fsync every
file and directory of the tree, rename, then fsync the parent so the rename itself is durable.
Used by the artifact store and by training checkpoints.
"""

from __future__ import annotations

import os
from pathlib import Path

from lmforge.durable import fsync_dir


def fsync_tree(root: str | Path) -> None:
    """fsync every file and directory under `root`, `root` last."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_dir(dirpath)


def durable_replace(source: str | Path, target: str | Path) -> None:
    """Rename `source` (already fsynced) to `target` and fsync the directories involved."""
    os.replace(source, target)
    fsync_dir(Path(target).parent)
    if Path(source).parent != Path(target).parent:
        fsync_dir(Path(source).parent)
