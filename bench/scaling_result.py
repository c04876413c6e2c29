"""The scaling-law bench's JSON line (`scaling_law.py`): the law and its frontier's exponents,
the held-out run's measured loss against the law's prediction (`rel_error`) and against a naive
extrapolation of the grid's best losses (`frontier_baseline`), and the machine it ran on."""

from __future__ import annotations

import datetime
import math
from pathlib import Path


def frontier_baseline(runs: list[dict], budget: float) -> float:
    """The naive extrapolation: each budget's best loss, regressed linearly on log C (least
    squares), read at `budget`."""
    best: dict[float, float] = {}
    for run in runs:
        b = float(run["budget"])
        best[b] = min(best.get(b, math.inf), float(run["loss"]))
    if len(best) < 2:
        raise ValueError("the baseline needs the best losses of 2 budgets or more")
    xs = [math.log(b) for b in best]
    ys = list(best.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my + slope * (math.log(budget) - mx)


def rel_error(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured


def result_line(
    *,
    budgets: list[float],
    grid: list[dict],
    fit: dict,
    heldout: dict,
    wall_s: float,
    machine: str,
    command: str,
) -> dict:
    """The bench's JSON line. `grid`: the fitted runs ({budget, params, tokens, loss}); `fit`:
    the fit's `fit.json`; `heldout`: {budget, params, tokens, train_tokens, n_star,
    predicted_loss, measured_loss}, `train_tokens` the training split's (`heldout_epochs`: how
    many times the held-out run read it, which the law does not price)."""
    law, intervals = fit["law"], fit["intervals"]
    sizes = [len({r["params"] for r in grid if r["budget"] == b}) for b in budgets]
    measured = heldout["measured_loss"]
    baseline = frontier_baseline(grid, heldout["budget"])
    return {
        "bench": "scaling_law",
        "budgets": [float(f"{b:.4g}") for b in budgets],
        "shapes_per_budget": sizes,
        "runs": len(grid),
        **{k: round(float(law[k]), 4) for k in ("E", "A", "B", "alpha", "beta")},
        "a": round(law["beta"] / (law["alpha"] + law["beta"]), 4),
        "a_interval": [round(v, 4) for v in intervals["a"]],
        "b": round(law["alpha"] / (law["alpha"] + law["beta"]), 4),
        "b_interval": [round(v, 4) for v in intervals["b"]],
        "heldout_budget": float(f"{heldout['budget']:.4g}"),
        "heldout_params": int(heldout["params"]),
        "n_star": int(round(heldout["n_star"])),
        "predicted_loss": round(heldout["predicted_loss"], 4),
        "measured_loss": round(measured, 4),
        "rel_error": round(rel_error(heldout["predicted_loss"], measured), 4),
        "baseline_rel_error": round(rel_error(baseline, measured), 4),
        "heldout_tokens": int(heldout["tokens"]),
        "heldout_epochs": round(heldout["tokens"] / heldout["train_tokens"], 2),
        "points": [[int(r["params"]), int(r["tokens"]), round(float(r["loss"]), 4)] for r in grid],
        "wall_s": round(wall_s, 1),
        "machine": machine,
        "date": datetime.date.today().isoformat(),
        "command": command,
    }


def machine_name() -> str:
    """`CPU model, N vCPU (family F model M)` from /proc/cpuinfo."""
    import os

    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name", "unknown CPU")
    family = (
        f" (family {fields['cpu family']} model {fields['model']})" if "model" in fields else ""
    )
    return f"{name}, {os.cpu_count()} vCPU{family}"
