"""Fit the cost models' coefficients to measured runs: `lmforge estimate --calibrate`.

A sample is one measured run of one stage: `{"stage", "size", "measured", "source"}`, where
`size` is what the stage's cost model reads and `measured` holds `wall_s`, `store_bytes` and
`<process>_rss_mb` values. Samples come from the calibration cases (`calibration/cases.py`:
clean at a few corpus sizes, training steps, small pipeline runs...), each measured in a fresh
process, and from the `estimate` record of every stage already run in the workdir's store.

Each stage is fitted on its own: for every measured value, the cost model's linear form gives
one equation in its coefficients; they are solved by non-negative least squares on relative
errors (a 10 s stage and a 1,000 s one weigh alike), with a weak pull (`PRIOR_WEIGHT`) towards
the previous coefficients, so one that the samples cannot tell apart from another (a fixed cost
and a per-byte cost measured at one size only) keeps its earlier value instead of jumping to 0.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lmforge.pipeline.estimate.calibration.store_samples import samples_from_store
from lmforge.pipeline.estimate.coefficients import (
    load_coefficients,
    local_coefficients,
    shipped_coefficients,
    write_coefficients,
)
from lmforge.pipeline.estimate.cost_model import KNOWN
from lmforge.pipeline.estimate.stage_costs import cost_models

PRIOR_WEIGHT = 0.01
"""Weight of one coefficient's pull towards its previous value, against 1 per measured value."""


def fit_stage(stage: str, samples: list[dict], previous: dict[str, float]) -> dict[str, float]:
    """The stage's coefficients fitted to its samples (`previous` where they say nothing)."""
    import numpy as np
    from scipy.optimize import nnls

    model = cost_models()[stage]
    rows, targets = [], []
    for sample in samples:
        forms = model.cost(sample["size"]).measures()
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


def calibrate(workdir: Path, *, quick: bool = False) -> Path:
    """Measure this machine at a few small sizes, refit, write `<workdir>/estimate/`."""
    from lmforge.pipeline.estimate.calibration.case_runner import calibration_samples

    started = time.time()
    previous = load_coefficients(shipped_coefficients())
    samples = calibration_samples(workdir / "estimate" / "runs", quick=quick)
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
