"""A scaling law fitted to finished runs: the parametric L(N, D) (`parametric_fit.py`), each
budget's IsoFLOP parabola (`isoflop.py`), and bootstrap intervals for both.

The bootstrap resamples runs with replacement within each budget (the grid's design is kept)
and refits each resample from the point fit (warm start); it is bounded by `resamples`
(200 by default). Intervals are percentile intervals at `level`.

A fit that the runs cannot identify is refused in one line: fewer than 3 budgets, or a budget
with fewer than 3 model sizes (an IsoFLOP parabola needs three points, and L(N, D) needs N and D
to vary apart from each other).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.isoflop import IsoflopFrontier, isoflop_frontier
from lmforge.pipeline.scaling.parametric_fit import LawParameters, fit_law
from lmforge.pipeline.scaling.runs_input import FinishedRun

MIN_BUDGETS = 3
MIN_SIZES = 3
E_AT_ZERO = 0.01
"""A fitted E under this share of the lowest loss run is E at its bound, 0: the runs do not pin
the irreducible loss down, and the law keeps falling past them as steeply as across them (a
budget below the grid did not change that in `bench/scaling_law.py`'s runs)."""
LEVEL = 0.9
FIT_FORMAT = 1


@dataclass(slots=True)
class ScalingFit:
    law: LawParameters
    intervals: dict[str, tuple[float, float]]
    """Percentile intervals of E, A, B, alpha, beta, a, b."""
    frontier: IsoflopFrontier
    frontier_intervals: dict[str, tuple[float, float]]
    """Intervals of the IsoFLOP exponents a, b (where enough resamples bracket a minimum)."""
    samples: list[list[float]]
    """The resamples' parameters [E, A, B, alpha, beta]: intervals of anything derived."""
    runs: list[FinishedRun]
    level: float = LEVEL
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def largest_budget(self) -> float:
        return max(r.budget for r in self.runs)

    def to_json(self) -> dict:
        return {
            "format": FIT_FORMAT,
            "law": self.law.to_json(),
            "level": self.level,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "isoflop": self.frontier.to_json()
            | {"intervals": {k: list(v) for k, v in self.frontier_intervals.items()}},
            "bootstrap": {"resamples": len(self.samples), "seed": self.seed},
            "samples": self.samples,
            "largest_budget": self.largest_budget,
            "runs": [r.to_json() for r in self.runs],
            "notes": self.notes,
        }


def check_identified(runs: list[FinishedRun]) -> dict[float, list[FinishedRun]]:
    """The runs by budget; one line naming what to add when the fit is not identified."""
    by_budget: dict[float, list[FinishedRun]] = {}
    for run in runs:
        by_budget.setdefault(run.budget, []).append(run)
    if len(by_budget) < MIN_BUDGETS:
        have = ", ".join(f"{b:.3g}" for b in sorted(by_budget))
        raise ConfigError(
            f"the runs are at {len(by_budget)} compute budget(s) ({have}): add runs at "
            f"{MIN_BUDGETS - len(by_budget)} more budget(s) (`lmforge scaling plan --budgets`)"
        )
    for budget, group in sorted(by_budget.items()):
        sizes = len({r.params for r in group})
        if sizes < MIN_SIZES:
            raise ConfigError(
                f"budget {budget:.3g} has runs of {sizes} model size(s): add "
                f"{MIN_SIZES - sizes} more size(s) at that budget (`lmforge scaling plan "
                f"--budgets {budget:.3g} --sizes {MIN_SIZES}`)"
            )
    return by_budget


def _arrays(runs: list[FinishedRun]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([getattr(r, k) for r in runs]) for k in ("params", "tokens", "loss"))


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return (float(low), float(high))


def fit_scaling_law(
    runs: list[FinishedRun],
    *,
    resamples: int = 200,
    seed: int = 0,
    level: float = LEVEL,
    starts: int | None = None,
) -> ScalingFit:
    """The parametric law and the IsoFLOP frontier of `runs`, with bootstrap intervals."""
    by_budget = check_identified(runs)
    options = {"starts": starts} if starts else {}
    law = fit_law(*_arrays(runs), **options)
    frontier = isoflop_frontier(by_budget)
    rng = np.random.default_rng(seed)
    groups = list(by_budget.values())
    samples, iso_a, iso_b = [], [], []
    for _ in range(resamples):
        drawn = [group[i] for group in groups for i in rng.integers(0, len(group), len(group))]
        refit = fit_law(*_arrays(drawn), start=law)
        samples.append([float(refit.E), float(refit.A), float(refit.B), refit.alpha, refit.beta])
        resampled: dict[float, list[FinishedRun]] = {}
        for run in drawn:
            resampled.setdefault(run.budget, []).append(run)
        iso = isoflop_frontier(resampled)
        iso_a.append(iso.a if iso.a is not None else np.nan)
        iso_b.append(iso.b if iso.b is not None else np.nan)
    table = np.array(samples).reshape(-1, 5)
    intervals = {
        name: _interval(table[:, i], level)
        for i, name in enumerate(("E", "A", "B", "alpha", "beta"))
    }
    alpha, beta = table[:, 3], table[:, 4]
    intervals["a"] = _interval(beta / (alpha + beta), level)
    intervals["b"] = _interval(alpha / (alpha + beta), level)
    frontier_intervals = {
        "a": _interval(np.array(iso_a), level),
        "b": _interval(np.array(iso_b), level),
    }
    return ScalingFit(
        law=law,
        intervals=intervals,
        frontier=frontier,
        frontier_intervals=frontier_intervals,
        samples=samples,
        runs=runs,
        level=level,
        seed=seed,
        notes=[*frontier.notes, *_irreducible_loss_note(law, runs)],
    )


def _irreducible_loss_note(law: LawParameters, runs: list[FinishedRun]) -> list[str]:
    irreducible, lowest = law.E, min(r.loss for r in runs)
    if irreducible >= E_AT_ZERO * lowest:
        return []
    return [
        f"E fitted at about 0 ({irreducible:.2g}): the runs do not pin down the irreducible "
        "loss, so the law's loss past the largest budget is likely too low; a budget above the "
        "largest is what shows where the loss flattens"
    ]
