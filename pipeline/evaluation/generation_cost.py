"""What the evaluation stages' cost models share: a pool of Ray actors that each load the trained
model (`pipeline/evaluation/model_pool.py`), driven by the stage's own process, and the tokens they
generate or score.

A forward pass costs about a third of C, the training FLOPs per token (2 N of 6 N, plus the
attention and LM head terms likewise). Generating with the KV cache decodes every prompt of a
call together, one step per new token, and pays per step (the Python loop, the cache) and per
generated token (sampling over the vocabulary) besides the FLOPs: on small models these
overheads dominate, so each is fitted. Starting the actors (a Ray worker each, importing torch
and loading the model, side by side) is a term of its own (`actor_start_s`). A stage that runs
the model in its own process (`in_process`) has a cost form of its own: no actor start-up, its
own seconds per FLOP on CPU (`in_process_s_per_flop`: one process, no pool calls, beside the
other eval stages), and a memory base of its own (`in_process_mb`: the stage's imports and
torch's) under the weights. On GPU actors the FLOPs run at the data sheet's peak times the
stated MFU (`--gpu-peak-tflops`, `--mfu`), as training's do; the per-step and per-token
overheads keep their coefficients.
"""

from __future__ import annotations

import math

from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster, Linear, ProcessCost
from lmforge.pipeline.stages.pretrain.cost import GPU_MFU

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


def pool_size(cfg: dict, cluster: Cluster, mfu: float | None = None) -> dict[str, float]:
    """How many model actors a stage's pool starts, in all and per node (`actors: 0` = one per GPU,
    else one per `threads_per_actor` CPUs of the cluster), and on GPUs the FLOPs per second an
    actor runs (`gpu_flops_per_s`: peak x MFU; 0 on CPUs, whose seconds per FLOP are fitted).
    `in_process`: the stage's own process runs the model on CPU, as one actor would."""
    if cfg.get("in_process"):
        return {"actors": 1, "actors_per_node": 1, "gpu_flops_per_s": 0.0, "in_process": 1.0}
    on_gpu = cfg.get("device", "auto") != "cpu" and cluster.gpus_per_node > 0
    threads = max(1, int(cfg.get("threads_per_actor", 1)))
    per_node = cluster.gpus_per_node if on_gpu else max(1, cluster.cpus_per_node // threads)
    actors = int(cfg.get("actors", 0)) or per_node * cluster.nodes
    rate = (cluster.gpu_peak_flops or 0) * (mfu or GPU_MFU) if on_gpu else 0.0
    return {
        "actors": actors,
        "actors_per_node": -(-actors // cluster.nodes),
        "gpu_flops_per_s": rate,
    }


def pooled_generation(
    calls: list[tuple[float, float]], batch_size: int, actors: int
) -> dict[str, float]:
    """Tokens the busiest actor generates and decoding steps it runs for pool calls of (rows,
    new tokens) each: a call's rows go out in batches of `batch_size`, spread over the actors,
    and every row of a batch decodes together, one step per new token."""
    generated = steps = 0.0
    for rows, new in calls:
        if rows <= 0 or new <= 0:
            continue
        rounds = math.ceil(math.ceil(rows / batch_size) / max(1, actors))
        steps += rounds * new
        generated += min(rows, rounds * batch_size) * new
    return {"generated": generated, "steps": steps}


def generation_wall(
    s: dict[str, float], generated: float, steps: float, scored: float = 0.0
) -> Linear:
    """Wall time of the busiest actor generating `generated` tokens in `steps` batched decoding
    steps and scoring `scored` tokens more."""
    flops = (generated + scored) * s["forward_flops"]
    wall: Linear = {
        "fixed_s": 1,
        "actor_start_s": 1 - s.get("in_process", 0.0),
        "s_per_generation_step": steps,
        "s_per_generated_token": generated,
    }
    rate = s.get("gpu_flops_per_s", 0.0)  # absent from sizes recorded before it was costed
    if rate > 0:
        wall[KNOWN] = flops / rate
    elif s.get("in_process"):
        wall["in_process_s_per_flop"] = flops
    else:
        wall["cpu_s_per_flop"] = flops
    return wall


def coordinator_process() -> ProcessCost:
    """The stage's own process: it plans the work and collects results, holding no weights."""
    return ProcessCost(
        "coordinator",
        {"coordinator_mb": 1},
        coordinator=True,
        remedy="a head node with more memory for the evaluation coordinators",
    )


def actor_process(s: dict[str, float], section: str, copies: int = 1) -> ProcessCost:
    """A model actor: its base (a Ray worker with torch and the model code imported) plus `copies`
    fp32 copies of the weights, `actors_per_node` of them on a node."""
    return ProcessCost(
        "actor",
        {"actor_mb": 1, KNOWN: copies * 4 * s["params"] / MB},
        per_node=int(s.get("actors_per_node", 1)),
        remedy=f"fewer actors per node ({section}.threads_per_actor or {section}.actors) "
        "or more memory",
    )


def pool_processes(s: dict[str, float], section: str, copies: int = 1) -> list[ProcessCost]:
    """The processes of a stage's pool: the stage's process and its actors, or, in process, the
    stage's process alone, with a base of its own (the stage's work and the model's runtime in one
    process) and the weights."""
    if not s.get("in_process"):
        return [coordinator_process(), actor_process(s, section, copies)]
    return [
        ProcessCost(
            "coordinator",
            {"in_process_mb": 1, KNOWN: copies * 4 * s["params"] / MB},
            coordinator=True,
            remedy=f"{section}.in_process=false (the model on actors) or more memory",
        )
    ]
