"""Reading the next steps' windows in a background thread, so a step does not wait on storage.

The thread walks its own copy of the worker's sampler, so the batches are exactly those a
synchronous read gives, in the same order; each comes with the sampler position after its step,
which is what a checkpoint saves once the step is done (not the thread's position, which runs
ahead). The worker's wait for a batch (`next_step`) is its data time: near zero when reading keeps
up, the storage latency when it does not.
"""

from __future__ import annotations

import copy
import queue
import threading
from dataclasses import dataclass

import torch

from lmforge.pipeline.training.data.sampler import WindowSampler, load_batch


@dataclass(frozen=True, slots=True)
class PrefetchedStep:
    """One step's micro-batches and the sampler position once the step is consumed."""

    batches: list[tuple[torch.Tensor, torch.Tensor]]
    position: int


class BatchPrefetcher:
    """Up to `depth` steps read ahead by a daemon thread, `steps` in all (None: no end);
    `close()` stops it."""

    def __init__(
        self, dataset, sampler: WindowSampler, depth: int = 2, steps: int | None = None
    ) -> None:
        self._dataset = dataset
        self._sampler = copy.deepcopy(sampler)
        self._steps = steps
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, name="lmforge-prefetch", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        try:
            done = 0
            while not self._stop.is_set() and (self._steps is None or done < self._steps):
                done += 1
                micro = self._sampler.next_step()
                step = PrefetchedStep(
                    [load_batch(self._dataset, mb) for mb in micro], self._sampler.position
                )
                while not self._stop.is_set():
                    try:
                        self._queue.put(step, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # handed to the training loop, which raises it
            self._queue.put(exc)

    def next_step(self) -> PrefetchedStep:
        """The next step's batches (waits for the thread if it is behind)."""
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
