"""`lmforge scaling plan`: for each compute budget C, K model shapes spread around the expected
optimum, each trained for D = C / (FLOPs per token) tokens.

Without a fit the expected optimum is Chinchilla's rule of about 20 tokens per parameter
(Hoffmann et al. 2022): the N whose C = 20 N x FLOPs per token; with one (`--fit`), the fit's
N*(C). The
K shapes' N are spread evenly on a log scale from N*/SPREAD to N* x SPREAD (an IsoFLOP profile
needs both sides of its minimum). A run's tokens are whole steps of the preset's batch, so a
budget is met to within half a step: at MIN_STEPS steps or more, within 1%.

A grid is refused, in one line before anything runs, when a shape would repeat the corpus more
than `max_epochs` times (Muennighoff et al. 2023: past about 4 epochs repeated tokens are worth
much less than new ones), when its smallest shape would be smaller than a model of one layer,
or when a run would be under MIN_STEPS steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from lmforge.model.config import ModelConfig
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.shapes import Shape, nearest_shape, shape_family

TOKENS_PER_PARAM = 20.0
"""Chinchilla's compute-optimal tokens per parameter: the optimum a grid centres on unfitted."""
SPREAD = 3.0
"""The grid's shapes span N*/SPREAD to N* x SPREAD."""
MIN_STEPS = 50
"""Fewer steps than this cannot meet a budget to 1% in whole steps."""
MAX_EPOCHS = 4.0


@dataclass(frozen=True, slots=True)
class Variant:
    """One run of the grid."""

    budget: float
    """The budget asked, in FLOPs."""
    shape: Shape
    steps: int
    tokens: int
    epochs: float
    """Passes over the corpus's training tokens (0 when its size is unknown)."""

    @property
    def flops(self) -> float:
        """The budget this run spends: its tokens at its FLOPs per token."""
        return self.tokens * self.shape.flops_per_token


def rule_optimum(family: list[Shape]) -> Callable[[float], float]:
    """N*(C) by the 20-tokens-per-parameter rule over the family's own FLOPs per token,
    interpolated on a log scale between its shapes."""
    points = sorted((TOKENS_PER_PARAM * s.params * s.flops_per_token, s.params) for s in family)

    def optimum(budget: float) -> float:
        logs = [(math.log(c), math.log(n)) for c, n in points]
        x = math.log(budget)
        for (c0, n0), (c1, n1) in zip(logs, logs[1:], strict=False):
            if c0 <= x <= c1 and c1 > c0:
                return math.exp(n0 + (n1 - n0) * (x - c0) / (c1 - c0))
        # Beyond the family: C ~ 120 N^2, so N grows as sqrt(C) from the nearest end.
        c, n = logs[0] if x < logs[0][0] else logs[-1]
        return math.exp(n + (x - c) / 2)

    return optimum


def parse_budgets(text: str) -> list[float]:
    """`--budgets 1e13,3e13,1e14`: FLOP counts."""
    from lmforge.pipeline.quantities import parse_count

    try:
        return [parse_count(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--budgets: {exc} (give FLOPs: 1e13,3e13,1e14)") from exc


def plan_grid(
    budgets: list[float],
    sizes: int,
    base: ModelConfig,
    batch_tokens: int,
    train_tokens: float | None,
    *,
    max_epochs: float = MAX_EPOCHS,
    optimum: Callable[[float], float] | None = None,
) -> list[Variant]:
    """The grid's runs, budget by budget, smallest shape first; a ConfigError (one line) for a
    grid that should not run."""
    if not budgets or any(not c > 0 for c in budgets):
        raise ConfigError("--budgets: give one or more positive FLOP counts (1e13,3e13,1e14)")
    if sizes < 1:
        raise ConfigError(f"--sizes must be >= 1, got {sizes}")
    family = shape_family(base)
    optimum = optimum or rule_optimum(family)
    aspect = base.d_model / base.n_layer
    variants = []
    for budget in sorted(budgets):
        centre = optimum(budget)
        if sizes == 1:
            targets = [centre]
        else:
            targets = [centre * SPREAD ** (2 * k / (sizes - 1) - 1) for k in range(sizes)]
        smallest = family[0]
        if targets[0] < smallest.params / math.sqrt(SPREAD):
            raise ConfigError(
                f"budget {budget:.3g} FLOPs: its smallest shape would have {targets[0]:.3g} "
                f"parameters, too small for a model of one layer ({smallest.label}: "
                f"{smallest.params:.3g}); raise the budget or ask fewer --sizes"
            )
        shapes: list[Shape] = []
        for target in targets:
            shape = nearest_shape(family, target, aspect)
            if shape not in shapes:
                shapes.append(shape)
        for shape in shapes:
            variants.append(_variant(budget, shape, batch_tokens, train_tokens, max_epochs))
    return variants


def _variant(
    budget: float, shape: Shape, batch_tokens: int, train_tokens: float | None, max_epochs: float
) -> Variant:
    steps = round(budget / shape.flops_per_token / batch_tokens)
    if steps < MIN_STEPS:
        raise ConfigError(
            f"budget {budget:.3g} FLOPs gives {shape.label} only {steps} steps of {batch_tokens} "
            f"tokens (at least {MIN_STEPS} meet a budget to 1%): raise the budget or lower "
            "train.global_batch_size"
        )
    tokens = steps * batch_tokens
    epochs = tokens / train_tokens if train_tokens else 0.0
    if epochs > max_epochs:
        raise ConfigError(
            f"budget {budget:.3g} FLOPs trains {shape.label} on {tokens:.3g} tokens, "
            f"{epochs:.1f} epochs of the corpus's {train_tokens:.3g} training tokens (more than "
            f"{max_epochs:g}: repeated tokens are worth less than new ones): lower the budget, "
            "add data, or allow it with --max-epochs"
        )
    return Variant(budget=budget, shape=shape, steps=steps, tokens=tokens, epochs=epochs)


def train_overrides(train: dict, steps: int) -> list[str]:
    """The `train.*` settings of a run of `steps` steps: warm-up and the sequence-level phase
    shrunk where the preset's would not fit in it."""
    found = [f"train.max_steps={steps}"]
    if train.get("warmup_steps", 0) > steps // 10:
        found.append(f"train.warmup_steps={max(1, steps // 10)}")
    if train.get("sequence_unlikelihood", 0) and train["sequence_unlikelihood_steps"] > steps // 4:
        found.append(f"train.sequence_unlikelihood_steps={max(1, steps // 4)}")
    return found
