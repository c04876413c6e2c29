"""The typed `train` config group read by the pretrain stage (conf/train/default.yaml).

Field names match the YAML keys one to one. Gradient accumulation is derived, never configured:
`grad_accum_steps = global_batch_size / (micro_batch_size * num_workers)`, so the optimizer sees
the same batch whatever the number of workers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

SCHEDULES = ("cosine", "inverse_sqrt")
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
PRECISIONS = ("auto", "fp32", "bf16", "bf16_if_native", "bf16_if_native_except_amx")


def carries_term(step: int, phase_start: int, every: int = 1) -> bool:
    """Whether 0-based `step` adds the sequence-level unlikelihood term: the phase's first step
    and every `every`-th after it."""
    return step >= phase_start and (step - phase_start) % every == 0


def term_steps(first: int, end: int, phase_start: int, every: int = 1) -> int:
    """How many of the steps [first, end) add the sequence-level term (`carries_term`)."""
    first = max(first, phase_start)
    if end <= first:
        return 0
    return -(-(end - phase_start) // every) - -(-(first - phase_start) // every)


def sequence_decoding(prefix: int | None, tokens: int | None, block_size: int) -> tuple[int, int]:
    """(prefix, decoded tokens) of the sequence-level term: the settings, else a quarter and a
    half of `block_size` (`TrainConfig.sequence_decoding`; the estimate reads plain settings)."""
    return (
        prefix if prefix is not None else max(1, block_size // 4),
        tokens if tokens is not None else block_size // 2,
    )


@dataclass(kw_only=True, slots=True)
class TrainConfig:
    """Optimizer, schedule, parallelism and checkpointing of one pretraining run."""

    max_steps: int = 2000
    """Optimizer steps to train for; raising it later continues from the last checkpoint."""
    global_batch_size: int = 64
    """Sequences per optimizer step, whatever the number of workers."""
    micro_batch_size: int = 8
    """Sequences per worker per forward pass."""
    lr: float = 6.0e-4
    """Peak learning rate, reached at the end of warmup."""
    min_lr: float = 6.0e-5
    """Floor of the cosine decay (and of the inverse-sqrt decay)."""
    warmup_steps: int = 100
    """Steps of linear warmup from 0 to `lr`."""
    schedule: Literal["cosine", "inverse_sqrt"] = "cosine"
    """'cosine' (warmup, then cosine to min_lr at max_steps) or 'inverse_sqrt' (the original
    transformer's warmup then 1/sqrt(step) decay)."""
    weight_decay: float = 0.1
    """Decoupled AdamW weight decay on matmul weights only (not norms, biases, embeddings)."""
    beta1: float = 0.9
    """AdamW first-moment decay."""
    beta2: float = 0.95
    """AdamW second-moment decay."""
    eps: float = 1.0e-8
    """AdamW denominator epsilon."""
    grad_clip: float = 1.0
    """Clip the global gradient L2 norm to this value; 0 disables clipping."""
    unlikelihood: float = 0.0
    """Weight of the token-level unlikelihood term added to cross-entropy (`unlikelihood.py`):
    probability on context tokens that are not the next one; 0 = plain cross-entropy."""
    sequence_unlikelihood: float = 0.0
    """Weight of the sequence-level unlikelihood term (`sequence_unlikelihood.py`): on the last
    `sequence_unlikelihood_steps` steps each micro-batch's windows are also continued greedily
    and the tokens of repeated 4-grams in those continuations are made less likely; 0 = off."""
    sequence_unlikelihood_steps: int = 0
    """How many of the run's last steps add the sequence-level term."""
    sequence_unlikelihood_every: int = 1
    """Of those steps, the first and every `every`-th after it add the term (1 = each): the
    term's decoding and second pass cost about a plain step, so 2 halves the phase's extra time
    (a weight twice as large keeps the term's push per step of the phase the same)."""
    sequence_unlikelihood_prefix: int | None = None
    """Tokens of each window the model continues from; None = a quarter of model.block_size."""
    sequence_unlikelihood_tokens: int | None = None
    """Tokens the model decodes after each prefix (prefix + these <= model.block_size); None =
    half of model.block_size."""
    zero_stage: int = 2
    """DeepSpeed ZeRO stage 0-3, read from conf/deepspeed/zeroN.json."""
    offload_optimizer: bool = False
    """ZeRO 1-3: keep optimizer states (and the step) in CPU memory."""
    offload_params: bool = False
    """ZeRO 3: keep partitioned parameters in CPU memory."""
    num_workers: int = 2
    """Ray Train workers (data-parallel ranks)."""
    use_gpu: bool = False
    """One GPU per worker and NCCL; CPU workers use gloo (precision: `precision`)."""
    cpus_per_worker: int = 1
    """CPUs reserved per worker; also torch's intra-op thread count on CPU."""
    pin_cpus: bool = True
    """CPU workers that fill their node between them keep each training thread on its own
    `cpus_per_worker` cores (`cpu_pinning`); elsewhere nothing is pinned."""
    keep_freed_memory: bool = True
    """Each worker keeps the memory its steps free (up to 1 GiB) instead of handing it back to
    the kernel and faulting it in again the next step (glibc; `proc_stats.keep_freed_memory`)."""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    """Ray placement of the workers across nodes."""
    checkpoint_every: int = 200
    """Save (and report to Ray Train) a checkpoint every this many steps, and at the end."""
    keep_checkpoints: int = 2
    """Newest complete checkpoints kept on disk; older ones are deleted."""
    log_every: int = 10
    """Log metrics to MLflow and print a progress line every this many steps."""
    seed: int = 1337
    """Seeds the init, the data order and dropout; the data order ignores the world size."""
    epoch_offsets: bool = True
    """Read every epoch after the first with its windows shifted by a seeded offset in
    [0, block_size): repeated passes over a small corpus see new window boundaries."""
    prefetch_steps: int = 2
    """Steps of windows a background thread reads ahead (0 = read each step's when it starts)."""
    max_failures: int = 2
    """Worker failures Ray Train recovers from (restart from the last checkpoint) per run."""
    local_mode: bool = False
    """Train in the pretrain stage's own Ray task (Ray Train's local mode; one worker, on CPU,
    as ZeRO-0) instead of starting Ray Train's worker, controller and synchronisation actors: a
    small model's pretrain starts seconds sooner. Without restarts after a failure (a rerun
    continues from the newest checkpoint), CPU pinning or kept freed memory (`local_mode`)."""
    precision: Literal["auto", "fp32", "bf16", "bf16_if_native", "bf16_if_native_except_amx"] = (
        "auto"
    )
    """'auto' = bf16 autocast on GPU and fp32 on CPU; 'bf16' autocasts on CPU too;
    'bf16_if_native' autocasts where the device computes bf16 natively (a GPU with bf16, a CPU
    with AVX512-BF16 or AMX-BF16) and stays fp32 elsewhere; 'bf16_if_native_except_amx' likewise
    but fp32 on a CPU with AMX (`precision.py`). Parameters and optimizer state stay fp32."""
    compile: bool = False
    """torch.compile the model (DeepSpeed `engine.compile()`)."""
    peak_flops: float | None = None
    """Peak FLOP/s of one worker's device for MFU; None = a table for known GPUs, or a matmul
    rate measured once at start on CPU."""
    eval_every: int = 0
    """Every this many steps, the loss on a fixed slice of the validation split (`eval_windows`
    windows) is logged to MLflow as `val_loss` (0 = never): what `lmforge sweep --early-stop`
    stops variants on."""
    eval_windows: int = 16
    """Windows of the validation split (its first ones, the same at every evaluation) scored
    every `eval_every` steps."""
    stopped_at: int | None = None
    """Train only to this step (the schedule still runs to `max_steps`): the model of a variant
    a sweep stopped early there, committed under a key of its own (None = to max_steps)."""

    def __post_init__(self) -> None:
        for name in ("max_steps", "global_batch_size", "micro_batch_size", "num_workers"):
            _require(name, getattr(self, name), minimum=1)
        for name in ("warmup_steps", "checkpoint_every", "keep_checkpoints", "log_every"):
            _require(name, getattr(self, name), minimum=0)
        _require("cpus_per_worker", self.cpus_per_worker, minimum=0)
        _require("eval_every", self.eval_every, minimum=0)
        _require("eval_windows", self.eval_windows, minimum=1)
        if self.stopped_at is not None:
            _require("stopped_at", self.stopped_at, minimum=1)
            if self.stopped_at > self.max_steps:
                raise ValueError(
                    f"train.stopped_at={self.stopped_at} must be <= train.max_steps="
                    f"{self.max_steps}"
                )
        _require("sequence_unlikelihood_steps", self.sequence_unlikelihood_steps, minimum=0)
        _require("sequence_unlikelihood_every", self.sequence_unlikelihood_every, minimum=1)
        if self.sequence_unlikelihood_prefix is not None:
            _require("sequence_unlikelihood_prefix", self.sequence_unlikelihood_prefix, minimum=1)
        if self.sequence_unlikelihood_tokens is not None:
            _require("sequence_unlikelihood_tokens", self.sequence_unlikelihood_tokens, minimum=4)
        _require("max_failures", self.max_failures, minimum=-1)
        if self.local_mode and (self.num_workers != 1 or self.use_gpu):
            raise ValueError(
                "train.local_mode trains one worker on CPU in the stage's own task: it needs "
                f"train.num_workers=1 and train.use_gpu=false (got num_workers="
                f"{self.num_workers}, use_gpu={str(self.use_gpu).lower()})"
            )
        if self.local_mode and engine_zero_stage(self.zero_stage, 1, self.offload_optimizer):
            raise ValueError(
                "train.local_mode runs DeepSpeed's ZeRO-0 engine, in a process that goes on to "
                "run other tasks: it needs train.zero_stage 0, 1 or 2 without "
                "train.offload_optimizer (ZeRO-3 replaces torch's linear function for good, "
                f"offloading builds a CPU optimizer; got zero_stage={self.zero_stage}, "
                "offload_optimizer="
                f"{str(self.offload_optimizer).lower()})"
            )
        _choose("schedule", self.schedule, SCHEDULES)
        _choose("placement_strategy", self.placement_strategy, PLACEMENT_STRATEGIES)
        _choose("precision", self.precision, PRECISIONS)
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"train.zero_stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.offload_optimizer and self.zero_stage == 0:
            raise ValueError("train.offload_optimizer needs train.zero_stage >= 1")
        if self.offload_params and self.zero_stage != 3:
            raise ValueError("train.offload_params needs train.zero_stage=3")
        per_step = self.micro_batch_size * self.num_workers
        if self.global_batch_size % per_step:
            raise ValueError(
                f"train.global_batch_size={self.global_batch_size} must be a multiple of "
                f"train.micro_batch_size * train.num_workers = {per_step}"
            )
        if not self.lr > 0 or not 0 <= self.min_lr <= self.lr:
            raise ValueError(
                f"need train.lr > 0 and 0 <= train.min_lr <= train.lr, got "
                f"lr={self.lr}, min_lr={self.min_lr}"
            )
        if self.schedule == "inverse_sqrt" and self.warmup_steps < 1:
            raise ValueError("train.schedule=inverse_sqrt needs train.warmup_steps >= 1")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.eps <= 0 or self.weight_decay < 0 or self.grad_clip < 0 or self.unlikelihood < 0:
            raise ValueError(
                "train.eps must be > 0, train.weight_decay, train.grad_clip and "
                "train.unlikelihood >= 0"
            )
        if self.sequence_unlikelihood < 0:
            raise ValueError(
                f"train.sequence_unlikelihood must be >= 0, got {self.sequence_unlikelihood!r}"
            )
        if self.sequence_unlikelihood > 0 and self.sequence_unlikelihood_steps == 0:
            raise ValueError(
                "train.sequence_unlikelihood > 0 needs train.sequence_unlikelihood_steps >= 1 "
                "(how many of the last steps add the term)"
            )
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ValueError(f"train.peak_flops must be > 0 or null, got {self.peak_flops!r}")

    @property
    def last_step(self) -> int:
        """The step training ends at: `stopped_at` when set, else `max_steps`."""
        return self.max_steps if self.stopped_at is None else self.stopped_at

    @property
    def sequence_phase_start(self) -> int:
        """The first (0-based) step with the sequence-level unlikelihood term; max_steps when
        no step has it."""
        if self.sequence_unlikelihood <= 0:
            return self.max_steps
        return max(0, self.max_steps - self.sequence_unlikelihood_steps)

    def sequence_term_at(self, step: int) -> bool:
        """Whether step `step` (0-based) adds the sequence-level unlikelihood term."""
        return carries_term(step, self.sequence_phase_start, self.sequence_unlikelihood_every)

    def sequence_decoding(self, block_size: int) -> tuple[int, int]:
        """(prefix, decoded tokens) of the sequence-level term for windows of `block_size`."""
        return sequence_decoding(
            self.sequence_unlikelihood_prefix, self.sequence_unlikelihood_tokens, block_size
        )

    @property
    def grad_accum_steps(self) -> int:
        """Micro-batches each worker accumulates per optimizer step."""
        return self.global_batch_size // (self.micro_batch_size * self.num_workers)

    def with_workers(self, num_workers: int) -> TrainConfig:
        """The same run on another number of workers (the global batch is unchanged), with the
        ZeRO stage its engine runs (`engine_zero_stage`)."""
        stage = engine_zero_stage(self.zero_stage, num_workers, self.offload_optimizer)
        return dataclasses.replace(self, num_workers=num_workers, zero_stage=stage)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build from a plain mapping (the `train` YAML group), rejecting unknown keys."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown train config key(s) {unknown}; valid keys: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable mapping; `from_dict(to_dict())` gives an equal config."""
        return dataclasses.asdict(self)


def engine_zero_stage(zero_stage: int, num_workers: int, offload_optimizer: bool) -> int:
    """The ZeRO stage a run's engine uses: ZeRO-1/2 on a single worker run as ZeRO-0.

    ZeRO-1/2 split the optimizer state and gradients across workers; one worker has nothing to
    split them with, and DeepSpeed would still keep a second fp32 copy of the weights and copy
    every gradient into it (GPT-2 small on one H100, compiled bf16: 0.82x a plain PyTorch loop's
    tokens/s, 0.99x as ZeRO-0; `bench/gpu_train.py`). Optimizer offload, which moves state to host
    memory at any world size, and ZeRO-3 keep their stage. Workers and ZeRO stage never change
    what is trained (`pretrain.lineage_of`), so this changes speed and memory only.
    """
    if num_workers == 1 and zero_stage in (1, 2) and not offload_optimizer:
        return 0
    return zero_stage


def _require(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"train.{name} must be an integer >= {minimum}, got {value!r}")


def _choose(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"train.{name} must be one of {list(choices)}, got {value!r}")
