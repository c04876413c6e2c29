"""IsoFLOP profiles (Hoffmann et al. 2022, approach 2): at each budget, the loss of models of
several sizes trained on the same compute traces a valley in log N; a parabola fitted to it
gives that budget's optimal N. Fitting log N_opt against log C gives N*(C) ~ C^a; D_opt =
C / (FLOPs per token at N_opt), interpolated from the runs' own FLOPs per token, gives
D*(C) ~ C^b.

A parabola whose minimum falls outside the sizes run at its budget did not bracket the optimum;
that budget is left out of the frontier (and said so), since extrapolating a parabola is not a
measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class IsoflopProfile:
    budget: float
    n_opt: float | None
    """The parabola's minimum (None: not bracketed by the sizes run)."""
    d_opt: float | None
    loss_min: float | None
    coefficients: tuple[float, float, float]
    """loss = c2 (log N)^2 + c1 log N + c0."""


@dataclass(slots=True)
class IsoflopFrontier:
    profiles: list[IsoflopProfile]
    a: float | None
    b: float | None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "profiles": [
                {
                    "budget": p.budget,
                    "n_opt": p.n_opt,
                    "d_opt": p.d_opt,
                    "loss_min": p.loss_min,
                    "coefficients": list(p.coefficients),
                }
                for p in self.profiles
            ],
        }


def isoflop_profile(budget: float, runs: list) -> IsoflopProfile:
    """The parabola of one budget's runs in log N."""
    log_n = np.log([r.params for r in runs])
    loss = np.array([r.loss for r in runs])
    if len(set(log_n)) < 3:
        return IsoflopProfile(budget, None, None, None, (0.0, 0.0, 0.0))
    c2, c1, c0 = np.polyfit(log_n, loss, 2)
    coefficients = (float(c2), float(c1), float(c0))
    if c2 <= 0:
        return IsoflopProfile(budget, None, None, None, coefficients)
    x = -c1 / (2 * c2)
    if not log_n.min() <= x <= log_n.max():
        return IsoflopProfile(budget, None, None, None, coefficients)
    n_opt = float(np.exp(x))
    # FLOPs per token per parameter of the runs, interpolated at n_opt (about 6, and more
    # where attention weighs).
    order = np.argsort(log_n)
    ratio = np.array([r.flops / (r.tokens * r.params) for r in runs])[order]
    per_token = float(np.interp(x, log_n[order], ratio)) * n_opt
    return IsoflopProfile(
        budget, n_opt, budget / per_token, float(c0 - c1**2 / (4 * c2)), coefficients
    )


def isoflop_frontier(by_budget: dict) -> IsoflopFrontier:
    """Every budget's profile, and the exponents of N_opt and D_opt against C."""
    profiles = [isoflop_profile(budget, runs) for budget, runs in sorted(by_budget.items())]
    notes = [
        f"budget {p.budget:.3g}: its parabola's minimum is not among the sizes run (add a "
        "smaller or larger shape); left out of the frontier"
        for p in profiles
        if p.n_opt is None
    ]
    found = [p for p in profiles if p.n_opt is not None]
    if len(found) < 2:
        return IsoflopFrontier(profiles, None, None, notes)
    log_c = np.log([p.budget for p in found])
    a = float(np.polyfit(log_c, np.log([p.n_opt for p in found]), 1)[0])
    b = float(np.polyfit(log_c, np.log([p.d_opt for p in found]), 1)[0])
    return IsoflopFrontier(profiles, a, b, notes)
