"""What a scaling fit reads: finished runs, each with its N (parameters that cost FLOPs per
token), D (training tokens), C (training FLOPs) and validation loss (nats per token).

Runs come from a JSON file (`--runs`: a list of `{"params", "tokens", "loss"[, "flops",
"budget", "label"]}`) or from a sweep's records (`--sweep`), where each variant's `pretrain` and
`perplexity` manifests give them (`run_from_manifests`). A run's budget is the one its plan asked
for when it says so, else its FLOPs; runs within `SAME_BUDGET` of each other share a budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.errors import ConfigError

SAME_BUDGET = 0.05
"""Runs whose FLOPs differ by less than this share are at one budget."""


@dataclass(frozen=True, slots=True)
class FinishedRun:
    params: float
    tokens: float
    loss: float
    flops: float
    """Training FLOPs: tokens x the model's FLOPs per token (6 N D when not given)."""
    budget: float
    label: str = ""

    def to_json(self) -> dict:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "loss": self.loss,
            "flops": self.flops,
            "budget": self.budget,
            "label": self.label,
        }


def runs_from_json(items: list, where: str) -> list[FinishedRun]:
    """Runs from their JSON objects, checked; budgets grouped as the module says."""
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{where}: expected a JSON list of runs {{params, tokens, loss}}")
    found = []
    for i, item in enumerate(items):
        try:
            params, tokens, loss = (float(item[k]) for k in ("params", "tokens", "loss"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: run {i} needs numeric params, tokens and loss") from exc
        if min(params, tokens, loss) <= 0:
            raise ConfigError(f"{where}: run {i} has a params, tokens or loss <= 0")
        flops = float(item.get("flops") or 6 * params * tokens)
        budget = float(item.get("budget") or 0)
        found.append(FinishedRun(params, tokens, loss, flops, budget, str(item.get("label", ""))))
    return group_budgets(found)


def group_budgets(runs: list[FinishedRun]) -> list[FinishedRun]:
    """Runs without a planned budget take the first FLOPs of their group as theirs."""
    anchors: list[float] = sorted({r.budget for r in runs if r.budget})
    grouped = []
    for run in sorted(runs, key=lambda r: r.flops):
        if run.budget:
            grouped.append(run)
            continue
        near = [b for b in anchors if abs(run.flops / b - 1) < SAME_BUDGET]
        if not near:
            anchors.append(run.flops)
            near = [run.flops]
        grouped.append(FinishedRun(run.params, run.tokens, run.loss, run.flops, near[0], run.label))
    return grouped


def run_from_manifests(pretrain: dict, perplexity: dict, budget: float = 0.0) -> FinishedRun:
    """One variant of a sweep: N and FLOPs per token from its model config and vocabulary, D
    from the tokens it trained on, the loss its `perplexity` measured on the validation split."""
    from lmforge.model.flops import compute_parameters, training_flops_per_token
    from lmforge.pipeline.scaling.shapes import model_config

    summary = pretrain.get("summary", {})
    model = (pretrain.get("config") or {}).get("model")
    vocab = (
        summary.get("vocab_size")
        or perplexity.get("summary", {}).get("vocab_size")
        or (pretrain.get("estimate") or {}).get("size", {}).get("vocab_size")
    )
    loss = perplexity.get("summary", {}).get("val_loss")
    tokens = summary.get("tokens")
    if not model or not vocab or not loss or not tokens:
        raise ConfigError(
            f"pretrain {pretrain.get('key', '?')}: its manifest lacks the model, vocabulary, "
            "tokens or its perplexity's val_loss: rerun it with this version"
        )
    cfg = model_config(model, int(vocab))
    return FinishedRun(
        params=float(compute_parameters(cfg)),
        tokens=float(tokens),
        loss=float(loss),
        flops=float(tokens) * training_flops_per_token(cfg),
        budget=budget,
        label=f"d{cfg.d_model}xL{cfg.n_layer}",
    )


def read_runs(runs_path: str | None) -> list[FinishedRun]:
    """The runs of `--runs FILE` (a sweep's are read by `sweep_runs`)."""
    if not runs_path:
        raise ConfigError(
            "give the runs to fit: --runs FILE, a JSON list of {params, tokens, loss}, or "
            "--sweep ID|latest, a grid of `lmforge scaling run`"
        )
    path = Path(runs_path).expanduser()
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"--runs {path}: no such file") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--runs {path}: not JSON ({exc})") from exc
    if isinstance(items, dict):
        items = items.get("runs")
    return runs_from_json(items, str(path))
