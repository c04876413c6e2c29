"""Where a worker's step time goes: data, compute, communication, optimizer, logging, checkpoints.

Read from `time.perf_counter` at the boundaries the training loop already has, with no extra
synchronisation: on a GPU, kernels still queued at a boundary are charged to a later part (the
next blocking call), so the split is exact on CPU and indicative on GPU.

- data: waiting for the step's windows (the read-ahead thread's queue; with `prefetch_steps=0`,
  reading them from the memory-mapped shards);
- compute: forward and backward passes (and the greedy decoding of sequence-level unlikelihood
  steps), less the gradient reduction timed inside the backward;
- comm: DeepSpeed's gradient reduction (`engine.allreduce_gradients`: the all-reduce of ZeRO 0,
  the reduce-scatter of ZeRO 1-2's last bucket, all of it for a small model) and the all-reduce of
  the step's loss; ZeRO 3 reduces in backward hooks, which stay in compute;
- optimizer: `engine.step()`, the update (and under ZeRO 1-2 the all-gather of the updated
  parameters, which DeepSpeed does not expose apart);
- log: rank 0's MLflow call and progress line (each interval reports the previous one's);
- checkpoint: gathering the full state and writing (rank 0) and reporting a checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PARTS = ("compute", "comm", "optimizer", "data", "log", "checkpoint")


class StepTimes:
    """Seconds per part since the last `take()`, and over the whole attempt."""

    def __init__(self) -> None:
        self._interval = dict.fromkeys(PARTS, 0.0)
        self.totals = dict.fromkeys(PARTS, 0.0)
        """Seconds per part since this attempt started."""
        self.active: str | None = None
        """The part whose block is running, if any."""

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Charge the time spent in the block to `name`."""
        start, outer, self.active = time.perf_counter(), self.active, name
        try:
            yield
        finally:
            self.active = outer
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self._interval[name] += seconds
        self.totals[name] += seconds

    def carve_out(self, name: str, seconds: float) -> None:
        """Charge `seconds` spent inside the running block (if any) to `name` instead."""
        if self.active is not None:
            self.add(self.active, -seconds)
        self.add(name, seconds)

    def take(self) -> dict[str, float]:
        """`time_<part>_s` of the interval since the previous call, then start a new interval."""
        out = {f"time_{name}_s": seconds for name, seconds in self._interval.items()}
        self._interval = dict.fromkeys(PARTS, 0.0)
        return out


def time_gradient_reduction(engine, times: StepTimes) -> None:
    """Charge DeepSpeed's gradient reduction (called inside `engine.backward`, or `engine.step`)
    to comm rather than to the block it runs in."""
    reduce = engine.allreduce_gradients

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return reduce(*args, **kwargs)
        finally:
            times.carve_out("comm", time.perf_counter() - start)

    engine.allreduce_gradients = timed


def breakdown(seconds: dict[str, float]) -> str:
    """`compute 81% comm 9% optimizer 6% data 3% log 1%` of the parts' sum."""
    total = sum(seconds.values())
    if total <= 0:
        return ""
    return " ".join(
        f"{key.removeprefix('time_').removesuffix('_s')} {100 * value / total:.0f}%"
        for key, value in seconds.items()
    )


DATA_WAIT_NOTE_SHARE = 0.05
"""Above this share of the step, the progress line says the step waits for data."""


def data_wait_note(seconds: dict[str, float]) -> str:
    """` | waiting for data 12% of the step` when data exceeds `DATA_WAIT_NOTE_SHARE`, else ``."""
    total = sum(seconds.values())
    share = seconds.get("time_data_s", 0.0) / total if total > 0 else 0.0
    return f" | waiting for data {share:.0%} of the step" if share > DATA_WAIT_NOTE_SHARE else ""
