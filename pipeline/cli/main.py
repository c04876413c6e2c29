"""The `lmforge` command line (see README.md).

lmforge run [--until STAGE] [--verify] [--lease-wait S] [preset=tiny] [workdir=DIR] [key=value ...]
lmforge rerun STAGE [--downstream] [--verify] [--lease-wait S] [key=value ...]
lmforge status [--json] [--run ID | --sweep ID]
lmforge sweep KEY=a,b [KEY2=x,y ...] [--random N] [--max-concurrent K] [--early-stop] [--until S]
lmforge dag | ui | sample "PROMPT" | tokenize-text "TEXT"
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from pathlib import Path

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.redaction import redact_text

log = logging.getLogger("lmforge")

EXTENSION_MODULES = (
    "lmforge.pipeline.cluster.ray_jobs",
    "lmforge.pipeline.cli.estimate",
    "lmforge.pipeline.cli.sweep",
    "lmforge.pipeline.cli.scaling",
)
"""Modules adding subcommands: `register(subparsers, with_overrides)` adds parsers whose
`handler` default is `fn(args, config) -> int`."""


VERIFY_HELP = "check the sha256 of every cached file before reusing it (sizes are always checked)"


def add_lease_wait(parser: argparse.ArgumentParser) -> None:
    """`--lease-wait SECONDS`, on every command that runs the pipeline."""
    from lmforge.pipeline.engine.stage_leases import LEASE_WAIT_HELP

    parser.add_argument("--lease-wait", type=float, metavar="SECONDS", help=LEASE_WAIT_HELP)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lmforge", description="Raw text to an evaluated LM.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_overrides(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("overrides", nargs="*", help="config overrides, key=value")
        p.add_argument("--ray-address", help="attach to a Ray cluster (auto, ray://HOST:10001)")
        return p

    run = with_overrides(sub.add_parser("run", help="run the pipeline, reusing cached stages"))
    run.add_argument("--until", metavar="STAGE", help="stop after STAGE")
    run.add_argument("--verify", action="store_true", help=VERIFY_HELP)
    add_lease_wait(run)
    rerun = sub.add_parser("rerun", help="recompute STAGE even if cached")
    rerun.add_argument("stage")
    with_overrides(rerun)
    rerun.add_argument("--downstream", action="store_true", help="also recompute its descendants")
    rerun.add_argument("--verify", action="store_true", help=VERIFY_HELP)
    add_lease_wait(rerun)
    rerun.add_argument("--address", help="submit the rerun as a Ray Job (http://HEAD:8265)")
    rerun.add_argument("--no-wait", action="store_true", help="with --address: do not follow logs")
    status = with_overrides(sub.add_parser("status", help="state of the latest pipeline run"))
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    status.add_argument("--sweep", metavar="ID", help="a sweep's comparison (ID or latest)")
    with_overrides(sub.add_parser("dag", help="print the DAG"))
    ui = with_overrides(sub.add_parser("ui", help="MLflow UI on this workdir's tracking store"))
    ui.add_argument("--port", type=int, default=5000)
    sample = with_overrides(sub.add_parser("sample", help="continue a prompt with a trained model"))
    sample.add_argument("prompt")
    sample.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    sample.add_argument("--top-p", type=float, default=0.9)
    sample.add_argument("--top-k", type=int, default=0)
    sample.add_argument("--temperature", type=float, default=0.8)
    sample.add_argument("--max-new-tokens", type=int, default=64)
    sample.add_argument("--greedy", action="store_true")
    sample.add_argument("--seed", type=int, default=0)
    tok = with_overrides(sub.add_parser("tokenize-text", help="show the tokens of a string"))
    tok.add_argument("text")
    tok.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    inspect = sub.add_parser("inspect", help="documents a clean filter removed")
    inspect.add_argument("stage", choices=["clean"])
    with_overrides(inspect)
    inspect.add_argument("--filter", help="only this step or reason (e.g. gopher_quality, c4)")
    inspect.add_argument("--limit", type=int, default=5, help="documents shown per reason")
    inspect.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    evaluate = sub.add_parser("eval", help="evaluate a trained model on your own data")
    evaluate.add_argument("metric", choices=["perplexity"])
    with_overrides(evaluate)
    evaluate.add_argument(
        "--data", required=True, action="append", help="a text/JSONL/Parquet file (repeatable)"
    )
    evaluate.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    evaluate.add_argument("--stride", type=int, default=0, help="window stride (0 = block size)")
    report = with_overrides(sub.add_parser("report", help="print the model card's path"))
    report.add_argument("--run", default="latest", help="pipeline run id (default: latest)")
    report.add_argument("--print", action="store_true", help="print the model card itself")
    report.add_argument("--sweep", metavar="ID", help="write a sweep's page (ID or latest)")
    for module in EXTENSION_MODULES:
        importlib.import_module(module).register(sub, with_overrides)
    return parser


def _config(args: argparse.Namespace) -> dict:
    from lmforge.pipeline.config_tree import compose

    overrides = args.overrides
    if args.command == "sweep" or getattr(args, "sweep_job", False):
        from lmforge.pipeline.cli.sweep import sweep_parts

        overrides, _ = sweep_parts(overrides)  # each variant composes its own
    config = compose(overrides)
    if getattr(args, "ray_address", None):
        config["cluster"]["ray_address"] = args.ray_address
    return config


OVERRIDE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w.]*(=|$)")
"""A `key=value` config override; they may stand anywhere on the command line."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = [a for a in argv if OVERRIDE.match(a) and ("=" in a or a.startswith("~"))]
    rest = [a for a in argv if a not in overrides]
    sweep_job = rest[:1] == ["submit"] and "sweep" in rest  # `submit ... sweep KEY=a,b`
    if sweep_job:
        rest.remove("sweep")
    args = _parser().parse_args(rest)
    args.overrides = overrides
    args.sweep_job = sweep_job
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return _dispatch(args)
    except LmforgeError as exc:
        print(f"lmforge: error: {redact_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "lmforge: interrupted; completed stages and checkpoints are kept: "
            "`lmforge run` resumes",
            file=sys.stderr,
        )
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from lmforge.pipeline.cli import commands

    config = _config(args)
    if args.command == "rerun" and getattr(args, "address", None):
        from lmforge.pipeline.cluster.ray_jobs import submit_rerun

        return submit_rerun(args, config)
    handlers = {
        "run": commands.run,
        "rerun": commands.rerun,
        "status": commands.status,
        "dag": commands.dag,
        "ui": commands.ui,
        "sample": commands.sample,
        "tokenize-text": commands.tokenize_text,
        "inspect": commands.inspect_clean,
        "eval": commands.eval_perplexity,
        "report": commands.report,
    }
    handler = handlers.get(args.command) or args.handler
    return handler(args, config)


def workdir_of(config: dict) -> Path:
    return Path(config["workdir"]).expanduser().resolve()


if __name__ == "__main__":
    sys.exit(main())
