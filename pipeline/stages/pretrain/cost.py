"""The cost of `pretrain` (`stage.py` beside it).

Work: tokens = max_steps x global_batch_size x block_size, at C FLOPs per token,
C = 6 N + 12 n_layer d T (`lmforge.model.flops.flops_per_token`, Kaplan / PaLM) + 6 d V for the
LM head, which that count leaves out (`training_flops_per_token`, the count a scaling law's
budget uses). On GPUs the time is C x tokens / (GPUs x peak x MFU), with
the peak from the data sheet (`--gpu-peak-tflops`) and a stated MFU (`GPU_MFU`, `--mfu`); on CPUs
it is C x tokens x (seconds per FLOP measured by bench/train_throughput.py) / CPUs. Checkpoints
are sharded: each rank writes its 1/N of the 12 bytes per parameter (hashed as written) at
`CHECKPOINT_BYTES_PER_S`, all ranks at once, in a background thread; the time counted is that
write, an upper bound on the stall of an asynchronous save. A fitted start-up covers Ray Train,
DeepSpeed and the export.

The steps with the sequence-level unlikelihood term (`train.sequence_unlikelihood`: of the last
`sequence_unlikelihood_steps`, the first and every `sequence_unlikelihood_every`-th) cost
more: each window's prefix is continued greedily token by token, then the prefix and
continuation go through a second forward and backward pass. Their FLOPs (the prefill and the
decoding forward, C/3 a token, and the second pass, C a token) join
the training FLOPs; decoding one token through one layer is also a fixed count of small
operations, bound by their dispatch on a small model (39 ms for 32 tokens of the tiny model's
4 layers and 8 windows on one CPU, where their FLOPs take under 10), fitted as seconds per
decoded token and layer on a rank (`s_per_decode_layer_step`).

Memory: a rank's model states, activations and its staged share of a checkpoint by arithmetic
(`pipeline/training/memory.py`) plus a measured runtime base; the export (in the stage's own
process up to 64M parameters, else a task of its own on that node) streams the final weights out
of the checkpoint tensor by tensor (about one fp32 copy of the weights at most).
Bytes written: the weights twice (ours and the HF export) and the kept checkpoints (Ray Train
keeps a pointer to them, not a copy).
"""

from __future__ import annotations

from lmforge.model.config import ModelConfig
from lmforge.model.flops import parameters, training_flops_per_token
from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster, ProcessCost, StageCost, config_part
from lmforge.pipeline.training.memory import RankMemory, activation_bytes, rank_memory
from lmforge.pipeline.training.precision import expects_bf16
from lmforge.pipeline.training.train_config import engine_zero_stage, sequence_decoding, term_steps

GPU_MFU = 0.35
"""Assumed model FLOPs utilisation on GPUs (of C above) when `--mfu` does not say: dense 1B-7B
models under ZeRO-2 with fused attention reach 35-50% on A100/H100 (NeMo, Megatron-LM reports);
lmforge's own is logged as `mfu` in every pretrain run."""
GPU_RANK_HOST_MB = 3000
"""Host memory of a GPU rank's process besides offloaded states: CUDA runtime, torch, Ray."""
GPU_CONTEXT_MB = 1000
"""GPU memory the CUDA context and allocator fragmentation take besides the tensors."""
CHECKPOINT_BYTES_PER_S = 250e6
"""Checkpoint bytes one rank writes and hashes per second (sha256 on the way)."""
MB = 2**20


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    found = _size(config["model"], config["train"], flow["vocab_size"])
    found["train_tokens_available"] = flow.get("train_tokens", 0)
    found["mfu"] = flow.get("mfu") or GPU_MFU
    found["gpu_peak_flops"] = cluster.gpu_peak_flops or 0
    return found | _cluster_part(found, cluster)


def _cluster_part(s: dict, cluster: Cluster) -> dict[str, float]:
    return {
        "cluster_gpus": cluster.gpus,
        "cluster_cpus": cluster.cpus,
        "ranks_per_node": _ranks_per_node(s, cluster.cpus_per_node, cluster.gpus_per_node),
    }


def _ranks_per_node(s: dict, cpus_per_node: float, gpus_per_node: float) -> float:
    if s["use_gpu"]:
        return max(1, min(s["world"], gpus_per_node or 1))
    return max(1, min(s["world"], cpus_per_node // max(1, s["cpus_per_worker"])))


def _size(model: dict, train: dict, vocab_size: float) -> dict[str, float]:
    cfg = ModelConfig(**{**model, "vocab_size": int(vocab_size)})
    steps = train["max_steps"]
    every = train["checkpoint_every"] or steps
    per_token = training_flops_per_token(cfg)
    return {
        "params": parameters(cfg),
        "flops_per_token": per_token,
        "tokens": steps * train["global_batch_size"] * cfg.block_size,
        **_sequence_phase(train, cfg, per_token),
        "checkpoints": steps // every + (1 if steps % every else 0),
        "keep_checkpoints": train["keep_checkpoints"],
        "world": train["num_workers"],
        "cpus_per_worker": train["cpus_per_worker"],
        "use_gpu": float(bool(train["use_gpu"])),
        "half_precision": float(expects_bf16(train["precision"], bool(train["use_gpu"]))),
        "zero_stage": train["zero_stage"],
        "offload_optimizer": float(train["offload_optimizer"]),
        "offload_params": float(train["offload_params"]),
        "micro_batch": train["micro_batch_size"],
        "block_size": cfg.block_size,
        "d_model": cfg.d_model,
        "n_head": cfg.n_head,
        "n_layer": cfg.n_layer,
        "vocab_size": cfg.vocab_size,
    }


def _sequence_phase(train: dict, cfg: ModelConfig, per_token: float) -> dict[str, float]:
    """The sequence-level unlikelihood steps' extra work: `phase_flops` over all ranks, and
    `decode_layer_steps`, the tokens a rank decodes times the layers each goes through."""
    weight = train.get("sequence_unlikelihood") or 0.0
    phase = min(train.get("sequence_unlikelihood_steps") or 0, train["max_steps"])
    steps = term_steps(0, phase, 0, train.get("sequence_unlikelihood_every") or 1)
    if weight <= 0 or steps <= 0:
        return {"phase_flops": 0.0, "decode_layer_steps": 0.0}
    prefix, decoded = sequence_decoding(
        train.get("sequence_unlikelihood_prefix"),
        train.get("sequence_unlikelihood_tokens"),
        cfg.block_size,
    )
    batch = train["global_batch_size"]
    micro_batches = batch // (train["micro_batch_size"] * train["num_workers"]) or 1
    return {
        "phase_flops": steps * batch * (prefix + decoded) * per_token * (1 + 1 / 3),
        "decode_layer_steps": float(steps * micro_batches * decoded * cfg.n_layer),
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    tok = upstream.get("tokenize", {})
    vocab = summary.get("vocab_size") or _vocab_of(sections, upstream)
    model, train = config_part(sections, "model"), config_part(sections, "train")
    found = _size(model, train, vocab)
    found["train_tokens_available"] = tok.get("train_tokens", 0)
    found["mfu"] = GPU_MFU  # the assumption is what is checked, not the run's own MFU
    found["gpu_peak_flops"] = summary.get("peak_flops_per_worker") or 0
    return found | _cluster_part(found, cluster)


def _vocab_of(sections: dict, upstream: dict) -> int:
    tok = upstream.get("train_tokenizer", {})
    return int(tok.get("val_vocab_size") or 0) or 2048


def measured_of_run(summary: dict) -> dict[str, float]:
    peak = summary.get("worker_peak_rss_mb")
    return {"rank_rss_mb": float(peak)} if peak else {}


def cost(s: dict[str, float]) -> StageCost:
    checkpoint_bytes = 12 * s["params"]
    # A throughput bench's steps leave the start-up out (`startup_excluded`).
    wall = {
        "fixed_s": 1 - s.get("startup_excluded", 0),
        KNOWN: s["checkpoints"] * _rank_save_s(s, checkpoint_bytes),
    }
    # A size recorded before the sequence-level terms were costed has neither key.
    work = s["tokens"] * s["flops_per_token"] + s.get("phase_flops", 0.0)
    wall["s_per_decode_layer_step"] = s.get("decode_layer_steps", 0.0)
    on_gpu = bool(s["use_gpu"])
    if on_gpu:
        wall[KNOWN] += work / (s["world"] * max(1.0, s["gpu_peak_flops"]) * s["mfu"])
    else:
        wall["cpu_s_per_flop"] = work / (s["world"] * s["cpus_per_worker"])
    processes = [
        ProcessCost(
            "coordinator",
            {"coordinator_mb": 1, KNOWN: 4 * s["params"] / MB},
            coordinator=True,
            remedy="a head node with more memory (the export streams one fp32 copy of the weights)",
        ),
        *_ranks(s, _rank_memory(s)),
    ]
    return StageCost(
        wall_s=wall,
        store_bytes={KNOWN: 8 * s["params"] + s["keep_checkpoints"] * checkpoint_bytes},
        processes=processes,
        outputs={"params": s["params"], "flops_per_token": s["flops_per_token"]},
        notes=_notes(s, on_gpu, checkpoint_bytes),
        problems=_problems(s),
    )


def _problems(s: dict) -> list[str]:
    """Settings that cannot run on this cluster, with what to set instead."""
    world, gpus, cpus = int(s["world"]), int(s["cluster_gpus"]), int(s["cluster_cpus"])
    if s["use_gpu"] and not gpus:
        return [
            "train.use_gpu=true but the cluster has no GPUs: give --gpus-per-node, or "
            "train.use_gpu=false"
        ]
    if s["use_gpu"] and world > gpus:
        return [
            f"train.num_workers={world} needs {world} GPUs; the cluster has {gpus}: "
            f"train.num_workers={gpus}, or more nodes"
        ]
    if s["use_gpu"] and not s["gpu_peak_flops"]:
        return ["give --gpu-peak-tflops (the GPU's dense bf16 peak from its data sheet)"]
    needed = world * int(s["cpus_per_worker"])
    if not s["use_gpu"] and needed > cpus:
        return [
            f"train.num_workers={world} x train.cpus_per_worker={int(s['cpus_per_worker'])} "
            f"needs {needed} CPUs; the cluster has {cpus}: fewer workers, or more nodes"
        ]
    return []


def _rank_memory(s: dict[str, float]) -> RankMemory:
    return rank_memory(
        params=s["params"],
        zero_stage=engine_zero_stage(
            int(s["zero_stage"]), int(s["world"]), bool(s["offload_optimizer"])
        ),
        world=int(s["world"]),
        offload_optimizer=bool(s["offload_optimizer"]),
        offload_params=bool(s["offload_params"]),
        activations=activation_bytes(
            seq=int(s["block_size"]),
            micro_batch=int(s["micro_batch"]),
            d_model=int(s["d_model"]),
            n_head=int(s["n_head"]),
            n_layer=int(s["n_layer"]),
            vocab=int(s["vocab_size"]),
            half_precision=bool(s["half_precision"]),
            fused_attention=bool(s["use_gpu"]),
        ),
    )


def _ranks(s: dict[str, float], memory: RankMemory) -> list[ProcessCost]:
    """A training rank: on GPUs its device memory and its host process apart; on CPUs one
    process holding everything, plus a measured runtime base."""
    per_node = int(s["ranks_per_node"])
    if s["use_gpu"]:
        host = {KNOWN: GPU_RANK_HOST_MB + memory.host_bytes / MB}
        device = {KNOWN: GPU_CONTEXT_MB + memory.device_bytes / MB}
        return [
            ProcessCost("rank", host, per_node=per_node, remedy=_remedy(s, memory.host, True)),
            ProcessCost("rank GPU", device, device="gpu", remedy=_remedy(s, memory.device, False)),
        ]
    everything = dict(memory.device)
    for part, n in memory.host.items():
        everything[part] = everything.get(part, 0) + n
    form = {"rank_mb": 1, KNOWN: sum(everything.values()) / MB}
    return [ProcessCost("rank", form, per_node=per_node, remedy=_remedy(s, everything, True))]


def _remedy(s: dict, parts: dict[str, float], host: bool) -> str:
    """The setting that shrinks the largest part of a rank's memory."""
    largest = max(parts, key=parts.get)
    if largest == "checkpoint staging":
        return (
            "more workers (train.num_workers): a rank stages 12 bytes per parameter / ranks "
            "for a checkpoint"
        )
    if largest == "activations":
        half = max(1, int(s["micro_batch"]) // 2)
        return f"train.micro_batch_size={half} (activations)"
    if s["zero_stage"] < 3:
        return "train.zero_stage=3 (shard parameters, gradients and optimizer states)"
    if not s["offload_optimizer"] and not host:
        return "train.offload_optimizer=true, or more workers (train.num_workers)"
    return "more workers (train.num_workers) on more nodes"


def _notes(s: dict, on_gpu: bool, checkpoint_bytes: float) -> list[str]:
    notes = [f"{s['params'] / 1e6:.4g}M parameters, {s['tokens']:.3g} tokens"]
    if s["train_tokens_available"]:
        notes.append(f"{s['tokens'] / s['train_tokens_available']:.2g} epochs of the train split")
    if on_gpu:
        notes.append(f"MFU {s['mfu']:.0%} of {s['gpu_peak_flops'] / 1e12:.0f} TFLOP/s per GPU")
        parts = _rank_memory(s).device
        shown = ", ".join(f"{k} {v / 2**30:.1f}" for k, v in parts.items() if v >= 2**27)
        notes.append(f"per GPU {sum(parts.values()) / 2**30:.1f} GiB ({shown})")
    if s["checkpoints"]:
        seconds = s["checkpoints"] * _rank_save_s(s, checkpoint_bytes)
        notes.append(
            f"{int(s['checkpoints'])} checkpoints of {checkpoint_bytes / 1e9:.3g} GB, "
            f"each rank writing its 1/{int(s['world'])} in the background: at most "
            f"{seconds / 60:.0f} min"
        )
    return notes


def _rank_save_s(s: dict, checkpoint_bytes: float) -> float:
    """Seconds one rank takes to write its shard of a checkpoint (all ranks write at once)."""
    return checkpoint_bytes / max(1.0, s["world"]) / CHECKPOINT_BYTES_PER_S
