"""Chinchilla's parametric scaling law, fitted as Hoffmann et al. 2022 (approach 3) and the
replication of Besiroglu et al. 2024 fit it:

    L(N, D) = E + A / N^alpha + B / D^beta

in log space, log L = LSE(a - alpha log N, b - beta log D, e) with A = exp(a), B = exp(b),
E = exp(e), minimising the sum of Huber losses (delta = 1e-3) of the log residuals with
L-BFGS-B from a grid of starts. Besiroglu et al. traced Hoffmann's too-narrow intervals and
misfit to an optimiser stopped early: the gradient here is exact and the tolerances tight.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

HUBER_DELTA = 1e-3
START_GRID = {
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
}
"""Hoffmann et al.'s grid of initialisations (4,500 starts)."""
BEST_STARTS = 16
"""L-BFGS runs from this many of the grid's starts, those of the lowest objective."""
EXPONENT_BOUNDS = (1e-3, 4.0)
WARM_TOLERANCE = 1e-11
"""A warm-started resample's relative tolerance on the objective: it starts near its optimum."""


@dataclass(frozen=True, slots=True)
class LawParameters:
    """L(N, D) = E + A / N^alpha + B / D^beta."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray | float:
        return self.E + self.A / np.power(n, self.alpha) + self.B / np.power(d, self.beta)

    @property
    def a(self) -> float:
        """Exponent of N*(C) ~ C^a under C = 6 N D: beta / (alpha + beta)."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of D*(C) ~ C^b: alpha / (alpha + beta)."""
        return self.alpha / (self.alpha + self.beta)

    def as_vector(self) -> np.ndarray:
        return np.array([np.log(self.E), np.log(self.A), np.log(self.B), self.alpha, self.beta])

    @classmethod
    def from_vector(cls, x: np.ndarray) -> LawParameters:
        e, a, b, alpha, beta = (float(v) for v in x)
        return cls(E=np.exp(e), A=np.exp(a), B=np.exp(b), alpha=alpha, beta=beta)

    def to_json(self) -> dict[str, float]:
        return {
            "E": self.E,
            "A": self.A,
            "B": self.B,
            "alpha": self.alpha,
            "beta": self.beta,
            "a": self.a,
            "b": self.b,
        }


def _objective(x: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray):
    """The summed Huber loss of the log residuals, and its exact gradient."""
    e, a, b, alpha, beta = x
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    top = terms.max(axis=0)
    weights = np.exp(terms - top)
    total = weights.sum(axis=0)
    predicted = top + np.log(total)
    weights /= total  # d predicted / d each term
    r = predicted - log_l
    small = np.abs(r) <= HUBER_DELTA
    loss = np.where(small, 0.5 * r**2, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA))
    dr = np.where(small, r, HUBER_DELTA * np.sign(r))
    grad = np.array(
        [
            np.sum(dr * weights[2]),
            np.sum(dr * weights[0]),
            np.sum(dr * weights[1]),
            np.sum(dr * weights[0] * -log_n),
            np.sum(dr * weights[1] * -log_d),
        ]
    )
    return float(loss.sum()), grad


def _grid_objectives(starts: np.ndarray, log_n, log_d, log_l) -> np.ndarray:
    """The objective at every start at once (no gradient), to pick the starts worth running."""
    e, a, b, alpha, beta = (starts[:, i : i + 1] for i in range(5))
    floor = np.broadcast_to(e, (len(e), len(log_n)))
    terms = np.stack([a - alpha * log_n, b - beta * log_d, floor])
    predicted = np.logaddexp.reduce(terms, axis=0)
    r = np.abs(predicted - log_l)
    loss = np.where(r <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (r - 0.5 * HUBER_DELTA))
    return loss.sum(axis=1)


def _minimise(x0: np.ndarray, data: tuple, tolerance: float = 1e-15) -> tuple[np.ndarray, float]:
    from scipy.optimize import minimize

    bounds = [(None, None)] * 3 + [EXPONENT_BOUNDS] * 2
    start = np.array(x0, dtype=float)
    start[3:] = np.clip(start[3:], *EXPONENT_BOUNDS)
    result = minimize(
        _objective,
        start,
        args=data,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 2000, "ftol": tolerance, "gtol": tolerance * 1e3},
    )
    return result.x, float(result.fun)


def fit_law(
    params: np.ndarray,
    tokens: np.ndarray,
    loss: np.ndarray,
    start: LawParameters | None = None,
    *,
    starts: int = BEST_STARTS,
) -> LawParameters:
    """The law fitted to runs of `params` (N), `tokens` (D) and validation `loss` (nats per
    token): from the `starts` best of the grid's starts, or from `start` alone (a bootstrap
    resample warm-started from the point fit, to a looser tolerance)."""
    data = (np.log(params), np.log(tokens), np.log(loss))
    if start is not None:
        candidates, tolerance = [start.as_vector()], WARM_TOLERANCE
    else:
        grid = np.array(list(itertools.product(*START_GRID.values())), dtype=float)
        grid[:, 3:] = np.clip(grid[:, 3:], *EXPONENT_BOUNDS)
        order = np.argsort(_grid_objectives(grid, *data))
        candidates, tolerance = list(grid[order[:starts]]), 1e-15
    best, best_value = None, np.inf
    # One BLAS thread: L-BFGS-B's vectors have 5 entries, and a multi-threaded BLAS spends its
    # time waking threads (a toy fit on 2 busy CPUs: 40 s of wall time instead of 1.5).
    import scipy.optimize  # noqa: F401  (its BLAS loaded before the limit is set)

    with threadpool_limits(limits=1, user_api="blas"):
        for x0 in candidates:
            x, value = _minimise(x0, data, tolerance)
            if value < best_value:
                best, best_value = x, value
    return LawParameters.from_vector(best)
