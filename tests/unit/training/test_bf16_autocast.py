"""`train.precision=bf16` runs the engine's forward passes in bf16, with fp32 state.

DeepSpeed's forward switches off an autocast opened around the engine wherever
`torch.is_autocast_enabled()` sees it (CUDA; seen on an H100 with `bench/gpu_train.py`: a bf16
run trained in fp32), so bf16 must be the engine's own (`torch_autocast` in its config). On CPU
the outer autocast went unnoticed by DeepSpeed, so the engine's own setting is asserted too."""

from __future__ import annotations

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.precision import cpu_autocasts, cpu_bf16_unit
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("world_of_one")]

MODEL = ModelConfig(vocab_size=50, block_size=8, d_model=32, n_head=2, n_layer=2, d_ff=64)


def _matmul_dtypes(precision: str, stage: int) -> tuple[set[torch.dtype], list[float], set]:
    """(dtypes of the blocks' Linears' outputs, losses of 4 steps, parameter dtypes); the LM
    head, fp32 under CPU autocast (`GPT.head_logits`), is asserted here."""
    cfg = TrainConfig(
        zero_stage=stage, num_workers=1, global_batch_size=2, micro_batch_size=2, lr=1e-2,
        precision=precision, warmup_steps=0,
    )  # fmt: skip
    torch.manual_seed(0)
    engine = build_engine(MODEL, cfg, 1, torch.device("cpu"))
    assert engine.torch_autocast_enabled() == cpu_autocasts(precision, cpu_bf16_unit())
    seen: set[torch.dtype] = set()
    head: set[torch.dtype] = set()
    for module in engine.module.blocks.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
    engine.module.lm_head.register_forward_hook(lambda _m, _i, out: head.add(out.dtype))
    step = TrainStep(engine, cfg, torch.device("cpu"), 1)
    tokens = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    losses = [step([(tokens[:, :-1], tokens[:, 1:])], lr=1e-2).loss for _ in range(4)]
    state_dtypes = {p.dtype for p in engine.module.parameters()}
    assert head == {torch.float32}
    return seen, losses, state_dtypes


@pytest.mark.parametrize("stage", [0, 2])
def test_bf16_runs_the_matmuls_in_bf16_and_keeps_fp32_state(stage):
    seen, losses, state = _matmul_dtypes("bf16", stage)
    assert seen == {torch.bfloat16}
    assert state == {torch.float32}
    assert losses[-1] < losses[0]


def test_fp32_stays_fp32():
    seen, losses, _ = _matmul_dtypes("fp32", 2)
    assert seen == {torch.float32}
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("precision", "bf16_on"),
    [("bf16_if_native", {"amx", "avx512_bf16"}), ("bf16_if_native_except_amx", {"avx512_bf16"})],
)
def test_the_native_choices_autocast_exactly_where_they_say(precision, bf16_on):
    # bf16_if_native: bf16 on a CPU with AVX512-BF16 or AMX, fp32 on one without;
    # bf16_if_native_except_amx (the tiny preset's): fp32 on a CPU with AMX too.
    seen, losses, state = _matmul_dtypes(precision, 1)
    assert seen == {torch.bfloat16 if cpu_bf16_unit() in bf16_on else torch.float32}
    assert state == {torch.float32}
    assert losses[-1] < losses[0]
