"""One optimizer step on one worker: the DeepSpeed engine, the learning rate, the loss.

`build_engine` wraps GPT and our AdamW (decay on matmul weights only) in a DeepSpeed engine
for the configured ZeRO stage, with bf16 autocast inside the engine when asked for; `TrainStep`
runs the micro-batches of one step through it (gradient accumulation, clipping) with the
learning rate our schedule gives, and returns the step's mean loss over all workers and the
pre-clip gradient norm; it charges its time to compute, comm and optimizer (`step_times`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import deepspeed
import torch
import torch.distributed as dist

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.pipeline.cluster.process_stats import large_allocations_mapped
from lmforge.pipeline.training.checkpoint.zero_state import base_optimizer, ensure_adam_state
from lmforge.pipeline.training.deepspeed_config import deepspeed_config
from lmforge.pipeline.training.objectives.sequence_unlikelihood import (
    GreedyDecoder,
    looping_rows,
    sequence_unlikelihood,
)
from lmforge.pipeline.training.objectives.unlikelihood import training_objective
from lmforge.pipeline.training.precision import uses_bf16
from lmforge.pipeline.training.reporting.step_times import StepTimes, time_gradient_reduction
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.zero3_init import PartitionInit


def build_optimizer(model: GPT, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with decoupled weight decay on matmul weights only (GPT.param_groups).

    The fused kernel on CPU too: one pass over each tensor instead of a dozen elementwise ops
    (0.4 ms instead of 4.4 ms per step for the tiny model's 0.55M parameters on one thread)."""
    return torch.optim.AdamW(
        model.param_groups(cfg.weight_decay),
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        fused=device.type in ("cuda", "cpu"),
    )


def build_model(model_cfg: ModelConfig, ds_config: dict, device: torch.device) -> GPT:
    """GPT with its initial weights; under ZeRO-3 partitioned as it is built.

    ZeRO-3 builds it under `deepspeed.zero.Init`: each module's parameters are split across the
    ranks as soon as the module exists, so no rank ever holds the whole model, and GPT's init
    then writes each rank's partitions directly (`zero3_init`): on CPU the same weights as on
    one process for the same seed. (On a GPU, zero.Init builds the modules there, whose default
    init draws from the GPU's generator: ZeRO-3's initial weights differ from other stages'.)
    """
    if ds_config["zero_optimization"]["stage"] != 3:
        model = GPT(model_cfg)
        return model.to(device) if device.type == "cuda" else model
    if not deepspeed.comm.is_initialized():  # zero.Init reads the world size from it
        deepspeed.init_distributed(dist_backend=dist.get_backend())
    # Each module is built whole, then partitioned: its full tensors must not stay resident.
    with large_allocations_mapped():
        with deepspeed.zero.Init(config_dict_or_path=ds_config):
            model = GPT(model_cfg)  # its init, run on empty partitions here, draws nothing
        model.reset_parameters(PartitionInit(dist.get_rank()))
    return model


def skip_shared_memory_allreduce_op(device: torch.device) -> None:
    """Keep DeepSpeed from JIT-building its CPU shared-memory all-reduce op.

    DeepSpeed's communication backend compiles that C++ op on first use on every machine (about a
    minute of g++ on two cores) under a file lock in ~/.cache/torch_extensions: a worker killed
    during the build leaves the lock behind and every later run on the machine waits on it for
    ever. Training never calls the op (it serves `inference_all_reduce` only); gloo carries our
    collectives."""
    if device.type != "cpu":
        return
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def build_engine(model_cfg: ModelConfig, cfg: TrainConfig, world_size: int, device: torch.device):
    """GPT + AdamW in a DeepSpeed engine (seed torch first: the init uses its global RNG)."""
    skip_shared_memory_allreduce_op(device)  # before any DeepSpeed communication
    ds_config = deepspeed_config(cfg, world_size, bf16=uses_bf16(cfg))
    model = build_model(model_cfg, ds_config, device)
    engine, *_ = deepspeed.initialize(
        model=model, optimizer=build_optimizer(model, cfg, device), config=ds_config
    )
    if engine.zero_optimization_stage() == 0 and world_size == 1:
        # One worker has nothing to average: skip DeepSpeed's flatten/all-reduce/copy-back of
        # every gradient (a few % of a small model's step).
        engine.enable_backward_allreduce = False
    if cfg.compile:
        engine.compile()
    ensure_adam_state(engine)
    return engine


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one optimizer step reports."""

    loss: float
    """Mean cross-entropy over every micro-batch of the step on every worker."""
    grad_norm: float
    """Global L2 norm of the gradient before clipping."""
    unlikelihood: float | None = None
    """Mean token-level unlikelihood term, likewise (None when `train.unlikelihood` is 0)."""
    sequence_unlikelihood: float | None = None
    """Mean sequence-level unlikelihood term, likewise (None on steps without it)."""
    looping_share: float | None = None
    """Share of the greedy continuations of those steps that repeat a 4-gram, likewise."""


class TrainStep:
    """Runs one optimizer step's micro-batches through a DeepSpeed engine."""

    def __init__(
        self,
        engine,
        cfg: TrainConfig,
        device: torch.device,
        world_size: int,
        times: StepTimes | None = None,
    ) -> None:
        self.engine = engine
        self.cfg = cfg
        self.device = device
        self.world_size = world_size
        self.stage = engine.zero_optimization_stage()
        self.times = times or StepTimes()
        time_gradient_reduction(engine, self.times)
        self._decoder = GreedyDecoder(engine.module)

    def __call__(
        self,
        batches: list[tuple[torch.Tensor, torch.Tensor]],
        lr: float,
        sequence_term: bool = False,
    ) -> StepResult:
        """One optimizer step; `sequence_term` adds the sequence-level unlikelihood term
        (`TrainConfig.sequence_term_at`)."""
        for group in base_optimizer(self.engine).param_groups:
            group["lr"] = lr
        weight = self.cfg.unlikelihood
        # cross-entropy, token-level term, sequence-level term, share of looping continuations
        total = torch.zeros(4, device=self.device)
        grad_norm = math.nan
        times = self.times
        for x, y in batches:
            with times.part("compute"):
                # bf16 autocast, when asked for, is the engine's own (deepspeed_config.py)
                x, y = x.to(self.device), y.to(self.device)
                loss, unlikely, objective = training_objective(self.engine, x, y, weight)
                if sequence_term:
                    repeats, looping = self._sequence_term(x)
                    objective = objective + self.cfg.sequence_unlikelihood * repeats
                    total[2] += repeats.detach()
                    total[3] += looping
                self.engine.backward(objective)  # DeepSpeed divides by the accumulation steps
                total[0] += loss.detach().float()
                if unlikely is not None:
                    total[1] += unlikely.detach()
            with times.part("optimizer"):
                if self.stage == 0 and self.engine.is_gradient_accumulation_boundary():
                    grad_norm = self._clip_stage0()
                self.engine.step()  # updates only at the accumulation boundary
        if self.stage > 0:
            grad_norm = float(self.engine.get_global_grad_norm())
        mean = total / len(batches)
        with times.part("comm"):
            if self.world_size > 1:
                dist.all_reduce(mean)
                mean /= self.world_size
            loss_value, unlikely_value, repeats_value, looping_value = mean.tolist()
        return StepResult(
            loss=loss_value,
            grad_norm=grad_norm,
            unlikelihood=unlikely_value if weight > 0 else None,
            sequence_unlikelihood=repeats_value if sequence_term else None,
            looping_share=looping_value if sequence_term else None,
        )

    def decoding_seconds(self, x: torch.Tensor) -> float | None:
        """Seconds the sequence-level term's greedy decoding takes on micro-batch `x`, timed
        once on this rank alone (for the ETA before the phase: `progress.phase_step_estimate`);
        None under ZeRO-3, whose decoding gathers parameters from every rank. The decoding
        draws no random numbers and leaves no gradient, so training is unchanged."""
        if self._decoder.partitioned:
            return None
        start = time.perf_counter()
        self._greedy_continuations(x.to(self.device))
        return time.perf_counter() - start

    def _greedy_continuations(self, x: torch.Tensor) -> tuple[int, torch.Tensor]:
        """(prefix length, each window's prefix and its greedy continuation) for x's windows."""
        prefix, tokens = self.cfg.sequence_decoding(x.size(1))
        return prefix, self._decoder(x[:, :prefix], tokens)

    def _sequence_term(self, x: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The sequence-level unlikelihood term of the greedy continuations of x's prefixes, and
        the share of those continuations that repeat a 4-gram.

        A continuation that repeats no 4-gram adds nothing to the term, so only the rows that
        loop go through the second forward and backward (on the tiny preset 69-100% of them
        loop by this measure, so it saves little there); under ZeRO-3, whose forward gathers
        parameters with every rank, each rank runs all of its rows, so that the ranks'
        collectives stay in step."""
        prefix, sequences = self._greedy_continuations(x)
        positions = sequences[:, prefix:].numel()
        loops = looping_rows(sequences, prefix, n=4)
        share = float(loops.float().mean())
        if not self._decoder.partitioned:
            sequences = sequences[loops]
            if not len(sequences):
                return torch.zeros((), device=self.device), share
        logits, _ = self.engine(sequences[:, :-1])
        return sequence_unlikelihood(logits, sequences, prefix, n=4, positions=positions), share

    def _clip_stage0(self) -> float:
        # ZeRO 0: gradients are all-reduced by now; DeepSpeed's own stage-0 clipping would drop
        # the norm, so the config leaves clipping to us (deepspeed_config.py).
        max_norm = self.cfg.grad_clip if self.cfg.grad_clip > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(self.engine.module.parameters(), max_norm)
        return float(norm)
