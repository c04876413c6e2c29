"""What each run of a scaling grid costs, from `lmforge estimate`'s cost models: every variant
is the user's config with its shape and steps, priced on the given cluster. The stages up to
`tokenize` do not depend on the model, so the grid pays them once."""

from __future__ import annotations

from typing import Any

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.estimate.prediction import estimate_run
from lmforge.pipeline.scaling.plan import Variant, train_overrides

SHARED = "tokenize"
"""The last stage every variant shares (clean, the tokenizer and tokenize run once)."""


def variant_overrides(variant: Variant, train: dict) -> list[str]:
    """The settings that make the user's config this variant."""
    return [*variant.shape.overrides(), *train_overrides(train, variant.steps)]


def price_grid(
    variants: list[Variant],
    overrides: list[str],
    corpus: dict[str, float],
    cluster: Cluster,
    coefficients: dict,
) -> list[dict[str, Any]]:
    """Each variant as a row: shape, N, tokens, steps, epochs, the FLOPs it spends, and its
    predicted time past the shared stages (`predicted_s`; `shared_s` is theirs)."""
    train = compose(list(overrides))["train"]
    rows = []
    for variant in variants:
        extra = variant_overrides(variant, train)
        config = compose([*overrides, *extra])
        result = estimate_run(config, corpus, cluster, coefficients)
        shared = result.finish_s.get(SHARED, 0.0)
        pretrain = next(s for s in result.stages if s.stage == "pretrain")
        rows.append(
            {
                "budget": variant.budget,
                "shape": variant.shape.label,
                "params": variant.shape.params,
                "flops_per_token": variant.shape.flops_per_token,
                "tokens": variant.tokens,
                "steps": variant.steps,
                "epochs": variant.epochs,
                "flops": variant.flops,
                "budget_error": round(variant.flops / variant.budget - 1, 5),
                "overrides": extra,
                "pretrain_s": round(pretrain.wall_s, 1),
                "predicted_s": round(result.total_wall_s - shared, 1),
                "shared_s": round(shared, 1),
            }
        )
    return rows
