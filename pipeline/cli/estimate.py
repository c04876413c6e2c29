"""`lmforge estimate`: plan a run before paying for it.

lmforge estimate [preset=...] [key=value ...] --docs N --bytes B --nodes K --cpus-per-node C
    [--gpus-per-node G --gpu-peak-tflops F] [--gpu-memory M] [--memory-per-node M] [--json]
lmforge estimate --calibrate [--quick]     # refit the coefficients on this machine
lmforge estimate --compute-budget C | --target-loss L [--fit ID|latest|PATH] [...]
    # the compute-optimal run from a scaling fit (pipeline/cli/estimate_budget.py)

Sizes take units (`256GB`, `1TB`, `64GiB`), counts `1e9` or `10M`. Without a cluster shape it
plans for this machine. It answers at once: no Ray, no data read.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.estimate.coefficients import coefficients_path, load_coefficients
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.quantities import (
    format_bytes,
    format_duration,
    format_mb,
    parse_bytes,
    parse_count,
)

BYTES_PER_DOC = 2000
"""Assumed bytes of text per document when only one of --docs / --bytes is given (C4: 156B
tokens in 365M documents, about 1.9 KB of text each)."""


def register(sub, with_overrides) -> None:
    """Add `estimate` to the `lmforge` parser."""
    p = with_overrides(sub.add_parser("estimate", help="predict time, memory, storage per stage"))
    add_corpus_and_cluster(p)
    p.add_argument("--json", action="store_true", help="one stable JSON object")
    p.add_argument("--calibrate", action="store_true", help="refit coefficients on this machine")
    p.add_argument("--quick", action="store_true", help="with --calibrate: the smallest sizes")
    p.add_argument(
        "--compute-budget", help="plan the compute-optimal run: FLOPs (1e18) or GPU-hours (500gpuh)"
    )
    p.add_argument("--target-loss", type=float, help="plan the cheapest run reaching this loss")
    p.add_argument("--fit", default="latest", help="the scaling fit: ID, latest or PATH")
    p.set_defaults(handler=estimate_handler)


def add_corpus_and_cluster(p: argparse.ArgumentParser) -> None:
    """The corpus, cluster and coefficients flags of every command that prices a run."""
    p.add_argument("--docs", help="documents in the corpus (1e9, 10M)")
    p.add_argument("--bytes", help="text in the corpus, uncompressed (1TB, 256GB)")
    p.add_argument("--nodes", type=int, help="nodes (default 1: this machine)")
    p.add_argument("--cpus-per-node", type=int, help="CPUs per node (default: this machine's)")
    p.add_argument("--memory-per-node", help="RAM per node (512GB; default: this machine's)")
    p.add_argument("--gpus-per-node", type=int, default=0)
    p.add_argument("--gpu-peak-tflops", type=float, help="one GPU's dense bf16 peak (H100: 989)")
    p.add_argument("--gpu-memory", help="one GPU's memory (80GB)")
    p.add_argument("--mfu", type=float, help="assumed GPU model FLOPs utilisation (0.35)")
    p.add_argument("--keep-fraction", type=float, help="share of documents clean keeps (0.6)")
    p.add_argument("--bytes-per-token", type=float, help="text bytes per token (from vocab)")
    p.add_argument("--coefficients", help="a coefficients JSON (default: calibrated, shipped)")


def estimate_handler(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.estimate.prediction import estimate_run

    workdir = Path(config["workdir"]).expanduser().resolve()
    if args.calibrate:
        from lmforge.pipeline.estimate.calibrate import calibrate

        calibrate(workdir, quick=args.quick)
        return 0
    if args.compute_budget or args.target_loss is not None:
        return _budget(args, config, workdir)
    path = coefficients_path(args.coefficients, workdir)
    coefficients = load_coefficients(path)
    coefficients.setdefault("fitted_on", {})["path"] = str(path)
    result = estimate_run(config, corpus_of(args), cluster_of(args), coefficients)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render(result))
    return 0


def _budget(args: argparse.Namespace, config: dict, workdir: Path) -> int:
    """The compute-optimal run of a scaling fit, priced (`estimate_budget.py`)."""
    from lmforge.pipeline.cli.estimate_budget import plan_for_budget

    given = corpus_of(args) if (args.docs or args.bytes) else None
    planned = plan_for_budget(args, config, workdir, cluster_of(args), given)
    if args.json:
        print(json.dumps(planned.run.to_json() | planned.data, indent=2))
    else:
        print("\n".join(planned.lines) + "\n\n" + render(planned.run))
    return 0


def _parse(parse, text: str | None, flag: str):
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from exc


def corpus_of(args: argparse.Namespace) -> dict[str, float]:
    """What flows into `clean`: documents and bytes, and the assumptions the user overrode."""
    docs = _parse(parse_count, args.docs, "--docs")
    size = _parse(parse_bytes, args.bytes, "--bytes")
    if docs is None and size is None:
        raise ConfigError("give the corpus size: --docs N and/or --bytes B (e.g. --bytes 1TB)")
    corpus = {
        "docs": docs if docs is not None else size / BYTES_PER_DOC,
        "bytes": size if size is not None else docs * BYTES_PER_DOC,
    }
    for name in ("keep_fraction", "bytes_per_token", "mfu"):
        value = getattr(args, name)
        if value is not None:
            if value <= 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {value}")
            corpus[name] = value
    return corpus


def cluster_of(args: argparse.Namespace) -> Cluster:
    """The cluster on the command line, this machine for what it leaves out."""
    memory = _parse(parse_bytes, args.memory_per_node, "--memory-per-node")
    gpu_memory = _parse(parse_bytes, args.gpu_memory, "--gpu-memory")
    nodes = args.nodes if args.nodes is not None else 1
    cpus = args.cpus_per_node if args.cpus_per_node is not None else (os.cpu_count() or 1)
    if nodes < 1 or cpus < 1 or args.gpus_per_node < 0:
        raise ConfigError("--nodes and --cpus-per-node must be >= 1, --gpus-per-node >= 0")
    return Cluster(
        nodes=nodes,
        cpus_per_node=cpus,
        memory_per_node=memory if memory is not None else _this_machine_memory(),
        gpus_per_node=args.gpus_per_node,
        gpu_peak_flops=args.gpu_peak_tflops * 1e12 if args.gpu_peak_tflops else None,
        gpu_memory=gpu_memory,
    )


def _this_machine_memory() -> int | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return pages * size


def render(result) -> str:
    """The estimate as a table, the bounding stage and the flags."""
    c = result.cluster
    shape = f"{c.nodes} node(s) x {c.cpus_per_node} CPUs"
    if c.gpus_per_node:
        peak = f", {c.gpu_peak_flops / 1e12:.0f} TFLOP/s" if c.gpu_peak_flops else ""
        shape += f" + {c.gpus_per_node} GPUs{peak}"
    if c.memory_per_node:
        shape += f", {format_mb(c.memory_per_node / 2**20)} RAM each"
    lines = [
        f"corpus: {result.corpus['docs']:.3g} documents, {format_bytes(result.corpus['bytes'])}"
        f" of text; cluster: {shape}",
        f"coefficients: {result.coefficients_source.get('path', '?')}"
        f" (fitted {result.coefficients_source.get('date', '?')} on "
        f"{result.coefficients_source.get('machine', '?')})",
        "",
        f"{'stage':<16}{'wall':>9}  {'largest process':<30}{'coordinator':>12}{'store':>11}  fits",
    ]
    for s in result.stages:
        largest = f"{s.largest_process} {format_mb(s.peak_rss_mb)}"
        lines.append(
            f"{s.stage:<16}{format_duration(s.wall_s):>9}  {largest:<30}"
            f"{format_mb(s.coordinator_rss_mb):>12}{format_bytes(s.store_bytes):>11}  "
            f"{'yes' if s.fits else 'NO'}"
        )
    lines += [
        "",
        f"run: {format_duration(result.total_wall_s)} along "
        f"{' -> '.join(result.critical_path)}; "
        f"{format_bytes(sum(s.store_bytes for s in result.stages))} written; "
        f"bounded by {result.bound_stage}",
    ]
    for s in result.stages:
        if s.notes:
            lines.append(f"  {s.stage}: {'; '.join(s.notes)}")
    for f in result.flags:
        needs = (
            f" needs {format_mb(f.needs_mb)} of {format_mb(f.available_mb)}"
            if f.available_mb
            else ""
        )
        lines.append(f"DOES NOT FIT: {f.stage} {f.process}{needs}: change {f.change}")
    return "\n".join(lines)
