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
Peak memory is fitted as an envelope instead: no measured peak is predicted below what it was,
on the machine the coefficients are fitted on (a linear programme, `_upper_envelope`).
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
    """The stage's coefficients fitted to its samples (`previous` where they say nothing): time
    and bytes by least squares, memory as the lowest envelope over every measured peak."""
    model = cost_models()[stage]
    rows: dict[bool, list[tuple[dict, float, float]]] = {False: [], True: []}
    for sample in samples:
        forms = model.cost(sample["size"]).measures()
        for measure, value in sample["measured"].items():
            form = forms.get(measure)
            if not form or not value or value <= 0:
                continue
            features = {k: v for k, v in form.items() if k != KNOWN and v}
            if features:
                rows[measure.endswith("_rss_mb")].append((features, value, form.get(KNOWN, 0.0)))
    fitted = dict(previous)
    fitted.update(_least_squares(rows[False], previous))
    fitted.update(_upper_envelope(rows[True], previous))
    return fitted


def _least_squares(rows: list[tuple[dict, float, float]], previous: dict) -> dict[str, float]:
    """Non-negative least squares on relative errors, with the pull towards `previous`."""
    import numpy as np
    from scipy.optimize import nnls

    names = sorted({name for features, _, _ in rows for name in features})
    if not names:
        return {}
    a = [[features.get(n, 0.0) / y for n in names] for features, y, _ in rows]
    b = [(y - known) / y for _, y, known in rows]
    for i, name in enumerate(names):  # the pull towards the previous value
        if previous.get(name, 0) > 0:
            a.append([PRIOR_WEIGHT / previous[name] if j == i else 0.0 for j in range(len(names))])
            b.append(PRIOR_WEIGHT)
    matrix = np.array(a)
    scale = np.abs(matrix).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(matrix / scale, np.array(b))
    return {n: float(x / s) for n, x, s in zip(names, solution, scale, strict=True)}


def _upper_envelope(rows: list[tuple[dict, float, float]], previous: dict) -> dict[str, float]:
    """Memory coefficients that predict no measured peak below what it was, and overshoot the
    peaks as little as they can (the sum of relative excesses, with the same pull towards
    `previous`): an estimate that predicts too little memory is how a run ends out of memory.
    A linear programme: minimise sum_i (a_i x) / y_i + w sum_j |x_j / p_j - 1| subject to
    a_i x >= y_i - known_i, x >= 0."""
    import numpy as np
    from scipy.optimize import linprog

    names = sorted({name for features, _, _ in rows for name in features})
    if not names:
        return {}
    n = len(names)
    a = np.array([[features.get(name, 0.0) / y for name in names] for features, y, _ in rows])
    b = np.array([(y - known) / y for _, y, known in rows])
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    a = a / scale  # z_j = x_j * scale_j: columns of one magnitude
    pulled = [j for j, name in enumerate(names) if previous.get(name, 0) > 0]
    # Variables: z (n), then t_k >= |x_j / p_j - 1| for each pulled coefficient j.
    cost = np.concatenate([a.sum(axis=0), np.full(len(pulled), PRIOR_WEIGHT)])
    upper = [np.concatenate([-a_i, np.zeros(len(pulled))]) for a_i in a]
    bound = list(-b)
    for k, j in enumerate(pulled):
        ratio = np.zeros(n + len(pulled))
        ratio[j] = 1.0 / (scale[j] * previous[names[j]])
        ratio[n + k] = -1.0
        upper.append(ratio)  # x_j / p_j - 1 <= t_k
        bound.append(1.0)
        mirror = -ratio
        mirror[n + k] = -1.0
        upper.append(mirror)  # 1 - x_j / p_j <= t_k
        bound.append(-1.0)
    result = linprog(cost, A_ub=np.array(upper), b_ub=np.array(bound), bounds=(0, None))
    if not result.success:
        raise RuntimeError(f"the memory envelope did not solve: {result.message}")
    return {name: float(result.x[j] / scale[j]) for j, name in enumerate(names)}


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
