"""`lmforge sweep --early-stop`: which variants to stop, decided by Ray Tune's ASHA.

Each variant's pretraining scores a fixed validation slice every `train.eval_every` steps
(`val_loss`, logged to its MLflow run). The sweep hands every new figure to Ray Tune's
`ASHAScheduler` (asynchronous successive halving, on `val_loss`, lower is better, time in steps),
which answers CONTINUE or STOP; a STOP becomes a stop request to that variant's training
(`training.early_stop`).

Settings (docs/sweeps.md): the first rung is at `grace_period` steps (default: twice
`train.eval_every`), each next rung `reduction_factor` times further (default 2); at each rung a
variant whose loss is not within the best 1/`reduction_factor` of those that reached it is
stopped. `train.eval_every` defaults, in an early-stopping sweep, to a tenth of max_steps.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

from lmforge.pipeline.errors import ConfigError

REDUCTION_FACTOR = 2.0
EVALS_PER_RUN = 10
"""`train.eval_every`, when a sweep stops early and sets none: max_steps / this."""
GRACE_EVALS = 2
"""`grace_period`, when none is given: this many evaluations."""


@dataclass(frozen=True, slots=True)
class AshaSettings:
    """ASHA's settings, in training steps."""

    eval_every: int
    grace_period: int
    reduction_factor: float
    max_t: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def asha_settings(
    max_steps: int,
    eval_every: int = 0,
    grace_period: int | None = None,
    reduction_factor: float | None = None,
) -> AshaSettings:
    """The settings of a sweep over runs of `max_steps`; `eval_every` 0 takes the default."""
    every = eval_every or max(1, max_steps // EVALS_PER_RUN)
    grace = grace_period if grace_period is not None else min(max_steps, GRACE_EVALS * every)
    factor = REDUCTION_FACTOR if reduction_factor is None else reduction_factor
    if not 0 < grace <= max_steps:
        raise ConfigError(
            f"--grace-period {grace} must be between 1 and train.max_steps={max_steps}"
        )
    if grace < every:
        raise ConfigError(
            f"--grace-period {grace} is before the first val_loss (train.eval_every={every})"
        )
    if not factor > 1:
        raise ConfigError(f"--reduction-factor {factor} must be > 1")
    return AshaSettings(every, grace, factor, max_steps)


class EarlyStopper:
    """Ray Tune's ASHA scheduler, told each variant's val_loss as training logs it."""

    def __init__(self, settings: AshaSettings) -> None:
        from ray.tune.schedulers import ASHAScheduler

        self.settings = settings
        self.scheduler = ASHAScheduler(
            time_attr="step",
            metric="val_loss",
            mode="min",
            max_t=settings.max_t,
            grace_period=settings.grace_period,
            reduction_factor=settings.reduction_factor,
            stop_last_trials=False,  # a run at max_steps ends by itself
        )
        self._trials: dict[str, SimpleNamespace] = {}
        self._seen: dict[str, int] = {}

    def report(self, variant: str, step: int, val_loss: float) -> bool:
        """Tell ASHA the variant's val_loss at `step` (each step once); whether to stop it.
        A loss that is not finite (a diverging run) ranks last."""
        from ray.tune.schedulers import TrialScheduler

        if step <= self._seen.get(variant, 0):
            return False
        self._seen[variant] = step
        trial = self._trials.get(variant)
        if trial is None:
            trial = self._trials[variant] = SimpleNamespace(trial_id=variant)
            self.scheduler.on_trial_add(None, trial)
        loss = val_loss if math.isfinite(val_loss) else math.inf
        action = self.scheduler.on_trial_result(None, trial, {"step": step, "val_loss": loss})
        return action == TrialScheduler.STOP
