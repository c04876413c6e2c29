"""From a fitted law to a run: the compute-optimal N* and D* for a budget (or the smallest budget
that reaches a target loss), with intervals from the fit's bootstrap resamples, and what the
corpus can give it.

N* minimises L(N, C / f(N)) over N, where f(N) is the FLOPs per token of the preset's family of
shapes (`shapes.py`, interpolated on a log scale), so attention and the LM head are counted as
the grid's runs counted them. Each resample of the fit gives its own N*, D* and loss: their
percentiles are the intervals.

When the corpus holds fewer training tokens U than D*, the run repeats it: R = D*/U - 1
repetitions are worth U R* (1 - exp(-R / R*)) new tokens (Muennighoff et al. 2023, R* = 15.4),
which is nearly all of them up to about 4 epochs; the loss is predicted at that effective D.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.parametric_fit import LawParameters
from lmforge.pipeline.scaling.shapes import Shape

REPEAT_HALF_LIFE = 15.4
"""R*: Muennighoff et al. 2023's fitted decay constant of repeated tokens' worth."""
FREE_EPOCHS = 4.0
EXTRAPOLATION_WARNING = 10.0
"""Warn past this many times the largest budget fitted."""
GRID_POINTS = 2000
GPU_HOURS = re.compile(r"^\s*([0-9.eE+-]+)\s*(gpu[-_ ]?h|gpu[-_ ]?hours?|gpuh)\s*$", re.I)


def parse_budget(text: str, gpus_flops: float | None) -> float:
    """A budget in FLOPs (`1e18`), or in GPU-hours (`500gpuh`) at the cluster's GPU peak x MFU
    (`gpus_flops`: one GPU's sustained FLOP/s)."""
    match = GPU_HOURS.match(text)
    if match and not gpus_flops:
        raise ConfigError(
            f"--compute-budget {text}: GPU-hours need the cluster's GPUs: give "
            "--gpus-per-node and --gpu-peak-tflops (and --mfu)"
        )
    try:
        value = float(match.group(1)) * 3600 * gpus_flops if match else float(text)
    except ValueError as exc:
        raise ConfigError(
            f"--compute-budget {text}: give FLOPs (1e18) or GPU-hours (500gpuh)"
        ) from exc
    if not value > 0:
        raise ConfigError(f"--compute-budget must be > 0, got {text}")
    return value


@dataclass(slots=True)
class BudgetPlan:
    budget: float
    n_star: float
    d_star: float
    predicted_loss: float
    intervals: dict[str, tuple[float, float]]
    shape: Shape
    """The family's shape nearest N*: the run that is priced."""
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "compute_budget": self.budget,
            "n_star": self.n_star,
            "d_star": self.d_star,
            "predicted_loss": self.predicted_loss,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "shape": self.shape.label,
            "shape_params": self.shape.params,
            "warnings": self.warnings,
        }


def _laws(fit: dict) -> tuple[LawParameters, list[LawParameters]]:
    law = fit["law"]
    point = LawParameters(law["E"], law["A"], law["B"], law["alpha"], law["beta"])
    samples = [LawParameters(*row) for row in fit.get("samples", [])]
    return point, samples


def _n_grid(family: list[Shape], budget: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidate N over (and past) the family, and each one's FLOPs per token, interpolated on
    the family's ladder of shapes at the preset's aspect (one depth per width), whose FLOPs per
    token per parameter fall smoothly with N: the whole family's, shapes of one N at several
    depths, would make a jagged loss whose minimum sticks to one shape."""
    ladder = aspect_ladder(family)
    n = np.array([s.params for s in ladder], dtype=float)
    f = np.array([s.flops_per_token for s in ladder], dtype=float)
    upper = max(n.max(), math.sqrt(budget / 6))  # far enough for any optimum
    grid = np.geomspace(n.min(), upper, GRID_POINTS)
    # Past the ladder, FLOPs per token keep its largest shape's ratio to N.
    ratio = np.interp(np.log(grid), np.log(n), f / n)
    return grid, ratio * grid


def aspect_ladder(family: list[Shape]) -> list[Shape]:
    """For each width, the shape nearest the aspect of the family's smallest-N shapes' mode."""
    aspect = _aspect(family)
    best: dict[int, Shape] = {}
    for s in family:
        off = abs(math.log(s.d_model / s.n_layer / aspect))
        kept = best.get(s.d_model)
        if kept is None or off < abs(math.log(kept.d_model / kept.n_layer / aspect)):
            best[s.d_model] = s
    ladder, largest = [], 0
    for s in sorted(best.values(), key=lambda s: s.d_model):
        if s.params > largest:  # N rising with width
            ladder.append(s)
            largest = s.params
    return ladder


def _aspect(family: list[Shape]) -> float:
    """The preset's width-to-depth ratio: the geometric middle of the family's range."""
    ratios = [s.d_model / s.n_layer for s in family if s.n_layer > 1]
    return math.sqrt(min(ratios) * max(ratios)) if ratios else family[0].d_model


def optimum(law: LawParameters, budget: float, family: list[Shape]) -> tuple[float, float, float]:
    """(N*, D*, loss) of `law` at `budget` over the family's FLOPs per token."""
    n, per_token = _n_grid(family, budget)
    d = budget / per_token
    losses = law.loss(n, d)
    i = int(np.argmin(losses))
    return float(n[i]), float(d[i]), float(losses[i])


def fitted_optimum(ref: str, workdir, base) -> Callable[[float], float]:
    """N*(C) of the scaling fit `ref` (ID, latest or PATH) over the family of `base`'s shapes:
    the centre of a grid planned from a fit (`--fit`)."""
    from lmforge.pipeline.scaling.fit_record import load_fit
    from lmforge.pipeline.scaling.shapes import shape_family

    law = load_fit(ref, workdir)["law"]
    fitted = LawParameters(law["E"], law["A"], law["B"], law["alpha"], law["beta"])
    family = shape_family(base)
    return lambda budget: optimum(fitted, budget, family)[0]


def plan_budget(fit: dict, budget: float, family: list[Shape], level: float = 0.9) -> BudgetPlan:
    """N*, D* and the loss at `budget`, with intervals over the fit's resamples."""
    from lmforge.pipeline.scaling.shapes import nearest_shape

    point, samples = _laws(fit)
    n_star, d_star, loss = optimum(point, budget, family)
    tail = (1 - level) / 2 * 100
    intervals = {}
    if samples:
        found = np.array([optimum(s, budget, family) for s in samples])
        for i, name in enumerate(("n_star", "d_star", "predicted_loss")):
            low, high = np.percentile(found[:, i], [tail, 100 - tail])
            intervals[name] = (float(low), float(high))
    aspect = _aspect(family)
    warnings = []
    largest = float(fit.get("largest_budget") or 0)
    if largest and budget > EXTRAPOLATION_WARNING * largest:
        warnings.append(
            f"the budget is {budget / largest:.0f}x the largest one fitted ({largest:.3g} FLOPs): "
            "the law is extrapolated that far; fit runs at larger budgets to trust it"
        )
    return BudgetPlan(
        budget=budget,
        n_star=n_star,
        d_star=d_star,
        predicted_loss=loss,
        intervals=intervals,
        shape=nearest_shape(family, n_star, aspect),
        warnings=warnings,
    )


def budget_for_loss(fit: dict, target: float, family: list[Shape]) -> float:
    """The smallest budget whose compute-optimal run reaches `target` (bisection in log C)."""
    point, _ = _laws(fit)
    if target <= point.E:
        raise ConfigError(
            f"--target-loss {target}: at or below the fit's irreducible loss E = {point.E:.3g}, "
            "no budget reaches it; ask for a higher loss"
        )
    low, high = 1e6, 1e30
    if optimum(point, high, family)[2] > target:
        raise ConfigError(f"--target-loss {target}: not reached below 1e30 FLOPs by this fit")
    for _ in range(80):
        middle = math.sqrt(low * high)
        if optimum(point, middle, family)[2] > target:
            low = middle
        else:
            high = middle
    return high


@dataclass(frozen=True, slots=True)
class CorpusNeed:
    documents: float
    """Documents of this corpus that D* tokens take (after cleaning)."""
    epochs: float
    effective_tokens: float
    """What D* tokens are worth when the corpus repeats (= D* when it does not)."""
    note: str


def effective_tokens(tokens: float, unique: float) -> float:
    """Muennighoff et al. 2023: `tokens` drawn from `unique` tokens are worth
    U + U R* (1 - exp(-R / R*)), R = tokens / U - 1 repetitions."""
    if tokens <= unique:
        return tokens
    repeats = tokens / unique - 1
    return unique + unique * REPEAT_HALF_LIFE * (1 - math.exp(-repeats / REPEAT_HALF_LIFE))


def corpus_need(
    d_star: float, train_tokens: float, train_docs: float, law: LawParameters, n_star: float
) -> CorpusNeed:
    """How much of this corpus D* takes, and what repeating it costs in loss."""
    per_doc = train_tokens / max(1.0, train_docs)
    documents = d_star / per_doc
    epochs = d_star / train_tokens if train_tokens else math.inf
    effective = effective_tokens(d_star, train_tokens)
    if epochs <= 1:
        note = f"{documents:.3g} documents of this corpus ({epochs:.2f} of its training split)"
    else:
        cost = float(law.loss(n_star, effective) - law.loss(n_star, d_star))
        note = (
            f"this corpus gives {train_tokens:.3g} training tokens, fewer than D*: {epochs:.1f} "
            f"epochs, worth {effective:.3g} new tokens (Muennighoff et al. 2023; up to about "
            f"{FREE_EPOCHS:g} epochs are nearly as good as new data): loss +{cost:.3g} nats "
            f"over fresh data, or {documents - train_docs:.3g} more documents"
        )
    return CorpusNeed(documents, epochs, effective, note)
