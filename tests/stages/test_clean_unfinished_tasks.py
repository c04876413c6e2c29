"""A step of `clean` reads back the tasks an interrupted run finished (their completion markers),
launches only the others as Ray tasks, each committing its own marker, and gives every result in
task order."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.stages.clean.unfinished_tasks import run_unfinished
from lmforge.pipeline.storage.shared_dir import SharedDir

pytestmark = pytest.mark.slow  # real Ray tasks


def square_task(dirs: SharedDir, pause_s: float = 0.0):
    """A Ray task squaring `n` and committing its marker; it reports whether the previous
    task's marker existed when it started."""
    import ray

    def square(n: int) -> dict:  # defined here, so Ray ships it by value (no test module import)
        done = Path(dirs.root) / "done"
        previous_done = n == 0 or dirs.done_result(done / f"square-{n - 1:05d}.json") is not None
        time.sleep(pause_s)
        result = {"n": n, "square": n * n, "ran": "now", "previous_done": previous_done}
        dirs.mark_done(done / f"square-{n:05d}.json", result)
        return result

    return ray.remote(square).options(num_cpus=1)


def failing_task():
    import ray

    def fail(n: int) -> dict:
        raise LmforgeError(f"source {n} is corrupt: replace it")

    return ray.remote(fail).options(num_cpus=1)


def marker(dirs: SharedDir, n: int) -> Path:
    """Where `square_task` commits task `n`."""
    return Path(dirs.root) / "done" / f"square-{n:05d}.json"


def test_finished_tasks_are_read_back_and_only_the_others_run(local_ray, tmp_path):
    dirs = SharedDir(str(tmp_path))
    for n in (1, 3):  # an interrupted run finished these
        dirs.mark_done(marker(dirs, n), {"n": n, "square": n * n, "ran": "earlier"})
    task, launched = square_task(dirs), []

    def launch(n: int):
        launched.append(n)
        return task.remote(n)

    step = run_unfinished("square", range(6), lambda n: dirs.done_result(marker(dirs, n)), launch)

    assert [r["square"] for r in step.results] == [0, 1, 4, 9, 16, 25]
    assert [r["ran"] for r in step.results] == ["now", "earlier", "now", "earlier", "now", "now"]
    assert launched == [0, 2, 4, 5]
    assert [r["n"] for r in step.ran] == [0, 2, 4, 5]
    assert step.resumed == 2
    assert [dirs.done_result(marker(dirs, n)) for n in range(6)] == step.results

    again = run_unfinished("square", range(6), lambda n: dirs.done_result(marker(dirs, n)), launch)
    assert launched == [0, 2, 4, 5], "a finished step launches nothing"
    assert again.results == step.results and again.ran == [] and again.resumed == 6


def test_no_more_tasks_run_at_once_than_in_flight_allows(local_ray, tmp_path):
    dirs = SharedDir(str(tmp_path))
    task = square_task(dirs, pause_s=0.3)  # two CPUs: unbounded, task 1 starts during task 0

    step = run_unfinished(
        "square", range(4), lambda n: None, lambda n: task.remote(n), in_flight=lambda: 1
    )

    assert [r["previous_done"] for r in step.results] == [True] * 4
    assert step.resumed == 0


def test_a_tasks_own_error_is_raised_as_it_is(local_ray):
    task = failing_task()
    with pytest.raises(LmforgeError, match="source 1 is corrupt: replace it"):
        run_unfinished("fail", [1], lambda n: None, lambda n: task.remote(n))
