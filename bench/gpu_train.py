"""Pretraining on one GPU: the branches only a GPU runs, measured against a plain PyTorch loop.

The `gpu` preset's model (GPT-2 small) trains in one process on one CUDA device (NCCL, a world
of one) through lmforge's own pieces: `build_engine` (DeepSpeed, bf16 autocast, `torch.compile`),
`TrainStep`, `CheckpointSaver` (its rank's state staged out of GPU memory) and `restore_local`.
The data is a seeded low-entropy Markov chain over 512 of the vocabulary's tokens (each has 4
successors), so a model that learns shows it within a few dozen steps: the loss falls from
ln(vocab) towards ln(4).

Cases, in one run:
- `throughput`: tokens/s of lmforge's step as the pretrain stage's one worker runs it (the
  preset's ZeRO-2 runs as ZeRO-0 on one worker: `engine_zero_stage`), compiled, against a plain
  loop with the same model, batch, bf16 autocast, `torch.compile` and fused AdamW; the same two
  in eager mode, and lmforge compiled under a literal ZeRO-2 (`zero2_ratio`); MFU against the
  device's data-sheet bf16 peak.
- `checkpoint`: on the compiled engine, a synchronous sharded save, then asynchronous saves
  while training goes on; the stall is the extra wall time of the steps that overlap a save over
  the synchronous save's time. A fresh compiled engine restored from the checkpoint runs the
  next step: its loss against the original engine's (`resume_rel_diff`).
- `zero3`: the model built under `deepspeed.zero.Init` on the GPU (the branch CPU runs never
  take), trained, saved and restored the same way.
- `eval`: the trained weights written as the pretrain artifact's `model/` and loaded back as the
  eval stages load them, then on the GPU under the bf16 autocast of their model actors
  (`ModelWorker.apply`): perplexity of held-out chain text against fp32 (`eval_bf16_rel_diff`),
  and greedy generation with the KV cache against without it (`greedy_cache_agreement`: the
  share of generated tokens that agree), with both rates.

    python bench/gpu_train.py [--steps 30] [--micro-batch 16] [--out DIR]
    python bench/gpu_train.py --cpu-smoke    # the same code paths on CPU with a small model

`--cpu-smoke` checks the script itself before a GPU is spent on it (gloo, fp32 autocast off,
no compile): its figures mean nothing.

Last line: one JSON object with `lmforge` and `reference` (tokens/s), `ratio`, `mfu`,
`compile_speedup`, `loss_first`/`loss_last` per case, `async_stall_share`, `save_s`,
`resume_rel_diff`, `zero3_*`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import yaml

from lmforge.model.config import ModelConfig
from lmforge.model.flops import flops_per_token
from lmforge.model.generate import SamplingConfig, generate
from lmforge.model.gpt import GPT
from lmforge.model.perplexity import token_nll
from lmforge.model.weights import load_model_dir, save_model_dir
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.async_save import CheckpointSaver
from lmforge.pipeline.training.checkpoint.resume import choose_checkpoint
from lmforge.pipeline.training.checkpoint.zero_shards import needed_ranges, restore_local
from lmforge.pipeline.training.reporting.mfu import peak_flops
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine, build_optimizer

CONF = Path(__file__).resolve().parent.parent / "conf"
BRANCHES, STATES = 4, 512
"""Successors per token and tokens in the synthetic chain: the loss floor is ln(4) = 1.39."""


def preset_configs(micro_batch: int) -> tuple[ModelConfig, TrainConfig]:
    """The `gpu` preset's model and train settings (conf/preset/gpu.yaml over the defaults),
    one micro-batch per step so both sides time the same work."""
    preset = yaml.safe_load((CONF / "preset" / "gpu.yaml").read_text())
    model = yaml.safe_load((CONF / "model" / "default.yaml").read_text()) | preset["model"]
    model["vocab_size"] = preset["tokenizer"]["vocab_size"]
    train = yaml.safe_load((CONF / "train" / "default.yaml").read_text()) | preset["train"]
    train |= {"num_workers": 1, "global_batch_size": micro_batch, "micro_batch_size": micro_batch}
    train |= {"warmup_steps": 0, "precision": "bf16"}
    return ModelConfig(**model), TrainConfig.from_dict(train)


class MarkovBatches:
    """Seeded batches from a random chain over STATES tokens: each is followed by one of its
    BRANCHES successors."""

    def __init__(self, vocab: int, block: int, batch: int, device: torch.device) -> None:
        g = torch.Generator().manual_seed(0)
        self.states = torch.randperm(vocab, generator=g)[:STATES]
        self.successors = torch.zeros(vocab, BRANCHES, dtype=torch.long)
        picks = torch.randint(0, STATES, (STATES, BRANCHES), generator=g)
        self.successors[self.states] = self.states[picks]
        self.block, self.batch, self.device = block, batch, device

    def __call__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1000 + i)
        choice = torch.randint(0, BRANCHES, (self.batch, self.block + 1), generator=g)
        tokens = torch.empty(self.batch, self.block + 1, dtype=torch.long)
        tokens[:, 0] = self.states[torch.randint(0, STATES, (self.batch,), generator=g)]
        for t in range(self.block):
            tokens[:, t + 1] = self.successors[tokens[:, t], choice[:, t]]
        tokens = tokens.to(self.device, non_blocking=True)
        return tokens[:, :-1], tokens[:, 1:]


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed_steps(step, batches: list, first: int, count: int) -> tuple[float, list[float]]:
    """(seconds, losses) of `count` steps, the device synchronised at both ends."""
    sync()
    start = time.perf_counter()
    losses = [step(batches[(first + i) % len(batches)]) for i in range(count)]
    sync()
    return time.perf_counter() - start, losses


def lmforge_case(model_cfg, cfg, batches, steps: int, device) -> dict:
    torch.manual_seed(0)
    engine = build_engine(model_cfg, cfg, 1, device)
    train_step = TrainStep(engine, cfg, device, 1)

    def step(batch) -> float:
        return train_step([batch], cfg.lr).loss  # the loss is read back every step, as in runs

    warm, warm_losses = timed_steps(step, batches, 0, 3)  # compiles here when asked
    seconds, losses = timed_steps(step, batches, 3, steps)
    tokens = steps * cfg.micro_batch_size * model_cfg.block_size
    return {
        "tokens_per_s": tokens / seconds,
        "warmup_s": warm,
        "loss_first": warm_losses[0],
        "loss_last": losses[-1],
        "engine": engine,
        "step": step,
    }


def plain_case(model_cfg, cfg, batches, steps: int, device, compile: bool) -> dict:
    """The loop a PyTorch user writes: same model, autocast, fused AdamW, clipping."""
    torch.manual_seed(0)
    model = GPT(model_cfg).to(device)
    opt = build_optimizer(model, cfg, device)
    forward = torch.compile(model) if compile else model

    def step(batch) -> float:
        x, y = batch
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
            _, loss = forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    warm, warm_losses = timed_steps(step, batches, 0, 3)
    seconds, losses = timed_steps(step, batches, 3, steps)
    tokens = steps * cfg.micro_batch_size * model_cfg.block_size
    return {
        "tokens_per_s": tokens / seconds,
        "warmup_s": warm,
        "loss_first": warm_losses[0],
        "loss_last": losses[-1],
    }


def state(step: int) -> ckpt.TrainerState:
    return ckpt.TrainerState(
        step=step, adam_step=step, sampler_position=0, tokens_seen=0, seed=0, n_windows=1,
        world_size=1,
    )  # fmt: skip


def checkpoint_case(case: dict, model_cfg, cfg, batches, root: Path, device) -> dict:
    """Sync save, async saves overlapping steps (stall share), restore into a fresh engine."""
    engine, step = case["engine"], case["step"]
    saver = CheckpointSaver(engine, str(root), 0, 1, keep=2)
    sync()
    start = time.perf_counter()
    saver.save(state(100))
    saver.wait()
    save_s = time.perf_counter() - start
    base = [timed_steps(step, batches, 10 + i, 1)[0] for i in range(5)]
    stalls, overlapped = [], []
    for window in range(3):
        sync()
        start, count = time.perf_counter(), 0
        saver.save(state(200 + window))
        while saver.in_flight and count < 200:
            step(batches[(20 + count) % len(batches)])
            count += 1
        saver.wait()
        sync()
        elapsed = time.perf_counter() - start
        base += [timed_steps(step, batches, 30 + i, 1)[0] for i in range(3)]
        overlapped.append(count)
        stalls.append((elapsed - count * statistics.median(base)) / save_s)
    saver.save(state(300))  # nothing trains while this one is written: the engine's state
    saved_at = saver.wait().location
    # The state just published: the original engine and a restored one take the same step.
    probe = batches[7]
    torch.manual_seed(1)
    restored = build_engine(model_cfg, cfg, 1, device)
    chosen = choose_checkpoint(str(root), 0, 1, needed_ranges(restored, 0))
    restore_local(restored, chosen.layout.reader(chosen.directory), 0, chosen.state.adam_step)
    restored_loss = TrainStep(restored, cfg, device, 1)([probe], cfg.lr).loss
    original_loss = step(probe)
    written = sum(f.stat().st_size for f in Path(saved_at).rglob("*") if f.is_file())
    return {
        "save_s": save_s,
        "checkpoint_mb": written / 2**20,
        "async_stall_share": statistics.median(stalls),
        "async_stall_shares": stalls,
        "overlap_steps": overlapped,
        "step_s": statistics.median(base),
        "resume_rel_diff": abs(restored_loss - original_loss) / abs(original_loss),
        "restored_from": chosen.directory.name if hasattr(chosen.directory, "name") else "",
    }


def zero3_case(model_cfg, cfg, batches, steps: int, root: Path, device) -> dict:
    """ZeRO-3 on the GPU: zero.Init builds the model there; train, save, restore, compare."""
    cfg3 = TrainConfig.from_dict(cfg.to_dict() | {"zero_stage": 3, "compile": False})
    torch.manual_seed(0)
    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated() if gpu else 0
    engine = build_engine(model_cfg, cfg3, 1, device)
    train_step = TrainStep(engine, cfg3, device, 1)
    losses = [train_step([batches[i % len(batches)]], cfg3.lr).loss for i in range(steps)]
    saver = CheckpointSaver(engine, str(root), 0, 1, keep=1)
    saver.save(state(steps))
    saver.wait()
    probe = batches[5]
    restored = build_engine(model_cfg, cfg3, 1, device)
    chosen = choose_checkpoint(str(root), 0, 1, needed_ranges(restored, 0))
    restore_local(restored, chosen.layout.reader(chosen.directory), 0, chosen.state.adam_step)
    restored_loss = TrainStep(restored, cfg3, device, 1)([probe], cfg3.lr).loss
    original_loss = train_step([probe], cfg3.lr).loss
    return {
        "zero3_loss_first": losses[0],
        "zero3_loss_last": losses[-1],
        "zero3_resume_rel_diff": abs(restored_loss - original_loss) / abs(original_loss),
        "zero3_engine_gpu_mb": ((torch.cuda.max_memory_allocated() if gpu else 0) - before) / 2**20,
    }


def eval_case(module, batches_of, root: Path, device) -> dict:
    """The eval stages' GPU path on the trained weights: scoring and generation in bf16."""
    save_model_dir(module, root / "model")
    model = load_model_dir(root / "model").to(device).eval()
    block = model.config.block_size
    held_out = torch.cat([batches_of(100 + i)[0].reshape(-1) for i in range(2)]).cpu()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    nll32, count = token_nll(model, held_out, block, block // 2)
    with autocast:
        nll16, _ = token_nll(model, held_out, block, block // 2)
    gap = held_out.numel() // 8
    prompts = [held_out[i * gap : i * gap + 16].tolist() for i in range(8)]
    runs = {}
    for use_cache in (True, False):
        cfg = SamplingConfig(max_new_tokens=128, greedy=True, use_cache=use_cache)
        with autocast:
            generate(model, prompts, cfg)  # warm: every step's shapes are new on a first call
            sync()
            start = time.perf_counter()
            out = generate(model, prompts, cfg)
            sync()
        runs[use_cache] = (out, len(prompts) * 128 / (time.perf_counter() - start))
    agree = sum(
        a == b
        for x, y in zip(runs[True][0], runs[False][0], strict=True)
        for a, b in zip(x, y, strict=True)
    )
    total = sum(len(x) for x in runs[True][0])
    return {
        "eval_perplexity_fp32": math.exp(nll32 / count),
        "eval_perplexity_bf16": math.exp(nll16 / count),
        "eval_bf16_rel_diff": abs(nll16 - nll32) / nll32,
        "greedy_cache_agreement": agree / total,
        "generate_tokens_per_s_cache": runs[True][1],
        "generate_tokens_per_s_no_cache": runs[False][1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per case")
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--out", help="directory for checkpoints (default: a temporary one)")
    parser.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    model_cfg, cfg = preset_configs(args.micro_batch)
    if args.cpu_smoke:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=0, world_size=1)
        model_cfg = ModelConfig(vocab_size=512, block_size=32, d_model=64, n_head=4, n_layer=2,
                                d_ff=256)  # fmt: skip
        small = {"use_gpu": False, "precision": "fp32", "global_batch_size": 4}
        cfg = TrainConfig.from_dict(cfg.to_dict() | small | {"micro_batch_size": 4})
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_train: no CUDA device here; run it on a machine with a GPU")
    else:
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
        torch.backends.cuda.matmul.allow_tf32 = True
    data = MarkovBatches(model_cfg.vocab_size, model_cfg.block_size, cfg.micro_batch_size, device)
    batches = [data(i) for i in range(16)]
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    out: dict = {"bench": "gpu_train", "unit": "tokens/s", "device": name}
    run_cfg = cfg.with_workers(1)  # what the pretrain stage's single worker trains with
    out |= {"torch": torch.__version__, "zero_stage": run_cfg.zero_stage}
    out["preset_zero_stage"] = cfg.zero_stage
    out |= {"model": {"d_model": model_cfg.d_model, "n_layer": model_cfg.n_layer,
                      "block_size": model_cfg.block_size, "vocab": model_cfg.vocab_size},
            "micro_batch": cfg.micro_batch_size, "loss_floor": math.log(BRANCHES)}  # fmt: skip
    peak, source = peak_flops(None, device, torch.bfloat16 if not args.cpu_smoke else torch.float32)
    per_token = flops_per_token(model_cfg)
    compiled_cfg = TrainConfig.from_dict(run_cfg.to_dict() | {"compile": not args.cpu_smoke})
    eager_cfg = TrainConfig.from_dict(run_cfg.to_dict() | {"compile": False})
    cases = {}
    cases["plain_eager"] = plain_case(model_cfg, cfg, batches, args.steps, device, False)
    cases["plain_compiled"] = plain_case(
        model_cfg, cfg, batches, args.steps, device, not args.cpu_smoke
    )
    cases["lmforge_eager"] = lmforge_case(model_cfg, eager_cfg, batches, args.steps, device)
    cases["lmforge_compiled"] = lmforge_case(model_cfg, compiled_cfg, batches, args.steps, device)
    zero2_cfg = TrainConfig.from_dict(compiled_cfg.to_dict() | {"zero_stage": 2})
    cases["lmforge_compiled_zero2"] = lmforge_case(
        model_cfg, zero2_cfg, batches, args.steps, device
    )
    for name, case in cases.items():
        print(
            f"{name:<18} {case['tokens_per_s']:>10,.0f} tokens/s  warm-up {case['warmup_s']:6.1f} s"
            f"  loss {case['loss_first']:.3f} -> {case['loss_last']:.3f}",
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="lmforge-gpu-", dir=args.out) as tmp:
        checkpoint = checkpoint_case(
            cases["lmforge_compiled"], model_cfg, compiled_cfg, batches, Path(tmp) / "ckpt", device
        )
        print(f"checkpoint: {json.dumps(checkpoint)}", flush=True)
        trained = cases["lmforge_compiled"]["engine"].module
        for case in cases.values():
            case.pop("engine", None), case.pop("step", None)
        torch.cuda.empty_cache()
        zero3 = zero3_case(model_cfg, eager_cfg, batches, 10, Path(tmp) / "zero3", device)
        print(f"zero3: {json.dumps(zero3)}", flush=True)
        evaluated = eval_case(trained, data, Path(tmp) / "eval", device)
        print(f"eval: {json.dumps(evaluated)}", flush=True)
    lm, ref = cases["lmforge_compiled"]["tokens_per_s"], cases["plain_compiled"]["tokens_per_s"]
    out |= {"lmforge": round(lm, 1), "reference": round(ref, 1), "ratio": round(lm / ref, 4)}
    out |= {"mfu": round(lm * per_token / peak, 4), "peak_flops": peak, "peak_source": source}
    out["eager_ratio"] = round(
        cases["lmforge_eager"]["tokens_per_s"] / cases["plain_eager"]["tokens_per_s"], 4
    )
    out["compile_speedup"] = round(lm / cases["lmforge_eager"]["tokens_per_s"], 4)
    out["zero2_ratio"] = round(cases["lmforge_compiled_zero2"]["tokens_per_s"] / ref, 4)
    out["cases"] = {
        name: {key: round(value, 4) for key, value in case.items()} for name, case in cases.items()
    }
    out |= {key: value for key, value in checkpoint.items()} | zero3 | evaluated
    dist.destroy_process_group()
    print(json.dumps(out, default=lambda v: round(v, 4) if isinstance(v, float) else str(v)))


if __name__ == "__main__":
    main()
