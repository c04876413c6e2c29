"""`lmforge estimate --compute-budget C | --target-loss L [--fit ID|latest|PATH]`: the
compute-optimal run a scaling fit gives (`pipeline/scaling/budget_plan.py`), what the corpus can
give it, and the whole pipeline for that run priced as `lmforge estimate` prices any run."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.estimate.coefficients import coefficients_path, load_coefficients
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.estimate.prediction import RunEstimate, estimate_run
from lmforge.pipeline.scaling.budget_plan import (
    budget_for_loss,
    corpus_need,
    parse_budget,
    plan_budget,
)
from lmforge.pipeline.scaling.corpus_size import corpus_size
from lmforge.pipeline.scaling.fit_record import load_fit
from lmforge.pipeline.scaling.parametric_fit import LawParameters
from lmforge.pipeline.scaling.plan import train_overrides
from lmforge.pipeline.scaling.shapes import model_config, shape_family
from lmforge.pipeline.stages.pretrain.cost import GPU_MFU


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """The plan in words, as JSON, and the whole pipeline's estimate for it."""

    lines: list[str]
    data: dict[str, Any]
    run: RunEstimate


def plan_for_budget(
    args: argparse.Namespace,
    config: dict,
    workdir: Path,
    cluster: Cluster,
    given: dict[str, float] | None,
) -> PlannedRun:
    """The compute-optimal run of `--compute-budget` (or `--target-loss`) under `--fit`,
    priced on `cluster` for the corpus `given` (else the workdir's)."""
    fit = load_fit(args.fit, workdir)
    base = model_config(config["model"], config["tokenizer"]["vocab_size"])
    family = shape_family(base)
    if args.compute_budget:
        sustained = (cluster.gpu_peak_flops or 0) * (args.mfu or GPU_MFU)
        budget = parse_budget(args.compute_budget, sustained if cluster.gpus_per_node else None)
    else:
        budget = budget_for_loss(fit, args.target_loss, family)
    plan = plan_budget(fit, budget, family)
    coefficients = load_coefficients(coefficients_path(args.coefficients, workdir))
    coefficients.setdefault("fitted_on", {})
    size = corpus_size(given, workdir)
    batch_tokens = config["train"]["global_batch_size"] * base.block_size
    steps = max(1, round(budget / plan.shape.flops_per_token / batch_tokens))
    overrides = [
        *args.overrides,
        *plan.shape.overrides(),
        *train_overrides(config["train"], steps),
    ]
    run = estimate_run(compose(overrides), size.corpus, cluster, coefficients)
    train_tokens = size.train_tokens or run.handed.get("tokenize", {}).get("train_tokens", 0.0)
    train_docs = size.train_docs or run.handed.get("clean", {}).get("docs_out", 0.0) * (
        1 - config["data"]["val_fraction"]
    )
    law = fit["law"]
    need = corpus_need(
        plan.d_star,
        train_tokens,
        train_docs,
        LawParameters(law["E"], law["A"], law["B"], law["alpha"], law["beta"]),
        plan.n_star,
    )
    data = plan.to_json() | {
        "fit": fit["path"],
        "steps": steps,
        "overrides": overrides[len(args.overrides) :],
        "corpus_documents_needed": need.documents,
        "corpus_epochs": need.epochs,
        "effective_tokens": need.effective_tokens,
    }
    return PlannedRun(plan_lines(plan, fit, need.note, steps, batch_tokens), data, run)


def plan_lines(plan, fit: dict, corpus_note: str, steps: int, batch_tokens: int) -> list[str]:
    """The plan in words: the budget, N*, D*, the loss, each with its interval."""

    def span(name: str) -> str:
        low, high = plan.intervals.get(name, (float("nan"), float("nan")))
        return f" [{low:.3g}, {high:.3g}]"

    return [
        f"fit: {fit['path']}",
        f"compute budget: {plan.budget:.3g} FLOPs",
        f"N* = {plan.n_star:.3g}{span('n_star')} parameters, D* = {plan.d_star:.3g}"
        f"{span('d_star')} tokens, predicted val loss {plan.predicted_loss:.3f}"
        f"{span('predicted_loss')} nats per token ({fit.get('level', 0.9):.0%} intervals)",
        f"run: {plan.shape.label} (N = {plan.shape.params:.3g}) for {steps} steps of "
        f"{batch_tokens} tokens; {corpus_note}",
        *(f"warning: {w}" for w in plan.warnings),
    ]
