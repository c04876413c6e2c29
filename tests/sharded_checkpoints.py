"""Sharded checkpoints written without DeepSpeed: each simulated rank holds ZeRO-3-like ranges
of two small tensors and their AdamW moments, and the checkpoint is published as the saver
publishes it, into a local directory or a bucket."""

from __future__ import annotations

from functools import partial

import torch

from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.fragments import Fragment
from lmforge.pipeline.training.checkpoint.shard_format import (
    LAYOUT_FILE,
    layout_json,
    write_rank_shard,
)
from lmforge.pipeline.training.checkpoint.staging import stage_fragments

SHAPES = {"w": (5, 7), "b": (7,)}
MOMENTS = ("exp_avg", "exp_avg_sq")


def full_tensors(step: int) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint at `step`, with distinct values everywhere."""
    out = {}
    for i, (name, shape) in enumerate(SHAPES.items()):
        values = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
        out[name] = values + 1000 * step + 100 * i
        for j, moment in enumerate(MOMENTS):
            out[f"{moment}/{name}"] = out[name] * (j + 2)
    return out


def fragments(full: dict, rank: int, world: int) -> list[Fragment]:
    """Rank `rank`'s ranges: ceil(numel / world) elements from rank * that, as under ZeRO-3."""
    out = []
    for name, shape in SHAPES.items():
        numel = torch.Size(shape).numel()
        share = -(-numel // world)
        start = min(rank * share, numel)
        end = min(start + share, numel)
        keys = {"param": name, **{m: f"{m}/{name}" for m in MOMENTS}}
        views = {k: full[key].reshape(-1)[start:end] for k, key in keys.items()}
        out.append(Fragment(name, shape, start, views))
    return out


def write_shard(store, pending: str, rank: int, world: int, full: dict):
    """Rank `rank`'s two shard files of the pending checkpoint, written as a saver writes them."""
    staged = stage_fragments(fragments(full, rank, world))
    return write_rank_shard(partial(store.write_file, pending), rank, world, staged)


def save_sharded(store, step: int, world: int) -> str:
    """A checkpoint of `world` ranks at `step` in `store`; returns its location."""
    full = full_tensors(step)
    pending = store.begin(step)

    shards = [write_shard(store, pending, r, world, full) for r in range(world)]
    state = ckpt.TrainerState(
        step=step,
        adam_step=step,
        sampler_position=8 * step,
        tokens_seen=0,
        seed=0,
        n_windows=10,
        world_size=world,
    )
    texts = {ckpt.STATE_FILE: state.to_json(), LAYOUT_FILE: layout_json(SHAPES, shards, 3)}
    files = {n: meta for s in shards for n, meta in s.files.items()}
    return store.publish(pending, step, texts, files, keep=3)


def gpt_checkpoint(root, cfg) -> tuple[str, torch.nn.Module]:
    """A consolidated checkpoint of a freshly initialised GPT of `cfg` (seed 0) under `root`:
    (its location, the model)."""
    from lmforge.model.gpt import GPT

    torch.manual_seed(0)
    model = GPT(cfg)
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    moments = {f"exp_avg/{n}": torch.zeros_like(p) for n, p in params.items()}
    state = ckpt.TrainerState(
        step=3,
        adam_step=3,
        sampler_position=0,
        tokens_seen=0,
        seed=0,
        n_windows=1,
        world_size=1,
        model_config=cfg.to_dict(),
    )
    return str(ckpt.write_checkpoint(root, params, moments, state)), model
