"""Where a trained model sits against a scaling fit of its own corpus and tokenizer: its
validation loss beside the fit's L(N, D) at its N and D, and beside the compute-optimal loss at
the compute it spent (N*, D* over the model's family of shapes, `budget_plan.optimum`).

A fit is of a model's corpus and tokenizer when its record names the same `clean` and
`train_tokenizer` cache keys (`sweep_runs.corpus_keys`); a fit of `--runs FILE` names none and is
never matched. Of several, the newest.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lmforge.model.config import ModelConfig
from lmforge.pipeline.scaling.fit_record import FITS

EXTRAPOLATED = 10.0
"""A model whose compute is more than this many times the largest budget fitted is flagged."""


def fit_for_corpus(workdir: Path, clean: list[str], tokenizer: list[str]) -> dict | None:
    """The newest fit in the workdir whose corpus is `clean` + `tokenizer` (cache keys)."""
    found = sorted((workdir / FITS).glob("*/fit.json"), key=lambda p: p.stat().st_mtime)
    wanted = {"clean": sorted(clean), "train_tokenizer": sorted(tokenizer)}
    for path in reversed(found):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("corpus") == wanted and "law" in data:
            return data | {"path": str(path)}
    return None


@dataclass(frozen=True, slots=True)
class FrontierPosition:
    fit: str
    """The fit's folder name (its id for `--fit`)."""
    params: float
    tokens: float
    flops: float
    loss: float
    """The model's validation loss, nats per token."""
    predicted_loss: float
    """The fit's L(N, D) at the model's N and D."""
    n_star: float
    d_star: float
    optimal_loss: float
    """The compute-optimal loss at the model's compute."""
    largest_budget: float
    fit_scored_tokens: int | None
    """Validation tokens each run of the fit's grid scored (None: unknown)."""

    @property
    def above_prediction(self) -> float:
        return self.loss - self.predicted_loss

    @property
    def above_frontier(self) -> float:
        return self.loss - self.optimal_loss

    def to_json(self) -> dict:
        return asdict(self) | {
            "above_prediction": self.above_prediction,
            "above_frontier": self.above_frontier,
        }


def frontier_position(fit: dict, cfg: ModelConfig, tokens: float, loss: float) -> FrontierPosition:
    """The model of config `cfg` trained on `tokens` tokens to validation loss `loss`, placed
    against `fit`."""
    from lmforge.model.flops import compute_parameters, training_flops_per_token
    from lmforge.pipeline.scaling.budget_plan import optimum
    from lmforge.pipeline.scaling.parametric_fit import LawParameters
    from lmforge.pipeline.scaling.shapes import shape_family

    law = LawParameters(*(fit["law"][k] for k in ("E", "A", "B", "alpha", "beta")))
    params = float(compute_parameters(cfg))
    flops = tokens * training_flops_per_token(cfg)
    n_star, d_star, best = optimum(law, flops, shape_family(cfg))
    return FrontierPosition(
        fit=Path(fit.get("path", "fit")).parent.name,
        params=params,
        tokens=float(tokens),
        flops=flops,
        loss=float(loss),
        predicted_loss=float(law.loss(params, float(tokens))),
        n_star=n_star,
        d_star=d_star,
        optimal_loss=best,
        largest_budget=float(fit.get("largest_budget") or 0.0),
        fit_scored_tokens=fit.get("val_tokens_scored"),
    )


def position_lines(p: FrontierPosition, scored_tokens: int | None = None) -> list[str]:
    """The position in a few sentences (the model card's bullets)."""
    lines = [
        f"This model: N = {p.params:.3g} parameters, D = {p.tokens:.3g} tokens, C = "
        f"{p.flops:.3g} FLOPs; validation loss {p.loss:.4f} nats per token.",
        f"The fit's L(N, D) at this N and D: {p.predicted_loss:.4f}; the model is "
        f"{p.above_prediction:+.4f} nats from it.",
        f"The compute-optimal run at C: N* = {p.n_star:.3g}, D* = {p.d_star:.3g} tokens, loss "
        f"{p.optimal_loss:.4f}; the model is {p.above_frontier:+.4f} nats from the frontier.",
    ]
    if p.largest_budget and p.flops > EXTRAPOLATED * p.largest_budget:
        lines.append(
            f"C is {p.flops / p.largest_budget:.0f}x the largest budget fitted "
            f"({p.largest_budget:.3g} FLOPs): the law is extrapolated that far."
        )
    if p.fit_scored_tokens and scored_tokens and scored_tokens != p.fit_scored_tokens:
        lines.append(
            f"The fit's runs scored {p.fit_scored_tokens} validation tokens, this model "
            f"{scored_tokens}: the losses are of different slices of the split."
        )
    return lines
