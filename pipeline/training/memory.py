"""Bytes one training rank holds, by arithmetic (for `lmforge estimate`): model states under
DeepSpeed ZeRO, activations as Megatron-LM counts them, and the staged copy of a sharded checkpoint.

Model states (Rajbhandari et al. 2020, ZeRO, section 3): lmforge keeps fp32 parameters and
gradients whatever the precision (bf16 is autocast, not DeepSpeed's bf16 mode, so there is no
separate fp32 master copy), and AdamW keeps two fp32 moments:

    parameters P = 4 psi, gradients G = 4 psi, optimizer O = 8 psi     (psi: parameters)
    ZeRO 0: P + G + O      ZeRO 1: P + G + O/N      ZeRO 2: P + (G + O)/N      ZeRO 3: (P + G + O)/N

with N the number of ranks; `train.offload_optimizer` moves O/N to host memory (and
`offload_params` P/N at ZeRO 3). DeepSpeed's reduce and all-gather buckets
(`reduce_bucket_size` = 5e7 elements in conf/deepspeed/) add 2 x 4 bytes x min(5e7, psi) at
ZeRO >= 1.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", eq. 1, no tensor or sequence parallelism): per layer s b h (34 + 5 a s / h) bytes in 16
bits, for sequence s, micro-batch b, width h, heads a; the 5 a s / h term is the attention
matrix, which SDPA's fused kernels (flash / memory-efficient, used on GPUs) never store. In fp32
every tensor doubles. The logits add s b V x 4 bytes twice (fp32 logits and their gradient).

Checkpoints: every rank copies its own ranges of the fp32 parameters and both AdamW moments to
host memory and a background thread writes them (`async_save`): 12 psi / N bytes on each rank
while a save is in flight (`CHECKPOINT_STAGED_BYTES_PER_PARAM`), at most one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

STATE_BYTES = {"params": 4, "grads": 4, "optimizer": 8}
"""Bytes per parameter of each model state (fp32 parameters and gradients, AdamW's m and v)."""
BUCKET_ELEMENTS = 50_000_000
"""`reduce_bucket_size` / `allgather_bucket_size` of conf/deepspeed/zero*.json."""
CHECKPOINT_STAGED_BYTES_PER_PARAM = 12
"""fp32 parameters and two moments: a rank stages its 1/N share of them for an asynchronous save."""


@dataclass(frozen=True, slots=True)
class RankMemory:
    """Bytes of one rank, by where they live and what they are."""

    device: dict[str, float]
    """On the rank's accelerator (its GPU; on CPU training, host memory too)."""
    host: dict[str, float]
    """In the rank's host process besides the device part (offloaded states, staged checkpoint)."""

    @property
    def device_bytes(self) -> float:
        return sum(self.device.values())

    @property
    def host_bytes(self) -> float:
        return sum(self.host.values())


def model_state_bytes(
    params: float, zero_stage: int, world: int, offload_optimizer: bool, offload_params: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """(on the device, offloaded to host) bytes of parameters, gradients and optimizer states."""
    n = max(1, world)
    p, g, o = (STATE_BYTES[k] * params for k in ("params", "grads", "optimizer"))
    sharded = {
        0: (p, g, o),
        1: (p, g, o / n),
        2: (p, g / n, o / n),
        3: (p / n, g / n, o / n),
    }[zero_stage]
    device = dict(zip(("params", "grads", "optimizer"), sharded, strict=True))
    host: dict[str, float] = {}
    if offload_optimizer and zero_stage >= 1:
        host["optimizer"] = device.pop("optimizer")
    if offload_params and zero_stage == 3:
        host["params"] = device.pop("params")
    if zero_stage >= 1:
        device["buckets"] = 2 * 4 * min(BUCKET_ELEMENTS, params)
    return device, host


def activation_bytes(
    *,
    seq: int,
    micro_batch: int,
    d_model: int,
    n_head: int,
    n_layer: int,
    vocab: int,
    half_precision: bool,
    fused_attention: bool,
) -> float:
    """Activations kept for the backward pass of one micro-batch (Korthikanti et al., eq. 1)."""
    attention_matrix = 0.0 if fused_attention else 5.0 * n_head * seq / d_model
    per_layer = seq * micro_batch * d_model * (34.0 + attention_matrix)
    scale = 1.0 if half_precision else 2.0
    logits = 2 * 4.0 * seq * micro_batch * vocab
    return n_layer * per_layer * scale + logits


def rank_memory(
    *,
    params: float,
    zero_stage: int,
    world: int,
    offload_optimizer: bool,
    offload_params: bool,
    activations: float,
) -> RankMemory:
    """One rank's bytes: model states, activations and its share of a staged checkpoint."""
    device, host = model_state_bytes(params, zero_stage, world, offload_optimizer, offload_params)
    device["activations"] = activations
    host["checkpoint staging"] = CHECKPOINT_STAGED_BYTES_PER_PARAM * params / max(1, world)
    return RankMemory(device=device, host=host)
