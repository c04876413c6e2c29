"""Per-task completion markers, so an interrupted stage redoes only its unfinished tasks.

A task writes its outputs, then its marker, atomically and durably (`lmforge.durable`), so
a marker that exists is complete and vouches for every output written before it. The marker holds
the task's result as JSON: a resumed run reads the result back instead of rerunning the task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lmforge.durable import AtomicFile, write_atomic


def mark_done(path: str | Path, result: Any) -> None:
    """Record a finished task and its (JSON-serialisable) result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(result, sort_keys=True).encode("utf-8"))


def done_result(path: str | Path) -> Any | None:
    """The result a finished task recorded, or None when it did not finish."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save_array(path: str | Path, array: np.ndarray) -> None:
    """`np.save`, atomically: the file exists only once it is whole."""
    with AtomicFile(path) as out:
        np.save(out.handle, array)
