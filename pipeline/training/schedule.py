"""Learning rate at each optimizer step: warmup + cosine (default) or inverse square root.

The seeds give no schedule (SEED-REQUIREMENTS B14); both are project choices from outside them.
`step` is 0-based: `learning_rate(0, ...)` is the rate of the first update. The rate is a pure
function of the step, so a resumed run needs no scheduler state.
"""

from __future__ import annotations

import math

from lmforge.pipeline.training.train_config import TrainConfig


def cosine_lr(step: int, *, lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """Linear warmup to `lr`, then half a cosine down to `min_lr` at `max_steps`, then flat.

    warmup:  lr * (step + 1) / warmup_steps                       for step < warmup_steps
    decay:   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,  p = (step - warmup) / (max - warmup)
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def inverse_sqrt_lr(step: int, *, lr: float, min_lr: float, warmup_steps: int) -> float:
    """The original transformer's schedule with an explicit peak (Vaswani et al. 2017, eq. 3):

        lrate = lr * min(n / warmup, sqrt(warmup / n)),  n = step + 1

    i.e. linear warmup to `lr` at n = warmup, then decay in 1/sqrt(n). The paper writes it as
    d_model^-0.5 * min(n^-0.5, n * warmup^-1.5), whose peak is d_model^-0.5 * warmup^-0.5; here the
    peak is `lr` instead. After warmup the rate never drops below `min_lr`.
    """
    n = step + 1
    if n < warmup_steps:
        return lr * n / warmup_steps
    return max(min_lr, lr * math.sqrt(warmup_steps / n))


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """The rate of update `step` under `cfg.schedule`."""
    if cfg.schedule == "cosine":
        return cosine_lr(
            step,
            lr=cfg.lr,
            min_lr=cfg.min_lr,
            warmup_steps=cfg.warmup_steps,
            max_steps=cfg.max_steps,
        )
    return inverse_sqrt_lr(step, lr=cfg.lr, min_lr=cfg.min_lr, warmup_steps=cfg.warmup_steps)


def rate_depends_on_max_steps(cfg: TrainConfig) -> bool:
    """Whether `train.max_steps` changes the rate of some step: a cosine decay stretches with it
    (unless it decays to the peak itself); warmup and inverse sqrt ignore it."""
    return cfg.schedule == "cosine" and cfg.min_lr != cfg.lr
