"""The scaling-law fit: Chinchilla's L(N, D) recovered from synthetic losses, intervals that
cover the truth, IsoFLOP minima, and the fits it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmforge.pipeline.cli.main import main
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.isoflop import isoflop_profile
from lmforge.pipeline.scaling.law_fit import fit_scaling_law
from lmforge.pipeline.scaling.parametric_fit import LawParameters, fit_law
from lmforge.pipeline.scaling.runs_input import FinishedRun, run_from_manifests, runs_from_json

TRUTH = LawParameters(E=1.8, A=300.0, B=900.0, alpha=0.35, beta=0.3)
BUDGETS = (1e15, 1e16, 1e17)


def synthetic_runs(seed: int, sigma: float, sizes: int = 5, budgets=BUDGETS) -> list[FinishedRun]:
    """Runs of an IsoFLOP grid whose losses are TRUTH's times log-normal noise."""
    rng = np.random.default_rng(seed)
    runs = []
    for budget in budgets:
        centre = 0.1 * budget**0.46  # near TRUTH's optimum
        for m in np.geomspace(1 / 5, 5, sizes):
            n = centre * m
            d = budget / (6 * n)
            loss = float(TRUTH.loss(n, d) * np.exp(rng.normal(0, sigma)))
            runs.append(FinishedRun(n, d, loss, budget, budget))
    return runs


def test_the_fit_recovers_the_law_that_made_the_losses():
    runs = synthetic_runs(seed=0, sigma=0.002, budgets=(1e15, 1e16, 1e17, 1e18))
    law = fit_law(*(np.array([getattr(r, k) for r in runs]) for k in ("params", "tokens", "loss")))
    irreducible = law.E
    assert irreducible == pytest.approx(TRUTH.E, rel=0.05)
    assert law.alpha == pytest.approx(TRUTH.alpha, rel=0.1)
    assert law.beta == pytest.approx(TRUTH.beta, rel=0.1)
    assert law.a == pytest.approx(TRUTH.a, abs=0.02)
    for r in runs:  # and it predicts every run's loss
        assert law.loss(r.params, r.tokens) == pytest.approx(r.loss, rel=0.01)


def test_the_intervals_cover_the_truth_at_about_their_nominal_rate():
    """Over replicate grids, each 90% interval holds the true value about 90% of the time
    (a small bootstrap, kept fast: the rate is checked loosely)."""
    replicates, hits = 8, {"E": 0, "alpha": 0, "beta": 0, "a": 0}
    for seed in range(replicates):
        fit = fit_scaling_law(synthetic_runs(seed, 0.01), resamples=20, seed=seed, starts=1)
        for name in hits:
            low, high = fit.intervals[name]
            hits[name] += low <= getattr(TRUTH, name) <= high
    rate = sum(hits.values()) / (replicates * len(hits))
    assert 0.7 <= rate <= 1.0, hits
    # Not vacuous: the intervals are narrow enough to say something.
    assert fit.intervals["alpha"][1] - fit.intervals["alpha"][0] < 0.5


def test_an_isoflop_parabola_finds_the_valley_between_the_sizes_run():
    n_opt = 2e6
    runs = [
        FinishedRun(n, 1e16 / (6 * n), 3.0 + 0.2 * np.log(n / n_opt) ** 2, 1e16, 1e16)
        for n in (5e5, 1e6, 2e6, 4e6, 8e6)
    ]
    profile = isoflop_profile(1e16, runs)
    assert profile.n_opt == pytest.approx(n_opt, rel=1e-6)
    assert profile.loss_min == pytest.approx(3.0)
    assert profile.d_opt == pytest.approx(1e16 / (6 * n_opt), rel=1e-6)
    falling = [FinishedRun(r.params, r.tokens, 5 - np.log(r.params), 1e16, 1e16) for r in runs]
    assert isoflop_profile(1e16, falling).n_opt is None  # no valley: not bracketed


def test_too_few_budgets_are_refused_in_one_line_naming_what_to_add():
    with pytest.raises(ConfigError) as refused:
        fit_scaling_law(synthetic_runs(0, 0.01, budgets=(1e15, 1e16)), resamples=2)
    message = str(refused.value)
    assert "\n" not in message and "add runs at 1 more budget" in message


def test_too_few_sizes_at_a_budget_are_refused_in_one_line_naming_what_to_add():
    runs = synthetic_runs(0, 0.01, sizes=3)
    runs = [r for r in runs if not (r.budget == 1e16 and r is runs[3])]
    with pytest.raises(ConfigError) as refused:
        fit_scaling_law(runs, resamples=2)
    message = str(refused.value)
    assert "\n" not in message and "budget 1e+16" in message and "add 1 more size" in message


def test_runs_without_a_planned_budget_are_grouped_by_their_flops():
    items = [
        {"params": 1e6, "tokens": 1e8, "loss": 4.0, "flops": 6.0e14},
        {"params": 2e6, "tokens": 5e7, "loss": 3.9, "flops": 6.1e14},
        {"params": 1e6, "tokens": 1e9, "loss": 3.5},  # 6 N D
    ]
    runs = runs_from_json(items, "runs.json")
    assert sorted({r.budget for r in runs}) == [6.0e14, 6.0e15]
    with pytest.raises(ConfigError, match="run 0 needs"):
        runs_from_json([{"params": 1}], "runs.json")


def test_a_sweep_variant_is_read_from_its_pretrain_and_perplexity_manifests():
    model = {"d_model": 64, "n_layer": 2, "n_head": 2, "d_ff": 256, "block_size": 64}
    pretrain = {
        "config": {"model": model},
        "summary": {"tokens": 1_000_000},
        "estimate": {"size": {"vocab_size": 512}},
    }
    run = run_from_manifests(pretrain, {"summary": {"val_loss": 4.2}}, budget=1e13)
    assert run.label == "d64xL2" and run.loss == 4.2 and run.budget == 1e13
    assert run.params > 512 * 64  # the head counts
    assert run.flops > 6 * run.params * run.tokens  # attention on top
    with pytest.raises(ConfigError, match="lacks"):
        run_from_manifests(pretrain, {"summary": {}})


def test_the_cli_writes_the_fit_and_its_plot(tmp_path, capsys):
    runs = [r.to_json() for r in synthetic_runs(1, 0.005)]
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    out = tmp_path / "fit"
    argv = ["scaling", "fit", "--runs", str(tmp_path / "runs.json"), "--out", str(out)]
    assert main([*argv, "--bootstrap", "10", "--no-mlflow", f"workdir={tmp_path}"]) == 0
    printed = capsys.readouterr().out
    assert "L(N, D) =" in printed and "N*(C) ~ C^" in printed
    data = json.loads((out / "fit.json").read_text())
    assert set(data["law"]) == {"E", "A", "B", "alpha", "beta", "a", "b"}
    assert set(data["intervals"]) == set(data["law"])
    assert len(data["samples"]) == 10 and len(data["runs"]) == 15
    assert (out / "fit.png").stat().st_size > 10_000


def test_the_cli_refuses_an_unidentified_fit_in_one_line(tmp_path, capsys):
    runs = [r.to_json() for r in synthetic_runs(1, 0.005, budgets=(1e15, 1e16))]
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    code = main(["scaling", "fit", "--runs", str(tmp_path / "runs.json"), f"workdir={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "more budget" in err


BENCH_GRID = [  # bench/scaling_law.py, 250 MB corpus, 2026-12-07: N, D, loss, 4 shapes a budget
    (45536, 10102784, 3.8654), (105792, 4163584, 3.87), (215616, 2050048, 4.0464),
    (434016, 1069056, 4.2826), (77520, 18132992, 3.5519), (165632, 8208384, 3.3539),
    (434016, 3207168, 3.6256), (722848, 1943552, 3.8779), (165632, 24621056, 2.7741),
    (315600, 12955648, 2.7773), (722848, 5832704, 3.1714), (1401264, 3080192, 3.5046),
]  # fmt: skip


def test_a_fit_whose_irreducible_loss_goes_to_zero_says_its_extrapolation_runs_low():
    budgets = [3.257e12] * 4 + [9.771e12] * 4 + [2.931e13] * 4
    grid = zip(BENCH_GRID, budgets, strict=True)
    runs = [FinishedRun(n, d, loss, c, c) for (n, d, loss), c in grid]
    fit = fit_scaling_law(runs, resamples=5)
    assert fit.law.E < 0.01
    (note,) = [n for n in fit.notes if n.startswith("E fitted at about 0")]
    assert "likely too low" in note and "a budget above the largest" in note
    well_posed = fit_scaling_law(synthetic_runs(0, 0.002), resamples=5, starts=1)
    assert not any(n.startswith("E fitted") for n in well_posed.notes)
