"""A scaling grid as a sweep (`lmforge scaling run`): each run of the plan becomes a variant of
`lmforge sweep`, with its shape, steps and learning rate as its swept keys, and the sweep's record
keeps what `scaling fit --sweep` needs (each variant's budget, N and D).

The learning rate follows one rule, the preset's rate scaled by width: a shape of width d trains
at `train.lr x d_preset / d` (and `train.min_lr` likewise), the 1/width rule of Adam's hidden
layers under muP (Yang et al. 2022), bounded to `LR_BOUND` times the preset's either way so a
shape far narrower than the preset does not diverge. Warm-up and the sequence-level phase are
shrunk where the preset's would not fit in a short run (`plan.train_overrides`).

Every variant scores one fixed slice of the validation split (`eval_slice`): its first
`eval_tokens` tokens (200k by default) in windows that do not overlap (`stride` 0: the block
size), the same tokens for every variant since the shapes share the block size and the data;
the per-document pass and the freshly initialised model's pass are cut to one document and one
call, so evaluation does not swamp training. The variants stop after `perplexity` (`UNTIL`).
"""

from __future__ import annotations

from typing import Any

from lmforge.model.config import ModelConfig
from lmforge.pipeline.scaling.plan import Variant as GridRun
from lmforge.pipeline.sweep.grid import Variant

UNTIL = "perplexity"
"""The stage a grid's variants stop after."""
EVAL_TOKENS = 200_000
LR_BOUND = 4.0
"""The rule's rate stays within this factor of the preset's."""
RECORD_FORMAT = 1


def width_lr(lr: float, preset_width: int, width: int) -> float:
    """The preset's rate scaled by width (the module docstring says why), bounded."""
    factor = min(LR_BOUND, max(1 / LR_BOUND, preset_width / width))
    return lr * factor


def eval_slice(eval_tokens: int = EVAL_TOKENS) -> dict[str, str]:
    """The `eval.perplexity` settings of the slice every variant scores."""
    return {
        "eval.perplexity.max_tokens": str(int(eval_tokens)),
        "eval.perplexity.stride": "0",
        "eval.perplexity.max_documents": "1",
        "eval.perplexity.init_max_tokens": "1",
    }


def variant_name(run: GridRun) -> str:
    """`c<budget>-<shape>`: the budget and the shape, readable in logs and MLflow."""
    return f"c{run.budget:.3g}-{run.shape.label}"


def variant_params(run: GridRun, base: ModelConfig, train: dict) -> dict[str, str]:
    """The swept keys of one run, the same keys for every run of a grid (one table)."""
    steps = run.steps
    params = {
        "model.d_model": str(run.shape.d_model),
        "model.n_layer": str(run.shape.n_layer),
        "model.n_head": str(run.shape.n_head),
        "model.d_ff": str(run.shape.d_ff),
        "train.max_steps": str(steps),
        "train.warmup_steps": str(min(int(train.get("warmup_steps", 0)), max(1, steps // 10))),
        "train.lr": f"{width_lr(float(train['lr']), base.d_model, run.shape.d_model):.4g}",
        "train.min_lr": f"{width_lr(float(train['min_lr']), base.d_model, run.shape.d_model):.4g}",
    }
    if train.get("sequence_unlikelihood", 0):
        phase = min(int(train["sequence_unlikelihood_steps"]), max(1, steps // 4))
        params["train.sequence_unlikelihood_steps"] = str(phase)
    return params


def grid_variants(runs: list[GridRun], base: ModelConfig, train: dict) -> list[Variant]:
    """The grid's runs as the sweep's variants."""
    return [Variant(variant_name(r), variant_params(r, base, train)) for r in runs]


def shared_overrides(
    overrides: list[str], variants: list[Variant], eval_tokens: int = EVAL_TOKENS
) -> list[str]:
    """The user's overrides less the keys each variant sets, and the eval slice's settings
    that the user did not set."""
    swept = {key for v in variants for key in v.params}
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in swept]
    extra = [f"{k}={v}" for k, v in eval_slice(eval_tokens).items() if k not in given]
    return [*kept, *extra]


def grid_record(
    runs: list[GridRun],
    variants: list[Variant],
    train_tokens: float,
    base: ModelConfig,
    eval_tokens: int = EVAL_TOKENS,
) -> dict[str, Any]:
    """What the sweep's record keeps of the grid (`SweepRecord.scaling`)."""
    return {
        "format": RECORD_FORMAT,
        "budgets": sorted({r.budget for r in runs}),
        "train_tokens": train_tokens,
        "eval_tokens": int(eval_tokens),
        "preset_width": base.d_model,
        "lr_rule": f"train.lr x {base.d_model} / d_model, within {LR_BOUND:g}x",
        "variants": {
            v.name: {
                "budget": r.budget,
                "shape": r.shape.label,
                "params": r.shape.params,
                "tokens": r.tokens,
                "flops": r.flops,
                "steps": r.steps,
                "epochs": r.epochs,
                "lr": float(v.params["train.lr"]),
            }
            for r, v in zip(runs, variants, strict=True)
        },
    }
