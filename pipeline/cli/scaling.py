"""`lmforge scaling`: plan a grid of runs for a scaling law, and fit one to finished runs.

lmforge scaling plan --budgets 1e13,3e13,1e14 [--sizes 4] [--max-epochs 4] [--fit ID] [preset=...]
    [--docs N --bytes B] [cluster flags of `lmforge estimate`] [--json]
lmforge scaling run --budgets 1e13,3e13,1e14 [--sizes 4] [--max-concurrent K] [preset=...]
    (the grid as a sweep: pipeline/cli/scaling_run.py)
lmforge scaling fit --runs RUNS.json | --sweep ID|latest [--out DIR] [--bootstrap 200] [--seed 0]

The method and its limits: docs/scaling.md. `plan` and `fit` answer without Ray; `plan` prices
every run with the cost models of `lmforge estimate`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.quantities import format_duration


def register(sub, with_overrides) -> None:
    """Add `scaling plan`, `scaling run` and `scaling fit` to the `lmforge` parser."""
    from lmforge.pipeline.cli.estimate import add_corpus_and_cluster
    from lmforge.pipeline.cli.scaling_run import add_run_parser

    scaling = sub.add_parser("scaling", help="scaling laws: plan a grid, fit it")
    verbs = scaling.add_subparsers(dest="verb", required=True)
    plan = with_overrides(verbs.add_parser("plan", help="model shapes and tokens per budget"))
    plan.add_argument("--budgets", required=True, help="compute budgets in FLOPs (1e13,3e13)")
    plan.add_argument("--sizes", type=int, default=4, help="shapes per budget (default 4)")
    plan.add_argument(
        "--max-epochs", type=float, default=4.0, help="refuse runs repeating the corpus more"
    )
    plan.add_argument("--json", action="store_true", help="the grid as JSON")
    plan.add_argument("--fit", help="centre on this scaling fit's N*(C) (ID, latest or PATH)")
    add_corpus_and_cluster(plan)
    plan.set_defaults(handler=plan_handler)
    add_run_parser(verbs, with_overrides)
    fit = with_overrides(verbs.add_parser("fit", help="fit L(N, D) to finished runs"))
    fit.add_argument("--runs", help="a JSON list of runs: {params, tokens, loss[, flops]}")
    fit.add_argument("--sweep", help="a grid of `scaling run`: its ID or latest")
    fit.add_argument("--out", help="where the fit goes (default: WORKDIR/scaling/fit-<time>)")
    fit.add_argument("--bootstrap", type=int, default=200, help="resamples for the intervals")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--no-mlflow", action="store_true", help="do not log an MLflow run")
    fit.set_defaults(handler=fit_handler)


def plan_handler(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.cli.estimate import cluster_of, corpus_of
    from lmforge.pipeline.estimate.coefficients import coefficients_path, load_coefficients
    from lmforge.pipeline.scaling.budget_plan import fitted_optimum
    from lmforge.pipeline.scaling.corpus_size import corpus_size
    from lmforge.pipeline.scaling.grid_cost import price_grid
    from lmforge.pipeline.scaling.plan import parse_budgets, plan_grid
    from lmforge.pipeline.scaling.shapes import model_config

    workdir = Path(config["workdir"]).expanduser().resolve()
    given = corpus_of(args) if (args.docs or args.bytes) else None
    size = corpus_size(given, workdir)
    coefficients = load_coefficients(coefficients_path(args.coefficients, workdir))
    cluster = cluster_of(args)
    train_tokens = size.train_tokens or _estimated_train_tokens(config, size, cluster, coefficients)
    base = model_config(config["model"], config["tokenizer"]["vocab_size"])
    batch_tokens = config["train"]["global_batch_size"] * base.block_size
    variants = plan_grid(
        parse_budgets(args.budgets),
        args.sizes,
        base,
        batch_tokens,
        train_tokens,
        max_epochs=args.max_epochs,
        optimum=fitted_optimum(args.fit, workdir, base) if args.fit else None,
    )
    priced = price_grid(variants, args.overrides, size.corpus, cluster, coefficients)
    if args.json:
        print(json.dumps({"train_tokens": train_tokens, "runs": priced}, indent=2))
        return 0
    print(
        f"corpus: {train_tokens:.3g} training tokens ({size.source}); "
        f"batch {batch_tokens} tokens a step"
    )
    header = f"{'budget':>9} {'shape':<11}{'N':>9}{'tokens':>10}{'steps':>7}{'epochs':>7}"
    print(f"{header}{'FLOPs':>10}{'run':>9}")
    for run in priced:
        print(
            f"{run['budget']:>9.3g} {run['shape']:<11}{run['params']:>9.3g}{run['tokens']:>10.3g}"
            f"{run['steps']:>7}{run['epochs']:>7.2f}{run['flops']:>10.3g}"
            f"{format_duration(run['predicted_s']):>9}"
        )
    for budget in sorted({run["budget"] for run in priced}):
        shapes = sum(run["budget"] == budget for run in priced)
        if shapes < args.sizes:  # two targets fell on one shape of the family
            print(f"budget {budget:.3g}: {shapes} distinct shapes of the {args.sizes} asked")
    shared = priced[0]["shared_s"] if priced else 0.0
    total = shared + sum(run["predicted_s"] for run in priced)
    print(
        f"shared stages (clean, tokenizer, tokenize) once: {format_duration(shared)}; "
        f"the grid, one run after another: {format_duration(total)}"
    )
    return 0


def _estimated_train_tokens(config, size, cluster, coefficients) -> float:
    from lmforge.pipeline.estimate.prediction import estimate_run

    result = estimate_run(config, size.corpus, cluster, coefficients)
    return float(result.handed.get("tokenize", {}).get("train_tokens", 0.0)) or 0.0


def fit_handler(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.scaling.fit_record import FITS, write_fit
    from lmforge.pipeline.scaling.runs_input import read_runs

    workdir = Path(config["workdir"]).expanduser().resolve()
    if args.runs and args.sweep:
        raise ConfigError("give --runs FILE or --sweep ID, not both")
    origin, parent, out = {}, None, Path(args.out).expanduser() if args.out else None
    if args.sweep:
        from lmforge.pipeline.scaling.sweep_runs import (
            corpus_keys,
            grid_sweep,
            scored_tokens,
            sweep_runs,
        )
        from lmforge.pipeline.sweep.variant_figures import open_config_store

        record = grid_sweep(workdir, args.sweep)
        store = open_config_store(config, workdir)
        runs = sweep_runs(record, store)
        origin = {
            "sweep_id": record.sweep_id,
            "corpus": corpus_keys(record),
            "val_tokens_scored": scored_tokens(record, store),
        }
        parent, out = record.mlflow_run_id, out or workdir / FITS / record.sweep_id
    else:
        runs = read_runs(args.runs)
    out = write_fit(
        runs,
        workdir=workdir,
        out=out,
        resamples=args.bootstrap,
        seed=args.seed,
        mlflow=not args.no_mlflow,
        tracking=config,
        origin=origin,
        parent_run_id=parent,
    )
    print(out.summary)
    print(f"fit: {out.path}")
    if args.sweep:  # a fit of a corpus and tokenizer the workdir's models may share
        print(
            "model cards written from now on place their model against it; an earlier card "
            "shows it once rewritten: `lmforge rerun report` with that run's overrides"
        )
    return 0
