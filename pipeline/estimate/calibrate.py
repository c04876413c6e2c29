"""Fit the cost models' coefficients to measured runs: `lmforge estimate --calibrate`.

A sample is one measured run of one stage: `{"stage", "size", "measured", "source"}`, where
`size` is what the stage's cost model reads and `measured` holds `wall_s`, `store_bytes` and
`<process>_rss_mb` values. Samples come from the benchmarks' measuring functions
(`bench/estimate_cases.py`: clean at a few corpus sizes, training steps, small pipeline runs)
and from the `estimate` record of every stage already run in the workdir's store.

Each stage is fitted on its own: for every measured value, the cost model's linear form gives
one equation in its coefficients; they are solved by non-negative least squares on relative
errors (a 10 s stage and a 1,000 s one weigh alike), with a weak pull (`PRIOR_WEIGHT`) towards
the previous coefficients, so one that the samples cannot tell apart from another (a fixed cost
and a per-byte cost measured at one size only) keeps its earlier value instead of jumping to 0.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.estimate.cost_model import (
    COEFFICIENTS_FORMAT,
    KNOWN,
    cost_models,
    load_coefficients,
    local_coefficients,
    shipped_coefficients,
)

PRIOR_WEIGHT = 0.01
"""Weight of one coefficient's pull towards its previous value, against 1 per measured value."""


def fit_stage(stage: str, samples: list[dict], previous: dict[str, float]) -> dict[str, float]:
    """The stage's coefficients fitted to its samples (`previous` where they say nothing)."""
    import numpy as np
    from scipy.optimize import nnls

    module = cost_models()[stage]
    rows, targets = [], []
    for sample in samples:
        forms = module.cost(sample["size"]).measures()
        for measure, value in sample["measured"].items():
            form = forms.get(measure)
            if not form or not value or value <= 0:
                continue
            features = {k: v for k, v in form.items() if k != KNOWN and v}
            if features:
                rows.append(features)
                targets.append((value, form.get(KNOWN, 0.0)))
    names = sorted({name for row in rows for name in row})
    if not names:
        return dict(previous)
    a = [[row.get(n, 0.0) / y for n in names] for row, (y, _) in zip(rows, targets, strict=True)]
    b = [(y - known) / y for y, known in targets]
    for i, name in enumerate(names):  # the pull towards the previous value
        if previous.get(name, 0) > 0:
            a.append([PRIOR_WEIGHT / previous[name] if j == i else 0.0 for j in range(len(names))])
            b.append(PRIOR_WEIGHT)
    matrix = np.array(a)
    scale = np.abs(matrix).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(matrix / scale, np.array(b))
    fitted = dict(previous)
    fitted.update({n: float(x / s) for n, x, s in zip(names, solution, scale, strict=True)})
    return fitted


def fit(samples: list[dict], previous: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every stage's coefficients; stages without samples keep their previous ones."""
    stages = dict(previous["stages"])
    for stage in cost_models():
        mine = [s for s in samples if s["stage"] == stage]
        if mine:
            stages[stage] = fit_stage(stage, mine, stages.get(stage, {}))
    return stages


def samples_from_store(store: Path) -> list[dict]:
    """A sample per committed stage artifact whose manifest records its estimate."""
    found = []
    for manifest in sorted(store.glob("*/*/manifest.json")):
        data = json.loads(manifest.read_text(encoding="utf-8"))
        record = data.get("estimate") or {}
        if "size" not in record:
            continue
        measured = {"wall_s": record["measured_s"], **record.get("measured", {})}
        if record.get("measured_artifact_bytes"):
            measured["store_bytes"] = record["measured_artifact_bytes"]
        found.append(
            {
                "stage": data["stage"],
                "size": record["size"],
                "measured": measured,
                "source": str(manifest.parent),
            }
        )
    return found


def machine() -> str:
    """This machine in a few words: CPU model, cores, memory."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return f"{model}, {os.cpu_count()} CPUs, {memory:.0f} GiB"


def write_coefficients(path: Path, stages: dict, samples: list[dict], command: str) -> None:
    """The coefficients file, written whole or not at all."""
    counts: dict[str, int] = {}
    for sample in samples:
        counts[sample["stage"]] = counts.get(sample["stage"], 0) + 1
    data = {
        "format": COEFFICIENTS_FORMAT,
        "fitted_on": {
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
            "samples": counts,
        },
        "stages": {s: {k: float(f"{v:.6g}") for k, v in c.items()} for s, c in stages.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def bench_dir() -> Path:
    """The benchmarks of the source checkout this lmforge runs from."""
    import lmforge

    found = Path(lmforge.__file__).resolve().parents[1] / "bench"
    explicit = os.environ.get("LMFORGE_BENCH_DIR")
    path = Path(explicit) if explicit else found
    if not (path / "estimate_cases.py").is_file():
        raise LmforgeError(
            f"--calibrate runs the benchmarks in bench/ of a source checkout; none at {path}: "
            "run it from a clone of the repository (or set LMFORGE_BENCH_DIR)"
        )
    return path


def calibrate(workdir: Path, *, quick: bool = False) -> Path:
    """Measure this machine at a few small sizes, refit, write `<workdir>/estimate/`."""
    sys.path.insert(0, str(bench_dir()))
    import estimate_cases

    started = time.time()
    previous = load_coefficients(shipped_coefficients())
    samples = estimate_cases.calibration_samples(workdir / "estimate" / "runs", quick=quick)
    samples += samples_from_store(workdir / "store")
    path = local_coefficients(workdir)
    flags = " --quick" if quick else ""
    write_coefficients(
        path, fit(samples, previous), samples, f"lmforge estimate --calibrate{flags}"
    )
    kept = path.with_name("samples.json")  # what the fit saw, to check or refit it later
    kept.write_text(json.dumps(samples, indent=1) + "\n", encoding="utf-8")
    print(f"fitted {len(samples)} samples in {time.time() - started:.0f}s: {path} ({kept.name})")
    return path
