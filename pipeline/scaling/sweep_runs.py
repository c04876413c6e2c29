"""A scaling grid's sweep as a fit's input (`lmforge scaling fit --sweep ID|latest`): each
finished variant's N and D from its `pretrain` manifest and its loss from its `perplexity`
manifest (`runs_input.run_from_manifests`), at the budget the grid asked of it.

Refused in one line each, before anything is read from the store: a sweep that is not a scaling
grid; a grid that could not identify the law even once finished (fewer than 3 budgets, or a
budget with fewer than 3 sizes); variants that are not finished. The fit's record names the
corpus it was fitted on by its stages' cache keys (`corpus_keys`), so a model card can find the
fits of its own corpus and tokenizer.
"""

from __future__ import annotations

from pathlib import Path

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.scaling.law_fit import check_identified
from lmforge.pipeline.scaling.runs_input import FinishedRun, run_from_manifests
from lmforge.pipeline.sweep.records import SweepBook, SweepRecord

CORPUS_STAGES = ("clean", "train_tokenizer")
"""The stages whose keys say which corpus and tokenizer a fit's losses were measured on."""


def grid_sweep(workdir: Path, ref: str) -> SweepRecord:
    """The sweep `ref` names (`latest`: the newest scaling grid) in the workdir."""
    book = SweepBook(workdir / "sweeps")
    if ref == "latest":
        grids = [r for r in book.all() if r.scaling]
        if not grids:
            raise ConfigError(
                f"no scaling grid in {workdir}: run one with `lmforge scaling run --budgets ...`"
            )
        return grids[-1]
    record = book.find(ref)
    if record is None:
        raise ConfigError(f"--sweep {ref}: no such sweep in {workdir / 'sweeps'}")
    if not record.scaling:
        raise ConfigError(
            f"--sweep {ref} is not a scaling grid (`lmforge scaling run` makes one): export its "
            "runs as JSON ({params, tokens, loss} each) and pass --runs FILE"
        )
    return record


def planned_runs(record: SweepRecord) -> list[FinishedRun]:
    """The grid's runs as planned (a loss of 1 each): what identifies the law."""
    grid = (record.scaling or {}).get("variants", {})
    return [
        FinishedRun(v["params"], v["tokens"], 1.0, v["flops"], v["budget"], name)
        for name, v in grid.items()
    ]


def check_finished(record: SweepRecord) -> None:
    """One line when the grid cannot be fitted as it stands."""
    try:
        check_identified(planned_runs(record))
    except ConfigError as exc:
        raise ConfigError(f"sweep {record.sweep_id}: {exc}") from exc
    waiting = [v.variant for v in record.variants if v.state != "finished"]
    if waiting:
        shown = ", ".join(waiting[:4]) + (", ..." if len(waiting) > 4 else "")
        raise ConfigError(
            f"sweep {record.sweep_id}: {len(waiting)} of {len(record.variants)} variants not "
            f"finished ({shown}): run the same `lmforge scaling run` again to finish them"
        )


def sweep_runs(record: SweepRecord, store) -> list[FinishedRun]:
    """Each variant's N, D, FLOPs and loss from its manifests in `store`."""
    check_finished(record)
    grid = (record.scaling or {})["variants"]
    runs = []
    for variant in record.variants:
        keys = variant.stages
        pretrain = store.manifest("pretrain", keys["pretrain"]) or {}
        perplexity = store.manifest("perplexity", keys["perplexity"]) or {}
        run = run_from_manifests(pretrain, perplexity, float(grid[variant.variant]["budget"]))
        runs.append(
            FinishedRun(run.params, run.tokens, run.loss, run.flops, run.budget, variant.variant)
        )
    return runs


def scored_tokens(record: SweepRecord, store) -> int | None:
    """The validation tokens the grid's runs scored (the same slice for each)."""
    for variant in record.variants:
        key = variant.stages.get("perplexity")
        if key:
            summary = (store.manifest("perplexity", key) or {}).get("summary", {})
            return summary.get("val_tokens_scored")
    return None


def corpus_keys(record: SweepRecord) -> dict[str, list[str]]:
    """The cache keys of the clean and train_tokenizer stages the variants shared (each
    source's clean in a mixture), sorted."""
    found: dict[str, set[str]] = {stage: set() for stage in CORPUS_STAGES}
    for variant in record.variants:
        for name, key in variant.stages.items():
            base = name.split("[", 1)[0]
            if base in found:
                found[base].add(key)
    return {stage: sorted(keys) for stage, keys in found.items()}
