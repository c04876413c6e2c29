"""`lmforge scaling run`'s grid as a sweep: one set of swept keys, the learning-rate rule, the
evaluation slice, and the record `scaling fit --sweep` reads."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.scaling.grid_sweep import (
    LR_BOUND,
    UNTIL,
    eval_slice,
    grid_record,
    grid_variants,
    shared_overrides,
    width_lr,
)
from lmforge.pipeline.scaling.plan import plan_grid
from lmforge.pipeline.scaling.shapes import model_config
from lmforge.pipeline.sweep.grid import sweep_id
from lmforge.pipeline.sweep.records import SweepRecord

TINY = compose(["preset=tiny"])
BASE = model_config(TINY["model"], TINY["tokenizer"]["vocab_size"])
BATCH = TINY["train"]["global_batch_size"] * BASE.block_size
RUNS = plan_grid([3e12, 1e13, 3e13], 3, BASE, BATCH, train_tokens=None)


def test_the_learning_rate_scales_inversely_with_width_within_a_bound():
    assert width_lr(3e-3, 128, 128) == pytest.approx(3e-3)
    assert width_lr(3e-3, 128, 64) == pytest.approx(6e-3)
    assert width_lr(3e-3, 128, 256) == pytest.approx(1.5e-3)
    assert width_lr(3e-3, 128, 8) == pytest.approx(3e-3 * LR_BOUND)
    assert width_lr(3e-3, 128, 128 * 64) == pytest.approx(3e-3 / LR_BOUND)


def test_every_variant_sets_the_same_keys_its_shape_steps_and_rate():
    variants = grid_variants(RUNS, BASE, TINY["train"])
    assert len({v.name for v in variants}) == len(RUNS)
    assert len({tuple(v.params) for v in variants}) == 1  # one table, one set of columns
    for run, variant in zip(RUNS, variants, strict=True):
        p = variant.params
        assert p["model.d_model"] == str(run.shape.d_model)
        assert p["model.n_layer"] == str(run.shape.n_layer)
        assert p["train.max_steps"] == str(run.steps)
        assert int(p["train.warmup_steps"]) <= max(1, run.steps // 10)
        lr = float(p["train.lr"])
        assert lr == pytest.approx(width_lr(TINY["train"]["lr"], 128, run.shape.d_model), 1e-3)
        assert float(p["train.min_lr"]) / lr == pytest.approx(
            TINY["train"]["min_lr"] / TINY["train"]["lr"], 1e-3
        )
        assert int(p["train.sequence_unlikelihood_steps"]) <= max(1, run.steps // 4)
        # each variant is a config that composes
        config = compose(["preset=tiny", *variant.overrides()])
        assert config["model"]["d_model"] == run.shape.d_model


def test_shared_overrides_leave_the_swept_keys_to_the_variants_and_add_the_eval_slice():
    variants = grid_variants(RUNS, BASE, TINY["train"])
    given = ["preset=tiny", "model.d_model=64", "train.lr=1e-2", "eval.perplexity.max_tokens=4096"]
    shared = shared_overrides(given, variants, eval_tokens=100_000)
    assert "model.d_model=64" not in shared and "train.lr=1e-2" not in shared
    assert "preset=tiny" in shared
    assert "eval.perplexity.max_tokens=4096" in shared  # the user's slice wins
    assert "eval.perplexity.max_tokens=100000" not in shared
    assert "eval.perplexity.stride=0" in shared  # windows that do not overlap
    config = compose([*shared, *variants[0].overrides()])
    assert config["eval"]["perplexity"]["stride"] == 0
    assert config["eval"]["perplexity"]["max_documents"] == 1


def test_the_eval_slice_uses_existing_keys_only():
    defaults = compose([])["eval"]["perplexity"]
    for key in eval_slice():
        assert key.removeprefix("eval.perplexity.") in defaults, key


def test_the_record_holds_each_variants_budget_n_and_d():
    variants = grid_variants(RUNS, BASE, TINY["train"])
    record = grid_record(RUNS, variants, 1e6, BASE, eval_tokens=50_000)
    assert record["budgets"] == [3e12, 1e13, 3e13]
    assert record["eval_tokens"] == 50_000
    for run, variant in zip(RUNS, variants, strict=True):
        kept = record["variants"][variant.name]
        assert (kept["budget"], kept["params"], kept["tokens"]) == (
            run.budget,
            run.shape.params,
            run.tokens,
        )


def test_a_sweep_that_stops_early_has_an_id_of_its_own_and_old_ids_stay():
    variants = grid_variants(RUNS, BASE, TINY["train"])
    whole = sweep_id(["preset=tiny"], variants, False)
    assert sweep_id(["preset=tiny"], variants, False, None) == whole
    assert sweep_id(["preset=tiny"], variants, False, UNTIL) != whole


def test_a_record_written_before_grids_existed_reads_back():
    old = {"sweep_id": "sweep-0", "command": "sweep", "swept": ["train.lr"], "variants": []}
    record = SweepRecord.from_dict(old)
    assert record.scaling is None and record.until is None


def test_scaling_run_refuses_a_grid_before_anything_runs(tmp_path, capsys):
    from lmforge.pipeline.cli.main import main

    code = main(["scaling", "run", "--budgets", "1e9", "preset=tiny", f"workdir={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "raise the budget" in err
    assert not (tmp_path / "store").exists() and not (tmp_path / "sweeps").exists()


def test_scaling_fit_of_a_sweep_refuses_in_one_line_where_there_is_no_grid(tmp_path, capsys):
    from lmforge.pipeline.cli.main import main

    code = main(["scaling", "fit", "--sweep", "latest", f"workdir={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "scaling run" in err
    code = main(["scaling", "fit", "--sweep", "latest", "--runs", "r.json", f"workdir={tmp_path}"])
    assert code != 0 and "not both" in capsys.readouterr().err
