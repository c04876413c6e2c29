"""One step of `clean` as Ray tasks, skipping those an interrupted run of the same plan finished.

Every task commits its own completion marker once its outputs are whole
(`pipeline/storage/task_markers.py`), so a marker that exists vouches for the task's work and
holds its result. `run_unfinished` reads those results back, launches only the other tasks and
gathers them: a killed `clean` redoes only its unfinished tasks, whichever step it died in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.shared_dir import SharedDir

if TYPE_CHECKING:
    from ray import ObjectRef

    from lmforge.pipeline.storage.artifact_output import ArtifactOutput

log = logging.getLogger(__name__)

Task = TypeVar("Task")


@dataclass(frozen=True, slots=True)
class StepResults:
    """What a step's tasks returned."""

    results: list[Any]
    """Every task's result, in task order: read back for the tasks an interrupted run finished,
    gathered from Ray for the others."""
    ran: list[Any]
    """The results of the tasks this run launched, in task order."""

    @property
    def resumed(self) -> int:
        """How many tasks an interrupted run had finished."""
        return len(self.results) - len(self.ran)


def run_unfinished(
    step: str,
    tasks: Sequence[Task],
    recorded: Callable[[Task], Any | None],
    launch: Callable[[Task], ObjectRef],
    *,
    in_flight: Callable[[], int] | None = None,
) -> StepResults:
    """Run `step`'s tasks: `recorded(task)` is what a finished task left (None: it must run),
    `launch(task)` starts it as a Ray task. With `in_flight`, at most `in_flight()` tasks run at
    once, the bound read again before each launch (the cluster may grow or shrink); without,
    every unfinished task is launched before any is gathered."""
    results: list[Any] = [None] * len(tasks)
    ran: list[int] = []
    pending: dict[ObjectRef, int] = {}  # a launched task's result -> its place in `tasks`
    for place, task in enumerate(tasks):
        if (found := recorded(task)) is not None:
            results[place] = found
            continue
        while in_flight is not None and len(pending) >= in_flight():
            _gather_into(results, pending, _first_finished(list(pending)))
        pending[launch(task)] = place
        ran.append(place)
    _gather_into(results, pending, list(pending))
    if len(tasks) > len(ran):
        log.info(
            "clean %s: %d of %d tasks finished by an interrupted run, %d launched",
            step,
            len(tasks) - len(ran),
            len(tasks),
            len(ran),
        )
    return StepResults(results, [results[place] for place in ran])


def recorded_result(dirs: SharedDir, marker: Path, output: ArtifactOutput) -> dict | None:
    """What a task of an interrupted run recorded in `marker`, if the artifact files it wrote
    (its `files`, or its `file`) are all still there."""
    record = dirs.done_result(marker)
    if record is None:
        return None
    files = record["files"] if "files" in record else [record["file"]]
    return record if all(map(output.holds, files)) else None


def gather(refs: list[ObjectRef]) -> list:
    """ray.get, raising a task's own lmforge error (a bad source file) as it is."""
    import ray

    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, LmforgeError):
            raise exc.cause from None
        raise


def _first_finished(refs: list[ObjectRef]) -> list[ObjectRef]:
    import ray

    done, _ = ray.wait(refs, num_returns=1)
    return done


def _gather_into(results: list, pending: dict[ObjectRef, int], refs: list[ObjectRef]) -> None:
    """Put the results of `refs` (taken out of `pending`) in their places."""
    if not refs:
        return
    for ref, result in zip(refs, gather(refs), strict=True):
        results[pending.pop(ref)] = result
