"""`lmforge scaling plan`: shapes around the expected optimum, each budget met to 1%, and the
grids that should not run refused in one line."""

from __future__ import annotations

import json
import math

import pytest

from lmforge.model.flops import compute_parameters
from lmforge.pipeline.cli.main import main
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.plan import SPREAD, plan_grid, rule_optimum
from lmforge.pipeline.scaling.shapes import model_config, shape_family

TINY = compose(["preset=tiny"])
BASE = model_config(TINY["model"], TINY["tokenizer"]["vocab_size"])
BATCH = TINY["train"]["global_batch_size"] * BASE.block_size
BUDGETS = [3e12, 1e13, 3e13, 1e14]


def test_every_run_of_the_grid_spends_its_budget_to_one_percent():
    variants = plan_grid(BUDGETS, 4, BASE, BATCH, train_tokens=None)
    assert {v.budget for v in variants} == set(BUDGETS)
    for v in variants:
        assert v.tokens == v.steps * BATCH
        assert abs(v.flops / v.budget - 1) <= 0.01, v


def test_shapes_spread_on_both_sides_of_the_expected_optimum():
    optimum = rule_optimum(shape_family(BASE))
    for budget in (1e14, 1e16):
        variants = plan_grid([budget], 5, BASE, BATCH, None)
        params = [v.shape.params for v in variants]
        assert params == sorted(params) and len(params) == 5
        centre = optimum(budget)
        assert min(params) < centre < max(params)
        assert max(params) / min(params) == pytest.approx(SPREAD**2, rel=0.5)
        # Chinchilla's rule at the centre: about 20 tokens per parameter.
        middle = variants[2]
        assert 10 < middle.tokens / middle.shape.params < 40


def test_n_counts_the_lm_head_and_not_the_embedding_lookup():
    variants = plan_grid([1e14], 3, BASE, BATCH, None)
    for v in variants:
        cfg = model_config({**TINY["model"], **_model(v.shape)}, BASE.vocab_size)
        assert v.shape.params == compute_parameters(cfg)
        assert v.shape.params > cfg.vocab_size * cfg.d_model  # the head is in it
        assert v.shape.flops_per_token > 6 * v.shape.params  # attention on top of 6 N


def _model(shape) -> dict:
    return {k: getattr(shape, k) for k in ("d_model", "n_layer", "n_head", "d_ff")}


def test_a_grid_repeating_the_corpus_more_than_four_times_is_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        plan_grid([1e13], 4, BASE, BATCH, train_tokens=189_000)
    message = str(refused.value)
    assert "\n" not in message and "epochs" in message and "--max-epochs" in message
    allowed = plan_grid([1e13], 4, BASE, BATCH, train_tokens=189_000, max_epochs=1000)
    assert max(v.epochs for v in allowed) > 4


def test_a_budget_too_small_for_a_model_with_one_layer_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="one layer") as refused:
        plan_grid([1e9], 4, BASE, BATCH, None)
    assert "\n" not in str(refused.value)


def test_a_budget_of_too_few_steps_to_meet_it_is_refused():
    with pytest.raises(ConfigError, match="steps"):
        plan_grid([3e12], 2, BASE, 2048 * 512, None)


def test_the_cli_prints_the_grid_priced_by_the_estimate(capsys):
    argv = ["scaling", "plan", "--budgets", "1e14,3e14", "--sizes", "3", "--docs", "1e6"]
    assert main([*argv, "--bytes", "2GB", "--json", "preset=tiny"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["train_tokens"] > 0
    runs = data["runs"]
    assert {r["budget"] for r in runs} == {1e14, 3e14}
    for run in runs:
        assert abs(run["budget_error"]) <= 0.01
        assert run["predicted_s"] > run["pretrain_s"] > 0
        assert f"train.max_steps={run['steps']}" in run["overrides"]
        assert math.isclose(run["epochs"], run["tokens"] / data["train_tokens"], rel_tol=1e-2)
    assert main([*argv, "--bytes", "2GB", "preset=tiny"]) == 0
    table = capsys.readouterr().out
    assert "shared stages" in table and "d" in table


def test_the_cli_refuses_with_one_line_naming_what_to_change(capsys):
    code = main(["scaling", "plan", "--budgets", "1e9", "--docs", "1e6", "preset=tiny"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "raise the budget" in err


def test_one_shape_a_budget_is_the_optimum_itself():
    (variant,) = plan_grid([1e14], 1, BASE, BATCH, None)
    centre = rule_optimum(shape_family(BASE))(1e14)
    assert abs(math.log(variant.shape.params / centre)) < math.log(SPREAD)


def test_a_fit_moves_the_grid_to_its_optimum(tmp_path, capsys):
    law = {"E": 1.8, "A": 300.0, "B": 900.0, "alpha": 0.35, "beta": 0.3}
    (tmp_path / "fit.json").write_text(json.dumps({"format": 1, "law": law, "samples": []}))
    argv = ["scaling", "plan", "--budgets", "1e14", "--sizes", "3", "--docs", "1e6", "--json"]
    assert main([*argv, "preset=tiny"]) == 0
    rule = [r["params"] for r in json.loads(capsys.readouterr().out)["runs"]]
    assert main([*argv, "--fit", str(tmp_path / "fit.json"), "preset=tiny"]) == 0
    fitted = [r["params"] for r in json.loads(capsys.readouterr().out)["runs"]]
    assert fitted != rule and len(fitted) == 3
