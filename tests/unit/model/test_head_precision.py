"""Under CPU bf16 autocast the LM head, and so the logits and the loss, are computed in fp32."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def test_cpu_autocast_computes_the_head_in_fp32_from_bf16_blocks(make_model):
    # bf16 logits carry 8 bits of mantissa: the trained model's sentence log-probabilities, and
    # so its minimal pairs, moved (docs/training.md, "Precision"); the head is a fifth of the tiny
    # model's FLOPs, so fp32 there costs the step little
    model = make_model().train()
    ids = torch.randint(0, 97, (2, 12))
    seen: dict[str, torch.dtype] = {}
    model.lm_head.register_forward_hook(
        lambda module, args, out: seen.update(into=args[0].dtype, out=out.dtype)
    )
    model.blocks[-1].mlp.c_fc.register_forward_hook(
        lambda module, args, out: seen.update(block=out.dtype)
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(ids[:, :-1], ids[:, 1:])
        hidden = model.hidden_states(ids[:, :-1])
    assert seen == {"block": torch.bfloat16, "into": torch.float32, "out": torch.float32}
    assert logits.dtype == torch.float32
    want = F.linear(hidden.float(), model.wte.weight)  # the tied head at full precision
    assert torch.equal(logits, want)
    loss.backward()
    assert model.wte.weight.grad is not None and model.wte.weight.grad.dtype == torch.float32


def test_without_autocast_the_head_is_the_plain_tied_linear(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (1, 10))
    logits, _ = model(ids)
    assert torch.equal(logits, F.linear(model.hidden_states(ids), model.wte.weight))
