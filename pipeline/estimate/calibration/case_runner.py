"""Running the calibration cases: each size of each case in a fresh process, its samples kept
as they come, so a run that stops part-way measures again only what it had not.

    python -m lmforge.pipeline.estimate.calibration.case_runner CASE SIZE_JSON ROOT
        # one case at one size, in this process: its samples as the last line (JSON)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.estimate.calibration.cases import CASES, Case
from lmforge.pipeline.estimate.calibration.measures import CPUS


def run_cases(root: Path, sizes_of: Callable[[Case], tuple]) -> list[dict]:
    """Every case at the sizes `sizes_of` picks, each size in a fresh process (with its own
    local Ray where the case needs one), so no earlier measurement's memory counts in it.

    Each size's samples are kept in `root/measured/` as they come: a run that stops part-way
    (a long pipeline case killed) measures again only what it had not."""
    root.mkdir(parents=True, exist_ok=True)
    samples: list[dict] = []
    for case in CASES:
        for size in sizes_of(case):
            kept = measured_path(root, case.name, size)
            if kept.is_file():
                print(f"estimate: {case.name} at {size} measured earlier ({kept})", flush=True)
                samples += json.loads(kept.read_text(encoding="utf-8"))
                continue
            print(f"estimate: measuring {case.name} at {size}", flush=True)
            command = [sys.executable, "-m", __spec__.name, case.name, json.dumps(size), str(root)]
            done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"measuring {case.name} at {size} failed: see its output above")
            found = json.loads(done.stdout.strip().splitlines()[-1])
            for sample in found:
                sample["case"], sample["case_size"] = case.name, json.dumps(size)
            kept.parent.mkdir(exist_ok=True)
            write_atomic(kept, json.dumps(found))
            samples += found
    return samples


def measured_path(root: Path, case: str, size: Any) -> Path:
    """Where the samples of one case at one size are kept under `root`."""
    digest = hashlib.sha256(json.dumps([case, size]).encode()).hexdigest()[:16]
    return root / "measured" / f"{case}-{digest}.json"


def measure_here(name: str, size: Any, root: Path) -> list[dict]:
    """One case at one size in this process (the child `run_cases` starts), on the pipeline's
    own local runtime (`ensure_ray`): a plain `ray.init` would also start Ray Train's preemption
    watcher and placement-group cleaner, which the pipeline's runs do without, and time them."""
    from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray

    case = next(c for c in CASES if c.name == name)
    if not case.uses_ray:
        return case.measure(root, size)
    os.environ.setdefault("RAY_worker_niceness", "0")
    ensure_ray(None, num_cpus=CPUS)
    try:
        return case.measure(root, size)
    finally:
        shutdown_ray()


def calibration_samples(root: Path, *, quick: bool = False) -> list[dict]:
    """What `lmforge estimate --calibrate` fits on."""
    return run_cases(root, lambda case: case.quick if quick else case.calibration)


if __name__ == "__main__":
    found = measure_here(sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]))
    print(json.dumps(found))
