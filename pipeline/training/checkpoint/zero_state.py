"""The full fp32 parameters and AdamW moments of a DeepSpeed engine, whatever its ZeRO stage.

Checkpoints store this consolidated state, keyed by parameter name, so they do not depend on
the world size or the stage that wrote them: every rank takes part in `gather_full_state` (ZeRO
1-3 assemble the partitions with collectives) and every rank restores its own partition from
the full tensors in `restore_full_state` (no communication except ZeRO-3's re-partitioning).

Two details of DeepSpeed this module takes care of:
- torch's AdamW creates its state lazily at the first step, and ZeRO 1/2 links its per-parameter
  views of that state right after the first step of the *first* param group only, so groups
  after it are never linked. `ensure_adam_state` creates the (zero) state for every flat
  partition up front and links it, which matches what the first step would create.
- After loading fp32 values into the model's parameters, ZeRO copies them into its fp32
  partitions with `refresh_fp32_params()`.
"""

from __future__ import annotations

import deepspeed
import torch
from deepspeed.utils import (
    safe_get_full_fp32_param,
    safe_get_full_optimizer_state,
    safe_set_full_optimizer_state,
)

from lmforge.pipeline.training.checkpoint.fragments import ADAM_MOMENTS


def base_optimizer(engine) -> torch.optim.Optimizer:
    """The torch optimizer we built; ZeRO wraps it (its `.optimizer`), stage 0 uses it as is."""
    return getattr(engine.optimizer, "optimizer", engine.optimizer)


def ensure_adam_state(engine) -> None:
    """Give every parameter (ZeRO: every flat fp32 partition) zero AdamW state at step 0."""
    opt = base_optimizer(engine)
    for p, group in _optimized_tensors(engine):
        state = opt.state[p]
        if state:
            continue
        on_device = bool(group.get("fused") or group.get("capturable"))
        device = p.device if on_device else torch.device("cpu")
        state["step"] = torch.zeros((), dtype=torch.float32, device=device)
        for key in ADAM_MOMENTS:
            state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
    if hasattr(engine.optimizer, "_lazy_init_hp_params_optimizer_state"):  # ZeRO 1/2
        engine.optimizer._hp_optimizer_states_linked = False
        engine.optimizer._lazy_init_hp_params_optimizer_state()


def _optimized_tensors(engine) -> list[tuple[torch.Tensor, dict]]:
    """(tensor AdamW updates, its param group): the model's parameters under ZeRO 0, flat fp32
    partitions under ZeRO 1-3 (ZeRO 3 keeps them outside the groups between steps)."""
    opt = base_optimizer(engine)
    flats = getattr(engine.optimizer, "fp32_partitioned_groups_flat", None)
    if flats is not None:
        group_of = engine.optimizer.sub_group_to_group_id
        return [(p, opt.param_groups[group_of[i]]) for i, p in enumerate(flats)]
    return [(p, group) for group in opt.param_groups for p in group["params"]]


def named_parameters(engine) -> list[tuple[str, torch.nn.Parameter]]:
    """The model's trainable parameters by name (a tied tensor appears once)."""
    return [(n, p) for n, p in engine.module.named_parameters() if p.requires_grad]


def adam_step(engine) -> int:
    """AdamW's update count (the same for every parameter)."""
    opt = base_optimizer(engine)
    steps = {int(s["step"]) for s in opt.state.values() if "step" in s}
    if len(steps) > 1:
        raise RuntimeError(f"AdamW state holds different step counts {sorted(steps)}")
    return steps.pop() if steps else 0


def gather_full_state(engine) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(params, moments) as full fp32 CPU tensors; moments are keyed `exp_avg/<name>` etc.

    A collective under ZeRO 1-3: every rank must call it, in the same order.
    """
    stage = engine.zero_optimization_stage()
    opt = base_optimizer(engine)
    params: dict[str, torch.Tensor] = {}
    moments: dict[str, torch.Tensor] = {}
    for name, p in named_parameters(engine):
        if stage == 0:
            params[name] = p.detach().float().cpu().clone()
            for key in ADAM_MOMENTS:
                moments[f"{key}/{name}"] = opt.state[p][key].detach().float().cpu().clone()
        else:
            params[name] = safe_get_full_fp32_param(p).detach().float().cpu().clone()
            for key in ADAM_MOMENTS:
                full = safe_get_full_optimizer_state(p, key)
                moments[f"{key}/{name}"] = full.detach().float().cpu().clone()
    return params, moments


def restore_full_state(
    engine,
    params: dict[str, torch.Tensor],
    moments: dict[str, torch.Tensor] | None,
    step: int,
) -> None:
    """Load full fp32 params (and AdamW moments and step, unless `moments` is None).

    Every rank calls it with the same full tensors. Raises KeyError/ValueError naming the
    parameter when the tensors do not fit the model.
    """
    stage = engine.zero_optimization_stage()
    named = named_parameters(engine)
    _check_names_and_shapes(named, params, stage)
    for name, p in named:
        with deepspeed.zero.GatheredParameters([p], modifier_rank=0, enabled=stage == 3):
            p.data.copy_(params[name].to(device=p.device, dtype=p.dtype).view_as(p))
    if stage > 0:
        engine.optimizer.refresh_fp32_params()
    if moments is None:
        return
    ensure_adam_state(engine)
    opt = base_optimizer(engine)
    for name, p in named:
        for key in ADAM_MOMENTS:
            value = moments[f"{key}/{name}"]
            if stage == 0:
                opt.state[p][key].copy_(value.to(opt.state[p][key].device).view_as(p))
            else:
                safe_set_full_optimizer_state(p, value.to(_device(engine)), key)
    for state in opt.state.values():
        state["step"].fill_(step)


def _check_names_and_shapes(named, params: dict[str, torch.Tensor], stage: int) -> None:
    expected = {n: tuple(p.ds_shape if stage == 3 else p.shape) for n, p in named}
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise KeyError(
            f"checkpoint parameters do not match the model: missing {missing}, unexpected {extra}"
        )
    for name, shape in expected.items():
        if tuple(params[name].shape) != shape:
            raise ValueError(
                f"checkpoint parameter {name} has shape {tuple(params[name].shape)}, "
                f"the model expects {shape}"
            )


def _device(engine) -> torch.device:
    return (
        torch.device(engine.device)
        if not isinstance(engine.device, torch.device)
        else engine.device
    )
