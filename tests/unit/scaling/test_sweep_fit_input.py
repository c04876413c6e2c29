"""`scaling fit --sweep`: a grid's finished variants as the fit's input, and the grids it
refuses in one line; and where a trained model sits against a fit of its corpus (the model
card's section)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lmforge.model.flops import compute_parameters, training_flops_per_token
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.frontier_position import (
    fit_for_corpus,
    frontier_position,
    position_lines,
)
from lmforge.pipeline.scaling.parametric_fit import LawParameters
from lmforge.pipeline.scaling.shapes import model_config
from lmforge.pipeline.scaling.sweep_runs import (
    corpus_keys,
    grid_sweep,
    scored_tokens,
    sweep_runs,
)
from lmforge.pipeline.stages.report.frontier_section import frontier_section
from lmforge.pipeline.sweep.records import SweepBook, SweepRecord, VariantRecord

LAW = LawParameters(1.8, 400.0, 900.0, 0.34, 0.28)
MODEL = {"d_model": 32, "n_layer": 2, "n_head": 2, "d_ff": 128, "block_size": 64}
VOCAB = 512


def _model(d_model: int) -> dict:
    return {**MODEL, "d_model": d_model, "n_head": d_model // 16, "d_ff": 4 * d_model}


class DictStore:
    """The manifests of an artifact store, by (stage, key)."""

    def __init__(self) -> None:
        self.manifests: dict[tuple[str, str], dict] = {}

    def manifest(self, stage: str, key: str) -> dict | None:
        return self.manifests.get((stage, key))


def _grid(budgets=(1e10, 3e10, 1e11), widths=(16, 32, 48), state="finished"):
    """A grid's sweep record and its store: each variant's loss from LAW."""
    store, variants, planned = DictStore(), [], {}
    for budget in budgets:
        for width in widths:
            cfg = model_config(_model(width), VOCAB)
            n, f = compute_parameters(cfg), training_flops_per_token(cfg)
            tokens = round(budget / f)
            name = f"c{budget:.3g}-d{width}"
            keys = {"clean": "c0", "train_tokenizer": "t0", "pretrain": f"p-{name}"}
            keys["perplexity"] = f"e-{name}"
            store.manifests[("pretrain", keys["pretrain"])] = {
                "config": {"model": _model(width)},
                "summary": {"tokens": tokens},
            }
            store.manifests[("perplexity", keys["perplexity"])] = {
                "summary": {"val_loss": float(LAW.loss(n, tokens)), "vocab_size": VOCAB,
                            "val_tokens_scored": 4000},
            }  # fmt: skip
            variants.append(VariantRecord(name, {}, state=state, stages=keys))
            planned[name] = {"budget": budget, "params": n, "tokens": tokens, "flops": budget}
    record = SweepRecord("sweep-grid", "scaling run", ["model.d_model"], variants=variants)
    record.scaling = {"budgets": list(budgets), "variants": planned}
    return record, store


def test_a_grids_variants_give_n_d_and_the_loss_at_their_planned_budget():
    record, store = _grid()
    runs = sweep_runs(record, store)
    assert len(runs) == 9 and {r.budget for r in runs} == {1e10, 3e10, 1e11}
    for run in runs:
        assert run.loss == pytest.approx(float(LAW.loss(run.params, run.tokens)))
        assert run.flops == pytest.approx(run.budget, rel=1e-3)
    assert corpus_keys(record) == {"clean": ["c0"], "train_tokenizer": ["t0"]}
    assert scored_tokens(record, store) == 4000


@pytest.mark.parametrize(
    ("grid", "says"),
    [
        ({"budgets": (1e10, 3e10)}, "2 compute budget(s)"),
        ({"widths": (16, 32)}, "model size(s)"),
        ({"state": "failed"}, "9 of 9 variants not finished"),
    ],
)
def test_a_grid_that_cannot_be_fitted_is_refused_in_one_line(grid, says):
    record, store = _grid(**grid)
    with pytest.raises(ConfigError) as refused:
        sweep_runs(record, store)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_only_a_scaling_grid_is_read_and_latest_is_the_newest_grid(tmp_path):
    book = SweepBook(tmp_path / "sweeps")
    grid, _ = _grid()
    plain = SweepRecord("sweep-plain", "sweep", ["train.lr"], started_at=grid.started_at + 1)
    book.save(grid)
    book.save(plain)
    assert grid_sweep(tmp_path, "latest").sweep_id == "sweep-grid"
    for ref, says in (("sweep-plain", "not a scaling grid"), ("sweep-none", "no such sweep")):
        with pytest.raises(ConfigError, match=says):
            grid_sweep(tmp_path, ref)
    with pytest.raises(ConfigError, match="no scaling grid"):
        grid_sweep(tmp_path / "empty", "latest")


def _write_fit(workdir: Path, name: str, corpus: dict | None) -> Path:
    folder = workdir / "scaling" / name
    folder.mkdir(parents=True)
    law = {"E": LAW.E, "A": LAW.A, "B": LAW.B, "alpha": LAW.alpha, "beta": LAW.beta}
    data = {"format": 1, "law": law, "largest_budget": 1e11, "runs": [{}] * 9}
    if corpus is not None:
        data |= {"corpus": corpus, "val_tokens_scored": 4000}
    (folder / "fit.json").write_text(json.dumps(data))
    return folder


def test_a_model_is_placed_against_the_fit_of_its_own_corpus_only(tmp_path):
    ours = {"clean": ["c0"], "train_tokenizer": ["t0"]}
    _write_fit(tmp_path, "from-runs-file", None)
    _write_fit(tmp_path, "other-corpus", {"clean": ["c9"], "train_tokenizer": ["t0"]})
    assert fit_for_corpus(tmp_path, ["c1"], ["t0"]) is None
    _write_fit(tmp_path, "sweep-grid", ours)
    fit = fit_for_corpus(tmp_path, ["c0"], ["t0"])
    assert fit is not None and Path(fit["path"]).parent.name == "sweep-grid"

    cfg = model_config(_model(32), VOCAB)
    n = compute_parameters(cfg)
    place = frontier_position(fit, cfg, tokens=2e6, loss=float(LAW.loss(n, 2e6)) + 0.05)
    assert place.predicted_loss == pytest.approx(float(LAW.loss(n, 2e6)))
    assert place.above_prediction == pytest.approx(0.05)
    assert place.flops == pytest.approx(2e6 * training_flops_per_token(cfg))
    # the frontier's loss at that compute is the least over N: at most the model's prediction
    assert place.optimal_loss <= place.predicted_loss + 1e-6
    assert place.n_star > 0 and place.d_star > 0
    lines = position_lines(place, scored_tokens=4000)
    assert len(lines) == 3 and "frontier" in lines[2]
    far = frontier_position(fit, cfg, tokens=2e9, loss=3.0)
    assert any("extrapolated" in line for line in position_lines(far, scored_tokens=9999))
    assert any("different slices" in line for line in position_lines(far, scored_tokens=9999))


def test_the_model_card_has_a_frontier_section_when_a_fit_of_its_corpus_exists(tmp_path):
    ctx = SimpleNamespace(
        workdir=tmp_path,
        input_manifests={
            "clean": {"key": "c0"},
            "train_tokenizer": {"key": "t0"},
            "pretrain": {"config": {"model": _model(32)}, "summary": {"tokens": 2e6}},
            "perplexity": {"summary": {"val_loss": 3.1, "vocab_size": VOCAB}},
        },
    )
    ctx.manifests_of = lambda name: {"": ctx.input_manifests[name]}
    assert frontier_section(ctx) == (None, {})
    _write_fit(tmp_path, "sweep-grid", {"clean": ["c0"], "train_tokenizer": ["t0"]})
    section, figures = frontier_section(ctx)
    assert section is not None and "sweep-grid" in section.paragraphs[0]
    assert figures["loss"] == 3.1 and np.isfinite(figures["above_frontier"])
    damaged = _write_fit(tmp_path, "sweep-newer", {"clean": ["c0"], "train_tokenizer": ["t0"]})
    data = json.loads((damaged / "fit.json").read_text())
    del data["law"]["beta"]
    (damaged / "fit.json").write_text(json.dumps(data))
    assert frontier_section(ctx) == (None, {})  # the card is written without it
