"""Training throughput: lmforge's distributed training against a plain PyTorch loop, same model.

Two models (`--model`), trained for the same number of steps on the same memory-mapped token
shards, in the precision the tiny preset trains in on this CPU (`train.precision`; today
`bf16_if_native_except_amx`: bf16 autocast in both loops where AVX512-BF16 computes bf16 in
hardware, else fp32, AMX included):

- `base`: n_layer=4, n_head=4, d_model=256, block 256, vocab 8192, 8 sequences per step; lmforge
  runs one Ray Train worker under DeepSpeed ZeRO 0 holding all the CPUs (`lmforge`), and two
  workers under ZeRO 2 splitting them (`zero2_2workers`);
- `tiny`: the tiny preset's model, batch and layout, read from `conf/preset/tiny.yaml` (today
  n_layer=4, d_model=128, block 128, vocab 2048; two workers under ZeRO 1, one CPU each:
  `lmforge`); `--override key=value` changes the preset as on the command line of `lmforge run`
  (e.g. `train.global_batch_size=32`, `train.precision=bf16`, `train.pin_cpus=false`), to
  measure a layout before the preset takes it; the JSON line names the precision and pinning.

The cases and lmforge's runs are the `pretrain` calibration case's
(`pipeline/estimate/calibration/training_steps.py`).

`reference` is a plain loop written here (GPT, torch AdamW, clip_grad_norm_, one process, all
the CPUs); where the preset trains with `train.unlikelihood`, both loops add that term to
cross-entropy with the same function. Both time the steps the preset spends most of its run on:
its last steps' sequence-level unlikelihood term (`train.sequence_unlikelihood`), whose greedy
decoding is the same model work whatever drives the loop, is left out of both. Rates are
tokens per step over the median step time (steps after the first, so start-up and warm-up are
left out; the median keeps a burst of load from other processes on a shared machine from
deciding the result); the mean-based rate is printed beside it. The plain loop and lmforge
alternate `--repeats` times, the plain loop first and last, and each contender's steps are
pooled. Prints a table and, last, one JSON line: {"bench":
"train_throughput", "model": M, "unit": "tokens/s", "lmforge": X, "reference": Y, "ratio": X/Y}
(plus "zero2_2workers" for `base`, "unlikelihood" for a case trained with it). The goal is ratio
>= 0.95 for `base`, >= 0.9 for `tiny`. "data_wait_share" is the share of lmforge's step time
spent waiting for data, over all its runs (rank 0's step-time breakdown; the goal is < 2%).

`--compile` adds one more lmforge run with `train.compile=true` (the same layout, `torch.compile`
through DeepSpeed's `engine.compile()`) and reports "compiled" (tokens/s) and "compile_speedup"
(compiled / eager lmforge; below 1 is a slowdown). The compiled run's first step, which
compiles, is left out like every run's first step.

    .venv/bin/python bench/train_throughput.py [--model base|tiny] [--steps 20] [--cpus 2]
                                              [--repeats 2] [--compile] [--override K=V ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from lmforge.model.gpt import GPT
from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray
from lmforge.pipeline.estimate.calibration.training_steps import (
    SEED,
    Case,
    case_for,
    lmforge_run,
    write_shards,
)
from lmforge.pipeline.training.objectives.unlikelihood import training_objective
from lmforge.tokenizer.dataset import TokenDataset

WAITS: list[tuple[float, float]] = []
"""(seconds waiting for data, seconds of all the step's parts) of each lmforge run."""


def reference_loop(data_dir: Path, steps: int, threads: int, case: Case) -> list[float]:
    """Seconds of every step but the first of a plain PyTorch loop over the same windows."""
    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    dataset = TokenDataset(data_dir, "train", case.model.block_size)
    model = GPT(case.model)
    optimizer = torch.optim.AdamW(model.param_groups(0.1), lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    order = np.random.default_rng(SEED).permutation(len(dataset))
    times = [time.perf_counter()]
    for step in range(steps):
        ids = order[step * case.batch : (step + 1) * case.batch]
        tokens = torch.from_numpy(np.stack([dataset[int(i)] for i in ids]))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=case.bf16):
            loss, _, objective = training_objective(
                model, tokens[:, :-1], tokens[:, 1:], case.unlikelihood
            )
        objective.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        float(loss.detach())  # lmforge reads the loss every step too
        times.append(time.perf_counter())
    return list(np.diff(times)[1:])


def step_seconds(summary: dict) -> list[float]:
    """Seconds of every step but the first of an lmforge run (its rank 0's summary, from
    `lmforge_run`); its time waiting for data is noted in `WAITS`."""
    parts = {k: v for k, v in summary.items() if k.startswith("time_") and k.endswith("_s_total")}
    WAITS.append((summary["time_data_s_total"], sum(parts.values())))
    return list(summary["step_seconds"])


def median_rate(step_seconds: list[float], case: Case) -> float:
    return case.batch * case.model.block_size / float(np.median(step_seconds))


def mean_rate(step_seconds: list[float], case: Case) -> float:
    return case.batch * case.model.block_size / float(np.mean(step_seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per contender")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs to use")
    parser.add_argument("--repeats", type=int, default=2, help="lmforge/plain alternations")
    parser.add_argument("--model", choices=["base", "tiny"], default="base", help="which model")
    parser.add_argument(
        "--compile", action="store_true", help="also time lmforge with train.compile=true"
    )
    parser.add_argument(
        "--override",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="tiny: change the preset (model, train batch and layout) as `lmforge run` would",
    )
    args = parser.parse_args()
    if args.override and args.model != "tiny":
        parser.error("--override changes the tiny preset: use it with --model tiny")
    case = case_for(args.model, args.override)
    with tempfile.TemporaryDirectory(prefix="lmforge-bench-train-") as tmp:
        root = Path(tmp)
        data = write_shards(root / "shards", args.steps * case.batch + 1, case.model)
        # Ray runs workers at nice 15 by default; the reference loop runs at 0 in this process,
        # so on a machine shared with other work the comparison would not be like for like.
        os.environ.setdefault("RAY_worker_niceness", "0")
        ensure_ray(None, num_cpus=args.cpus, workdir=root)  # the pipeline's own local runtime
        plain, ours = reference_loop(data, args.steps, args.cpus, case), []
        for _ in range(args.repeats):  # alternate, so that a burst of foreign load hits both
            ours += step_seconds(lmforge_run(root, data, args.steps, case, cpus=args.cpus))
            plain += reference_loop(data, args.steps, args.cpus, case)
        zero2, compiled = [], []
        if args.model == "base":
            layout = dataclasses.replace(case, workers=2, stage=2, micro_batch=case.batch // 2)
            zero2 = step_seconds(lmforge_run(root, data, args.steps, layout, cpus=args.cpus))
        if args.compile:
            compiled = step_seconds(
                lmforge_run(root, data, args.steps, case, cpus=args.cpus, compile=True)
            )
        shutdown_ray()
    ours_name = f"lmforge, {case.workers} worker(s), ZeRO {case.stage}"
    rows = {"plain PyTorch loop": plain, ours_name: ours}
    if zero2:
        rows["lmforge, 2 workers, ZeRO 2"] = zero2
    if compiled:
        rows["lmforge, compiled"] = compiled
    print(f"{'contender':<36}{'median tok/s':>14}{'mean tok/s':>12}{'steps':>7}")
    for name, seconds in rows.items():
        median, mean = median_rate(seconds, case), mean_rate(seconds, case)
        print(f"{name:<36}{median:>14.0f}{mean:>12.0f}{len(seconds):>7}")
    lmforge, reference = median_rate(ours, case), median_rate(plain, case)
    goal = 0.95 if args.model == "base" else 0.9
    print(f"ratio lmforge / plain loop: {lmforge / reference:.3f} (goal >= {goal})")
    result = {
        "bench": "train_throughput",
        "model": args.model,
        "batch": case.batch,
        "layout": f"{case.workers} worker(s) x {case.micro_batch} sequences, ZeRO {case.stage}",
        "unit": "tokens/s",
        "precision": case.precision,
        "pin_cpus": case.pin_cpus,
        "keep_freed_memory": case.keep_freed_memory,
        "lmforge": round(lmforge, 1),
        "reference": round(reference, 1),
        "ratio": round(lmforge / reference, 4),
        "data_wait_share": round(sum(w for w, _ in WAITS) / max(sum(t for _, t in WAITS), 1e-9), 4),
    }
    if args.override:
        result["overrides"] = args.override
    if case.unlikelihood:
        result["unlikelihood"] = case.unlikelihood
    if zero2:
        result["zero2_2workers"] = round(median_rate(zero2, case), 1)
    if compiled:
        result["compiled"] = round(median_rate(compiled, case), 1)
        result["compile_speedup"] = round(median_rate(compiled, case) / lmforge, 4)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
