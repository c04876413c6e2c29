"""Each rank's own part of the fp32 parameters and AdamW moments, at any ZeRO stage.

A rank's part of parameter P is a range [start, start + numel) of P flattened:
- ZeRO 3: the partition of P the rank holds, ceil(P.numel / world) elements from rank * that
  (DeepSpeed's `safe_get_local_fp32_param` / `safe_get_local_optimizer_state`);
- ZeRO 1/2: the fragment of P inside the rank's flat fp32 partition (`param._hp_mapping`, what
  DeepSpeed's universal checkpoints read); the ranks' fragments tile P;
- ZeRO 0: every rank holds all of P and saves the rank-th of `world` even slices.

`local_fragments` gives views of a rank's parts (copy them before training moves on) and
`restore_local` fills an engine from a `read(key, start, numel)` function that returns any flat
range of a saved tensor, whatever world size or stage wrote it: each rank reads only the ranges
it holds (under ZeRO 1/2 the rank's fp32 fragments, which DeepSpeed then all-gathers into the
model's parameters as after any step; under ZeRO 0 everything, which every rank holds).
No rank ever assembles the full state.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from deepspeed.utils import (
    safe_get_local_fp32_param,
    safe_get_local_optimizer_state,
    safe_set_local_optimizer_state,
)

from lmforge.pipeline.training.checkpoint.fragments import ADAM_MOMENTS, Fragment
from lmforge.pipeline.training.checkpoint.zero_state import (
    base_optimizer,
    ensure_adam_state,
    named_parameters,
)

Reader = Callable[[str, int, int], torch.Tensor]
"""read(key, start, numel): a flat fp32 range of a saved tensor; keys are parameter names and
`exp_avg/<name>`, `exp_avg_sq/<name>`."""


def full_shapes(engine) -> dict[str, tuple[int, ...]]:
    """Every trainable parameter's full shape, by name, in the model's order."""
    stage = engine.zero_optimization_stage()
    return {n: tuple(p.ds_shape if stage == 3 else p.shape) for n, p in named_parameters(engine)}


def local_fragments(engine, rank: int, world: int) -> list[Fragment]:
    """This rank's part of every parameter (empty parts left out)."""
    stage = engine.zero_optimization_stage()
    opt = base_optimizer(engine)
    shapes = full_shapes(engine)
    fragments = []
    for name, p in named_parameters(engine):
        if stage == 3:
            start, numel = zero3_range(p, rank)
            views = {"param": safe_get_local_fp32_param(p)}
            views |= {k: safe_get_local_optimizer_state(p, k) for k in ADAM_MOMENTS}
            views = {k: v.reshape(-1)[:numel] for k, v in views.items()}
        elif stage in (1, 2):
            if p._hp_mapping is None:
                continue
            start, numel = p._hp_mapping.lp_fragment_address.start, p.numel()
            views = {"param": p._hp_mapping.hp_fragment}
            views |= {k: p._hp_mapping.get_optim_state_fragment(k) for k in ADAM_MOMENTS}
        else:
            share = math.ceil(p.numel() / world)
            start = min(rank * share, p.numel())
            numel = min(share, p.numel() - start)
            views = {"param": p.detach().reshape(-1)}
            views |= {k: opt.state[p][k].reshape(-1) for k in ADAM_MOMENTS}
            views = {k: v[start : start + numel] for k, v in views.items()}
        if views["param"].numel():
            fragments.append(Fragment(name, shapes[name], start, views))
    return fragments


def needed_ranges(engine, rank: int) -> dict[str, tuple[int, int]]:
    """(start, numel) of every parameter range this rank must read to resume."""
    stage = engine.zero_optimization_stage()
    ranges = {}
    for name, p in named_parameters(engine):
        if stage == 3:
            ranges[name] = zero3_range(p, rank)
        elif stage in (1, 2):
            if p._hp_mapping is not None:
                address = p._hp_mapping.lp_fragment_address
                ranges[name] = (address.start, address.numel)
        else:
            ranges[name] = (0, p.numel())
    return {name: span for name, span in ranges.items() if span[1] > 0}


def restore_local(engine, read: Reader, rank: int, adam_step: int) -> None:
    """Fill this rank's parameters and AdamW state from `read`; every rank calls it."""
    stage = engine.zero_optimization_stage()
    opt = base_optimizer(engine)
    ranges = needed_ranges(engine, rank)
    named = [(n, p) for n, p in named_parameters(engine) if n in ranges]
    for name, p in named:
        start, numel = ranges[name]
        values = read(name, start, numel)
        if stage == 3:
            p.ds_tensor.data.reshape(-1)[:numel].copy_(values)
        elif stage in (1, 2):
            p._hp_mapping.hp_fragment.data.copy_(values)
        else:
            p.data.copy_(values.view_as(p))
    if stage == 3:
        engine.optimizer.refresh_fp32_params()  # partitions -> fp32 master partitions
    elif stage in (1, 2):
        engine.optimizer.update_lp_params()  # fp32 fragments -> the model's parameters
    ensure_adam_state(engine)
    for name, p in named:
        start, numel = ranges[name]
        for key in ADAM_MOMENTS:
            values = read(f"{key}/{name}", start, numel)
            if stage == 3:
                padded = torch.zeros(p.ds_tensor.numel(), dtype=values.dtype)
                padded[:numel] = values
                safe_set_local_optimizer_state(p, padded, key)
            elif stage in (1, 2):
                p._hp_mapping.get_optim_state_fragment(key).data.copy_(values)
            else:
                opt.state[p][key].copy_(values.view_as(p))
    for state in opt.state.values():
        state["step"].fill_(adam_step)


def zero3_range(p, rank: int) -> tuple[int, int]:
    """ZeRO-3's partition of `p` on `rank`: ceil(numel / world) elements, the last one short."""
    share = p.ds_tensor.ds_numel
    start = min(rank * share, p.ds_numel)
    return start, min(share, p.ds_numel - start)
