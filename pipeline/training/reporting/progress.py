"""What rank 0 tells the user while training: MLflow metrics and a progress line with an ETA.

step 120/400 loss 3.2100 lr 5.0e-04 12.3k tok/s MFU 0.4% ETA 1m20s | compute 71% comm 12% ...

(the worker appends the step-time breakdown of `step_times`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lmforge.pipeline.quantities import format_duration
from lmforge.pipeline.training.train_config import carries_term, term_steps


def format_rate(value: float) -> str:
    """`950`, `12.3k` or `1.2M`."""
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def progress_line(
    *,
    step: int,
    max_steps: int,
    loss: float,
    lr: float,
    tokens_per_s: float,
    mfu: float | None,
    eta_s: float,
) -> str:
    """One line of training progress (MFU omitted when unknown)."""
    mfu_part = f" MFU {100 * mfu:.1f}%" if mfu is not None else ""
    return (
        f"step {step}/{max_steps} loss {loss:.4f} lr {lr:.1e} {format_rate(tokens_per_s)} tok/s"
        f"{mfu_part} ETA {format_duration(eta_s)}"
    )


@dataclass(slots=True)
class ThroughputMeter:
    """Tokens per second since the previous reading, over the whole attempt, and the duration of
    every step.

    The first step of an attempt (warm-up: allocation, kernel selection) is left out of the
    whole-attempt rate and of the durations (its start is not timed).
    """

    tokens_per_step: int
    """Tokens of one optimizer step over all workers."""
    _last_time: float = field(default_factory=time.perf_counter)
    _last_step: int | None = None
    _first_time: float | None = None
    _first_step: int = 0
    _steps: int = 0
    _previous: float | None = None
    durations: list[float] = field(default_factory=list)
    """Seconds of every step after the first, in order."""

    def step_done(self, step: int) -> None:
        """Record that optimizer step `step` finished now."""
        now = time.perf_counter()
        if self._first_time is None:
            self._first_time, self._first_step = now, step
            self._last_time, self._last_step = now, step
        else:
            self.durations.append(now - self._previous)
        self._previous = now
        self._steps = step

    def window_rate(self) -> float:
        """Tokens/s since the previous call (or since the first step)."""
        now = time.perf_counter()
        steps = self._steps - (self._last_step if self._last_step is not None else self._steps)
        elapsed = now - self._last_time
        self._last_time, self._last_step = now, self._steps
        return steps * self.tokens_per_step / elapsed if elapsed > 0 and steps > 0 else 0.0

    def overall_rate(self) -> float:
        """Tokens/s from the end of the first step of this attempt to the latest step."""
        if self._first_time is None or self._steps <= self._first_step:
            return 0.0
        elapsed = time.perf_counter() - self._first_time
        return (self._steps - self._first_step) * self.tokens_per_step / elapsed


class MlflowMetrics:
    """Logs metrics into an existing MLflow run (the pretrain stage's), rank 0 only."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        import mlflow  # imported here: only rank 0 with tracking configured pays for it

        self._client = mlflow.MlflowClient(tracking_uri)
        self._metric = mlflow.entities.Metric
        self._run_id = run_id

    def log(self, step: int, values: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        metrics = [self._metric(key, float(v), now, step) for key, v in values.items()]
        self._client.log_batch(self._run_id, metrics=metrics)


def recent_step_seconds(
    durations: list[float], done: int, phase_start: int, every: int = 1
) -> dict[bool, float]:
    """Median seconds of the steps in `durations` (the last ones of a run that has finished
    `done` steps), keyed by whether they carry the sequence-level term (`carries_term`); a
    kind absent from them is absent from the result."""
    first = done - len(durations)  # 0-based index of durations[0]
    kinds: dict[bool, list[float]] = {False: [], True: []}
    for offset, seconds in enumerate(durations):
        kinds[carries_term(first + offset, phase_start, every)].append(seconds)
    return {kind: statistics.median(values) for kind, values in kinds.items() if values}


def eta_seconds(
    *,
    done: int,
    max_steps: int,
    phase_start: int,
    plain_s: float,
    phase_s: float,
    every: int = 1,
) -> float:
    """Seconds left for steps [done, max_steps): `phase_s` each for the steps that carry the
    sequence-level term (`carries_term`; they decode and run a second forward and backward:
    about twice a plain step for the tiny preset), `plain_s` each for the others."""
    left = max(0, max_steps - done)
    with_term = term_steps(done, max_steps, phase_start, every)
    return (left - with_term) * plain_s + with_term * phase_s


def phase_step_estimate(
    plain_s: float,
    *,
    decoded_tokens: int,
    sequence_tokens: int,
    block_size: int,
    decoding_s: float | None,
) -> float:
    """Seconds of a step with the sequence-level term, before one has run: a plain step, a
    second forward and backward over `sequence_tokens` (prefix + decoded, per window) in
    proportion (as if every continuation looped: only those that do go through it), and the
    decoding: `decoding_s` (timed once for all micro-batches of a step) or, unknown, a forward
    pass over the decoded tokens (a third of a step's work per token; a small model's decoding
    is slower than that: its calls are too small to keep the CPU busy)."""
    second_pass = plain_s * sequence_tokens / block_size
    if decoding_s is None:
        decoding_s = plain_s * decoded_tokens / (3 * block_size)
    return plain_s + second_pass + decoding_s


def training_eta(
    *,
    done: int,
    max_steps: int,
    phase_start: int,
    measured: dict[bool, float],
    plain_fallback_s: float,
    phase_estimate: Callable[[float], float],
    every: int = 1,
) -> float:
    """Seconds left of a run: each remaining step at the `measured` seconds of its kind
    (`recent_step_seconds`); a plain step, unmeasured, at `plain_fallback_s`; a step with the
    sequence-level term, while none has been measured and some remain, at `phase_estimate` of
    the plain step's seconds (called only then: it may time a decoding)."""
    plain_s = measured.get(False, plain_fallback_s)
    phase_s = measured.get(True)
    if phase_s is None:
        remain = term_steps(done, max_steps, phase_start, every) > 0
        phase_s = phase_estimate(plain_s) if remain else plain_s
    return eta_seconds(
        done=done,
        max_steps=max_steps,
        phase_start=phase_start,
        plain_s=plain_s,
        phase_s=phase_s,
        every=every,
    )
