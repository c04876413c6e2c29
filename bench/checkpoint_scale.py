"""Training state at scale: sharded asynchronous checkpoints against the gathered ones of before.

Two CPU workers (gloo, DeepSpeed ZeRO-3, one thread each, fresh processes per contender) train a
GPT of `--size` (`full`: ~250M parameters, d_model 1024, 16 layers, vocab 50304; `small`: ~5M,
a minute or two) on random tokens and save, resume and export its state twice over:

- `today`: the gathered path this project used before: the model built whole on every rank and
  then partitioned, `gather_full_state` on every rank, rank 0 writing one consolidated
  checkpoint and hashing it by reading it back, every rank reading and restoring the full
  state, and an export that loads parameters and moments in one process;
- `sharded`: the model built under `deepspeed.zero.Init`, every rank writing its own shard
  (hashed as written) and reading back only its ranges, an asynchronous save, and the export
  streamed out of the shards in a Ray task.

Memory is measured (VmHWM of /proc/self/status, reset before each phase, minus the RSS when the
phase started), per worker; figures are the larger of the two workers. Keys of the last line:
`params`; `save_rss_rise_mb` (the first synchronous save, which maps the staging regions the
later saves reuse); `save_s` (a synchronous save after the first; `first_save_s`: the first);
`hashed_over_written` (bytes hashed per save over bytes written; `hash_reread_mb`: bytes read
back to hash them); `async_stall_share` (the extra wall time of the training steps that overlap
an asynchronous save, over `save_s`, a synchronous save of the same state; `today` has no
asynchronous save: 1.0); `load_rss_rise_mb`;
`export_peak_rss_over_weights` (the export's peak RSS above its RSS when it started, over the
fp32 weights); `zero3_setup_rss_over_weights` (the peak RSS rise per rank while the ZeRO-3 model
is built, over the full fp32 weights) and `zero3_engine_rss_over_weights` (the whole engine
set-up, which adds the rank's fp32 master partition and AdamW moments: 2 x 0.5 + 0.5 of the
weights on two ranks, by design); `worker_cpu_s` (CPU seconds of both workers);
`export_cpu_s` (CPU seconds of the export process); `ray_train_copy_bytes` (what Ray Train copies
of the final checkpoint). Each `today_*` key holds
the gathered figure.

    .venv/bin/python bench/checkpoint_scale.py [--size full|small]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import deepspeed
import ray
import torch
import torch.distributed as dist

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.hf_export import export_hf
from lmforge.model.weights import load_model_dir, save_model_dir, weight_shapes
from lmforge.pipeline.cluster.process_stats import reset_peak_rss, rss_bytes, task_peak_rss_bytes
from lmforge.pipeline.storage import digests
from lmforge.pipeline.training.checkpoint import bucket as remote_checkpoints
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint import store as checkpoint_store
from lmforge.pipeline.training.checkpoint.async_save import CheckpointSaver
from lmforge.pipeline.training.checkpoint.resume import choose_checkpoint
from lmforge.pipeline.training.checkpoint.zero_shards import needed_ranges, restore_local
from lmforge.pipeline.training.checkpoint.zero_state import (
    ensure_adam_state,
    gather_full_state,
    restore_full_state,
)
from lmforge.pipeline.training.collectives import all_gather
from lmforge.pipeline.training.deepspeed_config import deepspeed_config
from lmforge.pipeline.training.export import HFExport, export_checkpoint
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_model, build_optimizer

SIZES = {
    "full": ModelConfig(
        vocab_size=50304, block_size=128, d_model=1024, n_head=16, n_layer=16, d_ff=4096
    ),
    "small": ModelConfig(
        vocab_size=8192, block_size=64, d_model=256, n_head=4, n_layer=4, d_ff=1024
    ),
}
TRAIN = TrainConfig(
    zero_stage=3, num_workers=2, global_batch_size=2, micro_batch_size=1, lr=1e-4,
    warmup_steps=0, cpus_per_worker=1,
)  # fmt: skip
WORLD = 2
CPU = torch.device("cpu")
MB = 1 << 20
MAX_OVERLAP = 20
"""Training steps at most while an asynchronous save is in flight (then it is waited for)."""
BASE_STEPS, WINDOWS = 2, 5
"""Plain steps before and after each of WINDOWS asynchronous saves: the baseline step time is
their median, taken around the saves (other work on a shared machine moves it). A save that
ends within one step is measured by that step's excess alone, which step-time noise swamps
(the steps of `full` take seconds): the stall is the median over the windows."""


class Phase:
    """Peak RSS rise, wall time and CPU time of a block of work in this process."""

    def __enter__(self) -> Phase:
        reset_peak_rss()  # hands freed memory back first: the rise is over what is still held
        self.before = rss_bytes() or 0
        self.start, self.cpu_start = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start
        self.cpu_s = time.process_time() - self.cpu_start
        self.rise = max(0, task_peak_rss_bytes() - self.before)


def worker(rank: int, port: int, mode: str, size: str, root: str) -> None:
    """One training rank: set up, train, save, resume; writes its figures as JSON."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank))
    os.environ.update(WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    hashed = _count_hashing()
    torch.manual_seed(0)
    ds_config = deepspeed_config(TRAIN, WORLD)
    model_cfg = SIZES[size]
    with Phase() as engine_setup:
        with Phase() as model_setup:  # today: whole on every rank (build_engine before zero.Init)
            model = GPT(model_cfg) if mode == "today" else build_model(model_cfg, ds_config, CPU)
        engine, *_ = deepspeed.initialize(
            model=model, optimizer=build_optimizer(model, TRAIN, CPU), config=ds_config
        )
        ensure_adam_state(engine)
        del model
    step = _trainer(engine)
    for i in range(2):
        step(i)
    checkpoints = Path(root) / f"{mode}-checkpoints"
    run = _today if mode == "today" else _sharded
    figures = run(engine, rank, checkpoints, step, hashed)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures |= {
        "model_rise": model_setup.rise,
        "engine_rise": engine_setup.rise,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }
    (Path(root) / f"{mode}-rank{rank}.json").write_text(json.dumps(figures))
    dist.destroy_process_group()


def _today(engine, rank: int, checkpoints: Path, step, hashed: dict) -> dict:
    """Gather the full state on every rank, rank 0 writes it; every rank reads it all back."""
    with Phase() as save:
        params, moments = gather_full_state(engine)
        if rank == 0:
            remote_checkpoints.save(str(checkpoints), params, moments, _state(2), keep=1)
        del params, moments
        dist.barrier()
    reread_in_save = hashed["bytes"]
    location = checkpoints / "step_000002"
    with Phase() as load:
        loaded = ckpt.load_checkpoint(location)
        restore_full_state(engine, loaded.params, loaded.moments, 2)
        del loaded
    written = sum(p.stat().st_size for p in location.iterdir()) if rank == 0 else 0
    return {
        "save_rise": save.rise,
        "save_s": save.seconds,
        "written": written,
        "hashed": reread_in_save,  # rank 0 hashes by reading the files back
        "reread": reread_in_save,
        "load_rise": load.rise,
        "location": str(location),
    }


def _sharded(engine, rank: int, checkpoints: Path, step, hashed: dict) -> dict:
    """Each rank saves its shard (once synchronously, then asynchronously while training) and
    reads back only its ranges."""
    saver = CheckpointSaver(engine, str(checkpoints), rank, WORLD, keep=2)
    with Phase() as save:  # the first save: its memory rise includes the staging regions
        saver.save(_state(2))
        published = saver.wait()
    reread_in_save = hashed["bytes"]
    with Phase() as again:  # the synchronous save the asynchronous ones are measured against
        saver.save(_state(3))
        saver.wait()
    listed = checkpoint_store.CheckpointStore(str(checkpoints)).listed(published.location)
    written = sum(meta["bytes"] for meta in listed.values()) if rank == 0 else 0
    base, windows = [_timed(step, 2 + i) for i in range(BASE_STEPS)], []
    for window in range(WINDOWS):  # base steps, a save and the steps it overlaps, ...
        windows.append(_async_window(saver, step, 100 * (window + 1)))
        base += [_timed(step, 100 * (window + 1) + 50 + i) for i in range(BASE_STEPS)]
    baseline = statistics.median(base)
    with Phase() as load:
        ranges = needed_ranges(engine, rank)
        chosen = choose_checkpoint(str(checkpoints), rank, WORLD, ranges)
        restore_local(engine, chosen.layout.reader(chosen.directory), rank, 2)
    return {
        "save_rise": save.rise,
        "first_save_s": save.seconds,
        "save_s": again.seconds,
        "written": written,  # every rank's files, counted once; the writers hash as they write
        "hashed": written + reread_in_save,
        "reread": reread_in_save,
        "stall": statistics.median((s - k * baseline) / again.seconds for s, k in windows),
        "stalls": [round((s - k * baseline) / again.seconds, 3) for s, k in windows],
        "overlap_steps": [k for _, k in windows],
        "overlapped_s": [round(s, 2) for s, _ in windows],
        "step_s": baseline,
        "load_rise": load.rise,
        "location": saver.wait().location,
    }


def _count_hashing() -> dict:
    """Count the bytes that checkpoints read back to hash them: `digests.digest_file`, wherever
    they call it (the gathered path's marker, every verification)."""
    counter = {"bytes": 0}
    real = digests.digest_file

    def counting(path, *args, **kwargs):
        counter["bytes"] += Path(path).stat().st_size
        return real(path, *args, **kwargs)

    digests.digest_file = counting
    return counter


def _trainer(engine):
    train_step = TrainStep(engine, TRAIN, CPU, WORLD)
    vocab, block = engine.module.config.vocab_size, engine.module.config.block_size

    def step(i: int) -> float:
        g = torch.Generator().manual_seed(i)
        tokens = torch.randint(0, vocab, (1, block + 1), generator=g)
        return train_step([(tokens[:, :-1], tokens[:, 1:])], TRAIN.lr).loss

    return step


def _async_window(saver, step, first: int) -> tuple[float, int]:
    """(seconds, steps) from starting an asynchronous save to the end of the first training
    step after which every rank's writer is done (the save is then published)."""
    start, steps = time.perf_counter(), 0
    saver.save(_state(first))
    while steps < MAX_OVERLAP:
        step(first + steps)
        steps += 1
        if not any(all_gather(saver.in_flight, WORLD)):
            break
    saver.wait()
    return time.perf_counter() - start, steps


def _timed(step, i: int) -> float:
    start = time.perf_counter()
    step(i)
    return time.perf_counter() - start


def _state(step: int):
    return ckpt.TrainerState(
        step=step, adam_step=step, sampler_position=0, tokens_seen=0, seed=0, n_windows=1,
        world_size=WORLD,
    )  # fmt: skip


def run_workers(mode: str, size: str, root: Path) -> list[dict]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r, port, mode, size, str(root))) for r in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise SystemExit(f"checkpoint_scale: a {mode} worker failed (exit {proc.exitcode})")
    return [json.loads((root / f"{mode}-rank{r}.json").read_text()) for r in range(2)]


def export_today(location: str, out: str, size: str) -> None:
    """The old export, in this (fresh) process: parameters and moments loaded, then a model
    built and written, read back and exported to HF. Prints its RSS rise as JSON."""
    with Phase() as export:
        loaded = ckpt.load_checkpoint(location)
        model = GPT(SIZES[size])
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(loaded.params[name])
        save_model_dir(model, Path(out) / "model")
        del model
        export_hf(load_model_dir(Path(out) / "model"), Path(out) / "hf")
        del loaded
    print(json.dumps({"rise": export.rise, "cpu_s": export.cpu_s}))


def export_sharded(location: str, size: str, out: Path) -> tuple[int, float]:
    """The pretrain stage's export task, on a local Ray: its RSS rise and CPU seconds (in a task
    at either size; the stage exports models of up to `IN_PROCESS_WEIGHTS` in its own process)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        hf = HFExport(out_dir=str(out / "hf"), tokenizer_dir=None, eos_token_id=None)
        result = export_checkpoint(location, SIZES[size], str(out / "model"), hf, in_process=False)
    finally:
        ray.shutdown()
    return result["export_rss_rise_bytes"], result["export_cpu_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument(
        "--export-today", nargs=2, metavar=("CHECKPOINT", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.export_today:
        export_today(*args.export_today, args.size)
        return
    params = sum(math.prod(s) for s in weight_shapes(SIZES[args.size]).values())
    weights = 4 * params
    with tempfile.TemporaryDirectory(prefix="lmforge-bench-ckpt-") as tmp:
        root = Path(tmp)
        today = run_workers("today", args.size, root)
        sharded = run_workers("sharded", args.size, root)
        command = [sys.executable, __file__, "--size", args.size, "--export-today"]
        proc = subprocess.run(
            [*command, today[0]["location"], str(root / "today-export")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        today_export = json.loads(proc.stdout.strip().splitlines()[-1])
        sharded_export = export_sharded(sharded[0]["location"], args.size, root / "export")
        ray_copy_today = sum(p.stat().st_size for p in Path(today[0]["location"]).iterdir())
    figures = {
        "save_rss_rise_mb": [max(r["save_rise"] for r in rows) / MB for rows in (today, sharded)],
        "save_s": [max(r["save_s"] for r in rows) for rows in (today, sharded)],
        "hashed_over_written": [
            sum(r["hashed"] for r in rows) / sum(r["written"] for r in rows)
            for rows in (today, sharded)
        ],
        "hash_reread_mb": [sum(r["reread"] for r in rows) / MB for rows in (today, sharded)],
        "async_stall_share": [1.0, max(r["stall"] for r in sharded)],
        "load_rss_rise_mb": [max(r["load_rise"] for r in rows) / MB for rows in (today, sharded)],
        "export_peak_rss_over_weights": [
            today_export["rise"] / weights,
            sharded_export[0] / weights,
        ],
        "export_cpu_s": [today_export["cpu_s"], sharded_export[1]],
        "zero3_setup_rss_over_weights": [
            max(r["model_rise"] for r in rows) / weights for rows in (today, sharded)
        ],
        "zero3_engine_rss_over_weights": [
            max(r["engine_rise"] for r in rows) / weights for rows in (today, sharded)
        ],
        "worker_cpu_s": [sum(r["cpu_s"] for r in rows) for rows in (today, sharded)],
        "ray_train_copy_bytes": [ray_copy_today, len(json.dumps({"location": "", "step": 0}))],
    }
    print(f"{args.size}: {params / 1e6:.1f}M parameters, fp32 weights {weights / MB:.0f} MB")
    print(f"{'figure':<32}{'today (gathered)':>18}{'sharded':>12}")
    for key, (old, new) in figures.items():
        print(f"{key:<32}{old:>18.3f}{new:>12.3f}")
    row = sharded[0]
    print(
        f"async saves overlapped {row['overlap_steps']} training steps in {row['overlapped_s']} s;"
        f" median plain step {row['step_s']:.2f} s; stall per save {row['stalls']}"
    )
    out = {"bench": "checkpoint_scale", "size": args.size, "params": params}
    out |= {key: round(new, 4) for key, (_, new) in figures.items()}
    out["first_save_s"] = round(max(r["first_save_s"] for r in sharded), 4)
    out |= {f"today_{key}": round(old, 4) for key, (old, _) in figures.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
