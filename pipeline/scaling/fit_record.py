"""Where a scaling fit goes: `fit.json` (the law, the IsoFLOP frontier, intervals, the
resamples and the runs), `fit.png` (loss against N per budget with the fitted curves, and the
frontier of optimal N against C), and an MLflow run holding both, in the workdir's experiment.

`lmforge estimate --fit ID|latest|PATH` reads `fit.json` back (`load_fit`); fits are kept
under `<workdir>/scaling/<id>/`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmforge.durable import write_atomic
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.law_fit import FIT_FORMAT, ScalingFit, fit_scaling_law
from lmforge.pipeline.scaling.parametric_fit import LawParameters
from lmforge.pipeline.scaling.runs_input import FinishedRun

FITS = "scaling"
"""The workdir's folder of fits, one `<id>/fit.json` each."""


@dataclass(frozen=True, slots=True)
class WrittenFit:
    path: Path
    summary: str


def optimal_params(law: LawParameters, budget: float, flops_per_param_token: float) -> float:
    """N*(C) in closed form (Hoffmann et al. 2022, eq. 4) for C = k N D: G (C / k)^a with
    G = (alpha A / (beta B))^(1 / (alpha + beta))."""
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1 / (law.alpha + law.beta))
    return g * (budget / flops_per_param_token) ** law.a


def flops_ratio(runs: list[FinishedRun]) -> float:
    """The runs' median FLOPs per token per parameter (6, and more where attention weighs)."""
    return float(np.median([r.flops / (r.tokens * r.params) for r in runs]))


def summary_lines(fit: ScalingFit) -> str:
    law, iv = fit.law, fit.intervals
    pct = f"{fit.level:.0%}"

    def span(name: str) -> str:
        low, high = iv[name]
        return f"[{low:.3g}, {high:.3g}]"

    lines = [
        f"L(N, D) = {law.E:.3g} + {law.A:.3g} / N^{law.alpha:.3f} + {law.B:.3g} / D^{law.beta:.3f}"
        f"   ({len(fit.runs)} runs, {len({r.budget for r in fit.runs})} budgets)",
        f"{pct} intervals: E {span('E')}, A {span('A')}, B {span('B')}, alpha {span('alpha')}, "
        f"beta {span('beta')}",
        f"N*(C) ~ C^{law.a:.3f} {span('a')}, D*(C) ~ C^{law.b:.3f} {span('b')} (parametric)",
    ]
    front = fit.frontier
    if front.a is not None:
        fa, fb = fit.frontier_intervals["a"], fit.frontier_intervals["b"]
        lines.append(
            f"N*(C) ~ C^{front.a:.3f} [{fa[0]:.3g}, {fa[1]:.3g}], D*(C) ~ C^{front.b:.3f} "
            f"[{fb[0]:.3g}, {fb[1]:.3g}] (IsoFLOP parabolas)"
        )
    lines += fit.notes
    return "\n".join(lines)


def plot_fit(fit: ScalingFit, path: Path) -> None:
    """Loss against N per budget (runs, the parametric law along the budget, the parabola), and
    optimal N against C (the parabolas' minima, the law's N*(C))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = flops_ratio(fit.runs)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    budgets = sorted({r.budget for r in fit.runs})
    colours = plt.cm.viridis(np.linspace(0, 0.85, len(budgets)))
    for budget, colour, profile in zip(budgets, colours, fit.frontier.profiles, strict=True):
        runs = [r for r in fit.runs if r.budget == budget]
        n = np.array([r.params for r in runs])
        left.scatter(n, [r.loss for r in runs], color=colour, label=f"C = {budget:.2g}")
        grid = np.geomspace(n.min() / 1.5, n.max() * 1.5, 60)
        left.plot(grid, fit.law.loss(grid, budget / (k * grid)), color=colour)
        c2, c1, c0 = profile.coefficients
        if c2 > 0:
            x = np.log(grid)
            left.plot(grid, c2 * x**2 + c1 * x + c0, color=colour, linestyle=":")
    left.set(xscale="log", xlabel="N (parameters costing FLOPs per token)", ylabel="val loss")
    left.legend(fontsize=8)
    left.set_title("IsoFLOP profiles: law (solid), parabolas (dotted)")
    found = [p for p in fit.frontier.profiles if p.n_opt is not None]
    right.scatter([p.budget for p in found], [p.n_opt for p in found], label="parabola minima")
    span = np.geomspace(min(budgets) / 3, max(budgets) * 30, 40)
    right.plot(span, [optimal_params(fit.law, c, k) for c in span], label="law's N*(C)")
    right.set(xscale="log", yscale="log", xlabel="C (FLOPs)", ylabel="optimal N")
    right.legend(fontsize=8)
    right.set_title("Compute-optimal frontier")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_fit(
    runs: list[FinishedRun],
    *,
    workdir: Path,
    out: Path | None = None,
    resamples: int = 200,
    seed: int = 0,
    mlflow: bool = True,
    tracking: dict | None = None,
    origin: dict | None = None,
    parent_run_id: str | None = None,
) -> WrittenFit:
    """Fit `runs` and write the fit's JSON, plot and MLflow run (nested under `parent_run_id`
    when given: a sweep's); `out` defaults to a new `<workdir>/scaling/fit-<time>/`. `origin`
    (the sweep, the corpus's cache keys) goes into the JSON as it is."""
    fit = fit_scaling_law(runs, resamples=resamples, seed=seed)
    out = out or workdir / FITS / time.strftime("fit-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    data = fit.to_json() | {"flops_per_param_token": flops_ratio(runs)} | (origin or {})
    path = out / "fit.json"
    plot_fit(fit, out / "fit.png")
    write_atomic(path, json.dumps(data, indent=1) + "\n")
    if mlflow:
        cluster = (tracking or {}).get("cluster", {})
        data["mlflow_run_id"] = log_fit_run(fit, out, workdir, cluster, parent_run_id)
        write_atomic(path, json.dumps(data, indent=1) + "\n")
    return WrittenFit(path, summary_lines(fit))


def log_fit_run(
    fit: ScalingFit, out: Path, workdir: Path, cluster: dict, parent_run_id: str | None = None
) -> str:
    """An MLflow run `scaling-fit` with the law's values, its intervals and the files."""
    from lmforge.pipeline.engine.tracking import (
        client,
        default_artifact_location,
        ensure_experiment,
        resolve_tracking_uri,
        store_creation_lock,
    )

    uri = resolve_tracking_uri(workdir, cluster.get("tracking_uri"))
    with store_creation_lock(uri):
        mlflow = client(uri)
        experiment = ensure_experiment(
            mlflow, cluster.get("experiment", "lmforge"), default_artifact_location(workdir, uri)
        )
    tags = {"lmforge.scaling": "fit"}
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    run = mlflow.create_run(experiment, run_name="scaling-fit", tags=tags)
    run_id = run.info.run_id
    for name, value in fit.law.to_json().items():
        mlflow.log_metric(run_id, name, float(value))
    for name, (low, high) in fit.intervals.items():
        mlflow.log_metric(run_id, f"{name}_low", low)
        mlflow.log_metric(run_id, f"{name}_high", high)
    mlflow.log_param(run_id, "runs", len(fit.runs))
    budgets = sorted({r.budget for r in fit.runs})
    mlflow.log_param(run_id, "budgets", ",".join(f"{b:.3g}" for b in budgets))
    mlflow.log_param(run_id, "resamples", len(fit.samples))
    mlflow.log_artifact(run_id, str(out / "fit.json"))
    mlflow.log_artifact(run_id, str(out / "fit.png"))
    mlflow.set_terminated(run_id, "FINISHED")
    return run_id


def load_fit(ref: str, workdir: Path) -> dict:
    """A fit's JSON by path, by id (`<workdir>/scaling/<id>`) or `latest`."""
    root = workdir / FITS
    if ref == "latest":
        found = sorted(root.glob("*/fit.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise ConfigError(
                f"no scaling fit in {root}: run `lmforge scaling fit` first or pass --fit PATH"
            )
        path = found[-1]
    else:
        path = Path(ref).expanduser()
        if path.is_dir():
            path = path / "fit.json"
        if not path.is_file():
            path = root / ref / "fit.json"
    if not path.is_file():
        raise ConfigError(f"--fit {ref}: no fit.json there nor in {root}/{ref}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FIT_FORMAT or "law" not in data:
        raise ConfigError(f"{path} is not a scaling fit of format {FIT_FORMAT}: refit it")
    data["path"] = str(path)
    return data
