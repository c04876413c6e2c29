"""`lmforge sweep`, and the sweep's side of `status --sweep`, `report --sweep` and `submit`.

lmforge sweep [preset=...] KEY=a,b,c [KEY2=x,y ...] [--random N --seed S] [--max-concurrent K]
              [--early-stop [--grace-period STEPS] [--reduction-factor F]] [--until STAGE]
              [workdir=DIR]
lmforge status --sweep ID|latest [--json]
lmforge report --sweep ID|latest
lmforge submit --address URL sweep KEY=a,b ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lmforge.pipeline.errors import LmforgeError


def register(sub, with_overrides) -> None:
    """Add `sweep` to the parser, and its flags to `submit`."""
    from lmforge.pipeline.engine.stage_leases import LEASE_WAIT_HELP

    sweep = with_overrides(
        sub.add_parser("sweep", help="run variants of the pipeline over swept keys (key=a,b)")
    )
    add_sweep_flags(sweep)
    # `submit` has its own `--until`, which goes to the sweep it submits
    sweep.add_argument("--until", metavar="STAGE", help="each variant stops after STAGE")
    sweep.add_argument("--lease-wait", type=float, metavar="SECONDS", help=LEASE_WAIT_HELP)
    sweep.set_defaults(handler=sweep_handler)
    submit = sub.choices.get("submit")
    if submit is not None:
        add_sweep_flags(submit)


def add_sweep_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--random", type=int, metavar="N", help="N random variants of the grid")
    parser.add_argument("--seed", type=int, default=0, help="seed of --random (default 0)")
    parser.add_argument(
        "--max-concurrent", type=int, metavar="K", help="variants at once (default: all)"
    )
    parser.add_argument(
        "--early-stop", action="store_true", help="stop hopeless variants (ASHA on val_loss)"
    )
    parser.add_argument(
        "--grace-period",
        type=int,
        metavar="STEPS",
        help="with --early-stop: steps before ASHA's first rung (default: 2 x train.eval_every)",
    )
    parser.add_argument(
        "--reduction-factor",
        type=float,
        metavar="F",
        help="with --early-stop: ASHA keeps the best 1/F at each rung (default 2)",
    )


def sweep_parts(overrides: list[str], ray_address: str | None = None):
    """(overrides every variant shares, swept keys) of a command line's overrides."""
    from lmforge.pipeline.sweep.grid import split_overrides

    shared, swept = split_overrides(overrides)
    if ray_address:
        shared = [*shared, f"cluster.ray_address={ray_address}"]
    return shared, swept


def sweep_handler(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.sweep.driver import SweepOptions, run_sweep
    from lmforge.pipeline.sweep.grid import expand

    shared, swept = sweep_parts(args.overrides, getattr(args, "ray_address", None))
    variants = expand(swept, args.random, args.seed)
    options = SweepOptions(
        command="lmforge sweep " + " ".join(args.overrides),
        max_concurrent=args.max_concurrent,
        early_stop=args.early_stop,
        grace_period=args.grace_period,
        reduction_factor=args.reduction_factor,
        lease_wait_s=args.lease_wait,
        until=args.until,
    )
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise LmforgeError(f"--max-concurrent {args.max_concurrent}: give 1 or more")
    record = run_sweep(shared, variants, options)
    return 0 if record.state == "finished" else 1


def _sweep_record(config: dict, sweep_id: str):
    from lmforge.pipeline.sweep.records import SweepBook

    root = Path(config["workdir"]).expanduser().resolve()
    book = SweepBook(root / "sweeps")
    record = book.latest() if sweep_id == "latest" else book.find(sweep_id)
    if record is None:
        raise LmforgeError(
            f"no sweep {sweep_id!r} in {root}; start one with `lmforge sweep KEY=a,b`"
            if sweep_id != "latest"
            else f"no sweep in {root} yet; start one with `lmforge sweep KEY=a,b`"
        )
    return root, record


def sweep_status(args: argparse.Namespace, config: dict) -> int:
    """`lmforge status --sweep ID|latest [--json]`: the comparison table, or its rows."""
    from lmforge.pipeline.sweep.summary import rows, table

    _, record = _sweep_record(config, args.sweep)
    print(json.dumps(rows(record), indent=2) if args.json else table(record))
    return 0


def sweep_report(args: argparse.Namespace, config: dict) -> int:
    """`lmforge report --sweep ID|latest`: write the sweep's page and print its path."""
    from lmforge.pipeline.sweep.summary import write_page
    from lmforge.pipeline.sweep.variant_figures import loss_curves

    root, record = _sweep_record(config, args.sweep)
    page = write_page(record, loss_curves(config, root, record), root / "sweeps" / record.sweep_id)
    print(page.read_text(encoding="utf-8") if getattr(args, "print", False) else page)
    return 0
