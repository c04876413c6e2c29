"""The training loop Ray Train runs on every worker (through `worker_entry.train_loop_per_worker`).

Each worker seeds torch (the same init everywhere), opens the memory-mapped training split itself
(the data never travels through Ray; only the windows it reads are paged in), builds the DeepSpeed
engine and restores its own part of the newest intact checkpoint in the run's checkpoint
directory (after a worker failure, an interruption, or a finished run of the same key; see
`resume`). Then it trains; rank 0 logs to MLflow and prints progress. Every `checkpoint_every`
steps and at the end every worker saves its own shard in the background (`async_save`); at the
end the final checkpoint's location is reported to Ray Train (`ray_checkpoint`).
"""

from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import ray.train
import torch
from ray.train.torch import get_device

from lmforge.pipeline.cluster.process_stats import (
    keep_freed_memory,
    keeps_freed_memory,
    peak_rss_bytes,
)
from lmforge.pipeline.training.checkpoint.async_save import CheckpointSaver, Published
from lmforge.pipeline.training.checkpoint.ray_checkpoint import report_final
from lmforge.pipeline.training.checkpoint.restore import restore_or_start
from lmforge.pipeline.training.collectives import all_gather
from lmforge.pipeline.training.cpu_pinning import pin_training_thread, thread_cpus
from lmforge.pipeline.training.data.mixture import open_training_data
from lmforge.pipeline.training.data.prefetch import BatchPrefetcher
from lmforge.pipeline.training.data.sample_index import open_for_run
from lmforge.pipeline.training.data.sampler import WindowSampler, load_batch, max_window_offset
from lmforge.pipeline.training.early_stop.requests import verdict
from lmforge.pipeline.training.early_stop.val_slice import ValidationSlice
from lmforge.pipeline.training.payload import TrainingPayload
from lmforge.pipeline.training.precision import NATIVE_CHOICES, uses_bf16
from lmforge.pipeline.training.reporting.mfu import model_flops_utilisation, peak_flops
from lmforge.pipeline.training.reporting.progress import MlflowMetrics, ThroughputMeter
from lmforge.pipeline.training.reporting.progress_report import ProgressReporter, say
from lmforge.pipeline.training.reporting.step_times import StepTimes
from lmforge.pipeline.training.schedule import learning_rate
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import StepResult, TrainStep, build_engine


def run_worker(payload: TrainingPayload) -> None:
    """One worker's whole run (`worker_entry.train_loop_per_worker` calls it)."""
    _quiet_worker_output()
    WorkerRun(payload).run()


def _quiet_worker_output() -> None:
    """Leave the progress lines readable: Ray Train logs every report and checkpoint copy at
    INFO (some of its loggers are named by file path), and DeepSpeed calls collectives that
    torch marks deprecated on every step."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("ray.train") or "/ray/train/" in name:
            logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")


class WorkerRun:
    """One worker's share of a training run (one attempt: Ray Train restarts build a new one)."""

    def __init__(self, payload: TrainingPayload) -> None:
        context = ray.train.get_context()
        self.rank, self.world = context.get_world_rank(), context.get_world_size()
        self.payload = payload
        self.cfg = payload.train.with_workers(self.world)  # ZeRO-1/2 on one worker: ZeRO-0
        if self.rank == 0 and self.cfg.zero_stage != payload.train.zero_stage:
            say(f"ZeRO-{payload.train.zero_stage} on one worker runs as ZeRO-0 (nothing to split)")
        self.device = _setup_device(self.cfg)
        share = None
        local = self.cfg.local_mode  # the process runs other tasks after: nothing process-wide
        if self.device.type == "cpu" and self.cfg.pin_cpus and not local:
            share = pin_training_thread(
                context.get_local_rank(), context.get_local_world_size(), self.cfg.cpus_per_worker
            )
        precision = "bf16" if uses_bf16(self.cfg) else "fp32"  # resolved on this rank's device
        node = ray.get_runtime_context().get_node_id()
        placed = all_gather((node, thread_cpus(), precision), self.world)
        self.nodes = [node for node, _, _ in placed]
        self.thread_cpus = [cpus for _, cpus, _ in placed]
        """Each rank's CPUs its training thread may run on (its `cpu_share` where pinned)."""
        self.precisions = [p for _, _, p in placed]
        if self.rank == 0 and self.cfg.precision in NATIVE_CHOICES:
            where = ", ".join(f"rank {r} {p}" for r, p in enumerate(self.precisions))
            say(f"train.precision={self.cfg.precision}: {where}")
        if self.rank == 0 and share is not None:
            ranks = enumerate(self.thread_cpus)
            pinned = ", ".join(f"rank {r} on CPU {_cpu_list(cpus)}" for r, cpus in ranks)
            say(f"training threads pinned: {pinned}")
        torch.manual_seed(self.cfg.seed)
        max_offset = max_window_offset(payload.model.block_size, self.cfg.epoch_offsets)
        self.dataset = open_training_data(
            payload.data_dir, payload.split, payload.model.block_size, max_offset
        )
        self.engine = build_engine(payload.model, self.cfg, self.world, self.device)
        # After the build: a ZeRO-3 build sets glibc's thresholds for its own work.
        kept = (
            self.cfg.keep_freed_memory
            and not local
            and keep_freed_memory()
            and keeps_freed_memory(os.environ)
        )
        self.freed_memory_kept = all_gather(bool(kept), self.world)
        """Each rank's: it keeps the memory its steps free (`train.keep_freed_memory`)."""
        self.times = StepTimes()
        self.train_step = TrainStep(self.engine, self.cfg, self.device, self.world, self.times)
        self.saver = CheckpointSaver(
            self.engine,
            payload.checkpoint_dir,
            self.rank,
            self.world,
            self.cfg.keep_checkpoints,
            payload.fault,
        )
        self.state, self.resumed_from = restore_or_start(
            self.engine, payload, self.cfg, self.rank, self.world, len(self.dataset), self.saver
        )
        positions = self.cfg.max_steps * self.cfg.global_batch_size
        order = open_for_run(payload.sample_index_dir, self.dataset, self.cfg.seed, positions)
        self.sampler = WindowSampler(
            order,
            self.cfg.global_batch_size,
            self.cfg.micro_batch_size,
            self.rank,
            self.world,
            position=self.state.sampler_position,
        )
        self.tokens_per_step = self.cfg.global_batch_size * payload.model.block_size
        self.meter = ThroughputMeter(self.tokens_per_step)
        self.saved_step = self.resumed_from
        self.metrics_sink = None
        self.validation = (
            ValidationSlice(payload.data_dir, payload.model.block_size, self.cfg.eval_windows)
            if self.cfg.eval_every
            else None
        )
        self.val_loss: float | None = None
        self.stopped_early_at: int | None = None
        self.verdict_wait_s: float | None = None
        """How long to wait for a sweep's verdict on a step (None: as long as `verdict` waits;
        0 once a verdict came late: the sweep is gone)."""
        self.peak, self.peak_source = None, ""
        if self.rank == 0:
            dtype = torch.bfloat16 if precision == "bf16" else torch.float32
            self.peak, self.peak_source = peak_flops(self.cfg.peak_flops, self.device, dtype)
            if payload.tracking_uri and payload.mlflow_run_id:
                self.metrics_sink = MlflowMetrics(payload.tracking_uri, payload.mlflow_run_id)
        self.reporter = ProgressReporter(
            self.cfg,
            payload.model,
            self.world,
            self.meter,
            self.times,
            self.train_step,
            self.peak,
            self.metrics_sink,
        )

    def run(self) -> None:
        """Train from the restored step to max_steps, checkpointing on the way and at the end."""
        cfg = self.cfg
        if self.rank == 0 and self.resumed_from is not None:
            say(f"resumed from step {self.resumed_from} on {self.world} worker(s)")
        prefetch = (
            BatchPrefetcher(
                self.dataset, self.sampler, cfg.prefetch_steps, cfg.last_step - self.state.step
            )
            if cfg.prefetch_steps > 0 and self.state.step < cfg.last_step
            else None
        )
        try:
            self._train(prefetch)
        finally:
            if prefetch is not None:
                prefetch.close()
        if self.saved_step != self.state.step:
            self.saver.save(self.state)
        final = self.saver.wait()
        summary = self._summary(final)
        report_final(summary, self.rank, final.step, final.location, local=self.cfg.local_mode)

    def _train(self, prefetch: BatchPrefetcher | None) -> None:
        cfg = self.cfg
        while self.state.step < cfg.last_step:
            step = self.state.step
            torch.manual_seed(_step_seed(cfg.seed, step, self.rank))  # dropout masks
            with self.times.part("data"):  # with prefetching: the wait for the reading thread
                if prefetch is not None:
                    ready = prefetch.next_step()
                    batches, position = ready.batches, ready.position
                else:
                    batches = [load_batch(self.dataset, mb) for mb in self.sampler.next_step()]
                    position = self.sampler.position
            lr = learning_rate(step, cfg)
            result = self.train_step(batches, lr, cfg.sequence_term_at(step))
            self._advance(result, position)
            fault = self.payload.fault
            done = self.state.step
            if fault is not None and not fault.during_save and fault.armed(self.rank, done):
                self.saver.wait()  # the drill kills between saves, however fast they are
                fault.maybe_fire(self.rank, done)
            if self.rank == 0 and cfg.log_every and self.state.step % cfg.log_every == 0:
                with self.times.part("log"):
                    self.reporter.log(result, lr, batches, self.state.step, self.state.tokens_seen)
            if cfg.checkpoint_every and self.state.step % cfg.checkpoint_every == 0:
                with self.times.part("checkpoint"):  # the copy to CPU memory; writing goes on
                    self.saver.save(self.state)
                    self.saved_step = self.state.step
            if cfg.eval_every and self.state.step % cfg.eval_every == 0 and self._validate():
                self.stopped_early_at = self.state.step
                if self.rank == 0:
                    say(f"stopped early at step {self.state.step}: a sweep asked for it")
                return

    def _validate(self) -> bool:
        """Score the validation slice and log `val_loss`; whether a sweep asked to stop (rank
        0 reads the request, every rank follows it)."""
        assert self.validation is not None
        with self.times.part("log"):  # time away from training, as logging is
            self.val_loss = self.validation.loss(self.engine, self.device)
        self.state.val_losses.append([self.state.step, self.val_loss])
        stop = False
        if self.rank == 0:
            if self.metrics_sink is not None:
                self.metrics_sink.log(self.state.step, {"val_loss": self.val_loss})
            say(f"step {self.state.step}: val_loss {self.val_loss:.4f}")
            stop = self._sweep_says_stop()
        return bool(all_gather(stop, self.world)[0])

    def _sweep_says_stop(self) -> bool:
        """Rank 0: whether a sweep watching this run stops it at this step (it waits for the
        verdict, once too long it stops waiting)."""
        if not self.payload.stop_file:
            return False
        wait = {} if self.verdict_wait_s is None else {"wait_s": self.verdict_wait_s}
        said = verdict(self.payload.stop_file, self.state.step, **wait)
        if said == "late" and self.verdict_wait_s is None:
            self.verdict_wait_s = 0.0
            say(f"no verdict from the sweep on step {self.state.step}: training goes on")
        return said == "stop"

    def _advance(self, result: StepResult, sampler_position: int) -> None:
        if not np.isfinite(result.loss):
            raise FloatingPointError(
                f"training loss is {result.loss} at step {self.state.step + 1}; "
                "lower train.lr or raise train.warmup_steps"
            )
        self.state.step += 1
        self.state.sampler_position = sampler_position
        self.state.tokens_seen += self.tokens_per_step
        self.state.losses.append(result.loss)
        if self.rank == 0:
            self.meter.step_done(self.state.step)

    def _summary(self, final: Published) -> dict:
        losses = self.state.losses
        rate = self.meter.overall_rate()
        mfu = (
            model_flops_utilisation(rate, self.payload.model, self.peak, self.world)
            if (self.peak and rate)
            else None
        )
        return {
            "step": self.state.step,
            "steps": self.state.step,
            "loss": losses[-1] if losses else None,
            "initial_loss": losses[0] if losses else None,
            "final_loss": losses[-1] if losses else None,
            "losses": list(losses),
            "tokens": self.state.tokens_seen,
            "tokens_per_s": rate,
            "step_seconds": list(self.meter.durations),
            **{f"time_{name}_s_total": sec for name, sec in self.times.totals.items()},
            "mfu": mfu,
            "peak_flops_per_worker": self.peak,
            "peak_flops_source": self.peak_source,
            "world_size": self.world,
            "worker_nodes": self.nodes,
            "training_thread_cpus": self.thread_cpus,
            "freed_memory_kept": self.freed_memory_kept,
            "precision_by_rank": self.precisions,
            "precision": self.precisions[0] if len(set(self.precisions)) == 1 else "mixed",
            "resumed_from_step": self.resumed_from,
            "val_loss": self.val_loss,
            "val_losses": [list(point) for point in self.state.val_losses],
            "stopped_early_at": self.stopped_early_at,
            "checkpoint_path": final.location,
            # Rank 0 publishes the checkpoints: its peak (VmHWM, a fresh actor) is the largest.
            "worker_peak_rss_mb": round((peak_rss_bytes() or 0) / 2**20, 1),
        }


def _setup_device(cfg: TrainConfig) -> torch.device:
    if cfg.use_gpu:
        device = get_device()
        torch.cuda.set_device(device)
        return device
    if cfg.cpus_per_worker > 0:
        torch.set_num_threads(cfg.cpus_per_worker)
    return torch.device("cpu")


def _cpu_list(cpus: list[int]) -> str:
    return ",".join(str(cpu) for cpu in cpus)


def _step_seed(seed: int, step: int, rank: int) -> int:
    """Seed of torch's RNG for one step on one rank: a resumed run draws the same dropout."""
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])
