"""Rank 0's report of a training step: the MLflow step metrics, and the progress line with its
rate, MFU, ETA and where step time went."""

from __future__ import annotations

import sys

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.reporting.mfu import model_flops_utilisation
from lmforge.pipeline.training.reporting.progress import (
    MlflowMetrics,
    ThroughputMeter,
    phase_step_estimate,
    progress_line,
    recent_step_seconds,
    training_eta,
)
from lmforge.pipeline.training.reporting.step_times import StepTimes, breakdown, data_wait_note
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import StepResult, TrainStep


class ProgressReporter:
    """What rank 0 logs every `train.log_every` steps."""

    def __init__(
        self,
        cfg: TrainConfig,
        model: ModelConfig,
        world: int,
        meter: ThroughputMeter,
        times: StepTimes,
        train_step: TrainStep,
        peak_flops: float | None,
        metrics_sink: MlflowMetrics | None,
    ) -> None:
        self.cfg, self.model, self.world = cfg, model, world
        self.meter, self.times, self.train_step = meter, times, train_step
        self.peak_flops, self.metrics_sink = peak_flops, metrics_sink
        self.tokens_per_step = cfg.global_batch_size * model.block_size
        self.step_seconds: dict[bool, float] = {}
        """Recent median seconds of a step without (False) and with (True) the sequence-level
        term, for the ETA."""
        self.decoding_s: float | None = None
        self._decoding_timed = False

    def log(
        self, result: StepResult, lr: float, batches: list, step: int, tokens_seen: int
    ) -> None:
        """Log step `step`'s metrics to MLflow and print its progress line."""
        rate = self.meter.window_rate()
        mfu = model_flops_utilisation(rate, self.model, self.peak_flops, self.world)
        times = self.times.take()
        values = {
            "loss": result.loss,
            "lr": lr,
            "grad_norm": result.grad_norm,
            "tokens_per_s": rate,
            "tokens_seen": float(tokens_seen),
            "mfu": mfu,
            "data_wait_s": times["time_data_s"],
            **times,
        }
        for name in ("unlikelihood", "sequence_unlikelihood", "looping_share"):
            if getattr(result, name) is not None:
                values[name] = getattr(result, name)
        if self.metrics_sink is not None:
            self.metrics_sink.log(step, values)
        line = progress_line(
            step=step,
            max_steps=self.cfg.max_steps,
            loss=result.loss,
            lr=lr,
            tokens_per_s=rate,
            mfu=mfu,
            eta_s=self._eta(rate, batches, step),
        )
        say(f"{line} | {breakdown(times)}{data_wait_note(times)}")

    def _eta(self, rate: float, batches: list, done: int) -> float:
        """Seconds left (`progress.training_eta`); the sequence-level term's steps, before any
        has run, estimated from a plain step and one timed decoding
        (`progress.phase_step_estimate`)."""
        cfg = self.cfg
        recent = self.meter.durations[-max(1, cfg.log_every) :]
        start, every = cfg.sequence_phase_start, cfg.sequence_unlikelihood_every
        self.step_seconds.update(recent_step_seconds(recent, done, start, every))

        def phase_estimate(plain_s: float) -> float:
            if not self._decoding_timed:
                self._decoding_timed = True
                one = self.train_step.decoding_seconds(batches[0][0])
                self.decoding_s = None if one is None else one * len(batches)
            block = self.model.block_size
            prefix, tokens = cfg.sequence_decoding(block)
            return phase_step_estimate(
                plain_s,
                decoded_tokens=tokens,
                sequence_tokens=prefix + tokens,
                block_size=block,
                decoding_s=self.decoding_s,
            )

        return training_eta(
            done=done,
            max_steps=cfg.max_steps,
            phase_start=cfg.sequence_phase_start,
            measured=self.step_seconds,
            plain_fallback_s=self.tokens_per_step / rate if rate > 0 else 0.0,
            phase_estimate=phase_estimate,
            every=every,
        )


def say(line: str) -> None:
    """Print a line from a training worker."""
    # Not print(): Ray Train patches it to log and echo, which shows every line twice.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
