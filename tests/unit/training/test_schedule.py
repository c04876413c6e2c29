"""Learning-rate schedules: warmup + cosine and the original transformer's inverse sqrt."""

from __future__ import annotations

import dataclasses
import math

import pytest

from lmforge.pipeline.training.schedule import (
    cosine_lr,
    inverse_sqrt_lr,
    learning_rate,
    rate_depends_on_max_steps,
)
from lmforge.pipeline.training.train_config import TrainConfig

COSINE = {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 10, "max_steps": 110}


def test_warmup_rises_linearly_to_the_peak():
    rates = [cosine_lr(s, **COSINE) for s in range(10)]
    assert rates[0] == pytest.approx(1e-4)
    assert rates[9] == pytest.approx(1e-3)
    steps = [b - a for a, b in zip(rates, rates[1:], strict=False)]
    assert all(d == pytest.approx(1e-4) for d in steps)


def test_cosine_decays_monotonically_to_min_lr_at_max_steps_and_stays_there():
    rates = [cosine_lr(s, **COSINE) for s in range(10, 111)]
    assert rates[0] == pytest.approx(1e-3)
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False))
    assert rates[-1] == pytest.approx(1e-4)
    assert cosine_lr(60, **COSINE) == pytest.approx(0.5 * (1e-3 + 1e-4))  # halfway
    assert cosine_lr(500, **COSINE) == pytest.approx(1e-4)


def test_inverse_sqrt_peaks_at_the_end_of_warmup_and_halves_at_four_times_warmup():
    kw = {"lr": 1e-3, "min_lr": 0.0, "warmup_steps": 100}
    assert inverse_sqrt_lr(49, **kw) == pytest.approx(0.5e-3)  # n = 50
    assert inverse_sqrt_lr(99, **kw) == pytest.approx(1e-3)  # n = warmup: the peak
    assert inverse_sqrt_lr(399, **kw) == pytest.approx(0.5e-3)  # n = 4 warmup
    assert inverse_sqrt_lr(9999, **kw) == pytest.approx(1e-3 * math.sqrt(100 / 10000))


def test_inverse_sqrt_matches_the_papers_formula_up_to_its_peak():
    d_model, warmup = 512, 4000
    paper_peak = d_model**-0.5 * warmup**-0.5
    for n in (1, 1000, 4000, 20000):
        paper = d_model**-0.5 * min(n**-0.5, n * warmup**-1.5)
        ours = inverse_sqrt_lr(n - 1, lr=paper_peak, min_lr=0.0, warmup_steps=warmup)
        assert ours == pytest.approx(paper)


def test_inverse_sqrt_never_drops_below_min_lr():
    assert inverse_sqrt_lr(10**9, lr=1e-3, min_lr=1e-5, warmup_steps=10) == 1e-5


def test_the_train_config_chooses_the_schedule():
    cosine = TrainConfig(lr=1e-3, min_lr=0.0, warmup_steps=10, max_steps=100, num_workers=1)
    inv = TrainConfig(
        lr=1e-3,
        min_lr=0.0,
        warmup_steps=10,
        max_steps=100,
        num_workers=1,
        schedule="inverse_sqrt",
    )
    assert learning_rate(99, cosine) == pytest.approx(
        cosine_lr(99, **{"lr": 1e-3, "min_lr": 0.0, "warmup_steps": 10, "max_steps": 100})
    )
    assert learning_rate(39, inv) == pytest.approx(0.5e-3)


@pytest.mark.parametrize(
    ("schedule", "min_lr", "depends"),
    [("cosine", 1e-5, True), ("cosine", 1e-3, False), ("inverse_sqrt", 1e-5, False)],
)
def test_max_steps_changes_some_rate_exactly_when_the_schedule_says_so(schedule, min_lr, depends):
    short = TrainConfig(
        lr=1e-3, min_lr=min_lr, warmup_steps=10, max_steps=100, num_workers=1, schedule=schedule
    )
    longer = dataclasses.replace(short, max_steps=150)
    differs = any(learning_rate(s, short) != learning_rate(s, longer) for s in range(150))
    assert rate_depends_on_max_steps(short) == differs == depends
