"""What the evaluation stages' cost models share: a trained model loaded in one process, and the
tokens it generates or scores there (`sample`, `harm`, `perplexity` run on one CPU today).

A forward pass costs about a third of C, the training FLOPs per token (2 N of 6 N, plus the
attention and LM head terms likewise). Generating with the KV cache decodes every prompt of a
call together, one step per new token, and pays per step (the Python loop, the cache) and per
generated token (sampling over the vocabulary) besides the FLOPs: on small models these
overheads dominate, so each is fitted.
"""

from __future__ import annotations

from lmforge.pipeline.cost_model import KNOWN, Linear, ProcessCost

MB = 2**20
FORWARD_SHARE = 1 / 3
"""A forward pass's share of a training step's FLOPs (backward is twice the forward)."""


def model_flow(flow: dict) -> dict[str, float]:
    """The model's size from the pretrain cost model's outputs."""
    return {"params": flow["params"], "forward_flops": flow["flops_per_token"] * FORWARD_SHARE}


def model_of_run(upstream: dict) -> dict[str, float]:
    """The model's size from the pretrain summary of a run (0 when it does not say)."""
    pretrain = upstream.get("pretrain", {})
    tokens = pretrain.get("tokens") or 0
    params = pretrain.get("params") or 0
    flops = pretrain.get("flops_per_token") or 0
    return {"params": params, "forward_flops": flops * FORWARD_SHARE, "trained_tokens": tokens}


def generation_wall(
    s: dict[str, float], generated: float, steps: float, scored: float = 0.0
) -> Linear:
    """Wall time of one process generating `generated` tokens in `steps` batched decoding steps
    (every prompt of a call decodes together) and scoring `scored` tokens more."""
    return {
        "fixed_s": 1,
        "s_per_generation_step": steps,
        "s_per_generated_token": generated,
        "cpu_s_per_flop": (generated + scored) * s["forward_flops"],
    }


def model_process(s: dict[str, float], copies: int = 1) -> ProcessCost:
    """The stage's one process: a measured base plus `copies` fp32 copies of the weights."""
    return ProcessCost(
        "coordinator",
        {"coordinator_mb": 1, KNOWN: copies * 4 * s["params"] / MB},
        coordinator=True,
        remedy="a node with more memory for the evaluation stages",
    )
