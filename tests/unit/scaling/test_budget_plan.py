"""`lmforge estimate --compute-budget C | --target-loss L --fit ...`: N*, D* and the loss from
a fitted law, with intervals, what the corpus gives, and the run priced."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmforge.pipeline.cli.main import main
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.budget_plan import (
    budget_for_loss,
    corpus_need,
    effective_tokens,
    optimum,
    parse_budget,
    plan_budget,
)
from lmforge.pipeline.scaling.parametric_fit import LawParameters
from lmforge.pipeline.scaling.shapes import model_config, shape_family

LAW = LawParameters(E=1.8, A=300.0, B=900.0, alpha=0.35, beta=0.3)
CONFIG = compose(["preset=tiny"])
FAMILY = shape_family(model_config(CONFIG["model"], CONFIG["tokenizer"]["vocab_size"]))


def fit_json(samples: int = 20, largest: float = 1e15) -> dict:
    rng = np.random.default_rng(0)
    rows = [
        [LAW.E, LAW.A, LAW.B, LAW.alpha * f, LAW.beta * g]
        for f, g in rng.normal(1, 0.03, (samples, 2))
    ]
    law = {"E": LAW.E, "A": LAW.A, "B": LAW.B, "alpha": LAW.alpha, "beta": LAW.beta}
    return {"format": 1, "law": law, "samples": rows, "largest_budget": largest, "level": 0.9}


def test_the_optimum_is_the_lowest_loss_the_budget_can_buy():
    n_star, d_star, loss = optimum(LAW, 1e15, FAMILY)
    assert loss == pytest.approx(float(LAW.loss(n_star, d_star)))
    for factor in (0.5, 2.0):  # a model twice as large or half as large does worse
        n = n_star * factor
        assert LAW.loss(n, d_star * n_star / n) > loss
    assert 0.5 < 6 * n_star * d_star / 1e15 < 1  # C = FLOPs per token x D: 6 N D + attention


def test_the_plan_has_intervals_around_its_values_and_warns_far_past_the_fit():
    plan = plan_budget(fit_json(largest=1e15), 1e15, FAMILY)
    for name, value in (("n_star", plan.n_star), ("d_star", plan.d_star)):
        low, high = plan.intervals[name]
        assert low < high and low <= value * 1.01 and value <= high * 1.01
    assert not plan.warnings
    far = plan_budget(fit_json(largest=1e15), 2e16, FAMILY)
    assert len(far.warnings) == 1 and "20x the largest" in far.warnings[0]


def test_a_target_loss_gives_the_smallest_budget_that_reaches_it():
    budget = budget_for_loss(fit_json(), 4.0, FAMILY)
    assert optimum(LAW, budget, FAMILY)[2] == pytest.approx(4.0, abs=1e-3)
    with pytest.raises(ConfigError, match="irreducible"):
        budget_for_loss(fit_json(), 1.5, FAMILY)


def test_budgets_in_gpu_hours_run_at_the_gpus_sustained_rate():
    assert parse_budget("1e18", None) == 1e18
    assert parse_budget("10gpuh", 1e14) == 10 * 3600 * 1e14
    assert parse_budget("2 GPU-hours", 1e14) == 2 * 3600 * 1e14
    with pytest.raises(ConfigError, match="--gpu-peak-tflops"):
        parse_budget("10gpuh", None)
    with pytest.raises(ConfigError, match="FLOPs"):
        parse_budget("lots", None)


def test_repeating_a_small_corpus_is_priced_as_fewer_effective_tokens():
    assert effective_tokens(1e6, 2e6) == 1e6
    four = effective_tokens(4e6, 1e6)
    assert 0.9 * 4e6 < four < 4e6  # 4 epochs: nearly as good as new data
    assert effective_tokens(40e6, 1e6) < 0.5 * 40e6  # 40: far from it
    need = corpus_need(8e6, 2e6, 1000, LAW, 1e6)
    assert need.epochs == 4 and need.documents == 4000
    assert "epochs" in need.note and "Muennighoff" in need.note
    assert corpus_need(1e6, 2e6, 1000, LAW, 1e6).note.startswith("500 documents")


def test_the_cli_plans_prices_and_reports_the_run_as_json(tmp_path, capsys):
    fit_dir = tmp_path / "scaling" / "fit-a"
    fit_dir.mkdir(parents=True)
    (fit_dir / "fit.json").write_text(json.dumps(fit_json()))
    argv = ["estimate", "--compute-budget", "3e15", "--docs", "1e6", "--bytes", "2GB"]
    assert main([*argv, "--json", "preset=tiny", f"workdir={tmp_path}"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"n_star", "d_star", "intervals", "predicted_loss"} <= set(data)
    assert set(data["intervals"]) == {"n_star", "d_star", "predicted_loss"}
    assert data["fit"].endswith("fit-a/fit.json")
    assert data["total_wall_s"] > 0 and any(s["stage"] == "pretrain" for s in data["stages"])
    assert f"train.max_steps={data['steps']}" in data["overrides"]
    assert data["corpus_documents_needed"] > 0
    code = main(["estimate", "--target-loss", "4.0", "--docs", "1e6", f"workdir={tmp_path}"])
    assert code == 0 and "N* =" in capsys.readouterr().out


def test_the_cli_without_a_fit_says_how_to_make_one(tmp_path, capsys):
    argv = ["estimate", "--compute-budget", "1e15", "--docs", "1e6", f"workdir={tmp_path}"]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lmforge scaling fit" in err
