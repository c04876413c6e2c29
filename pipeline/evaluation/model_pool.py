"""A pool of Ray actors that each hold the trained model once: the eval stages' workers.

`perplexity` streams ranges of the validation split through it, `sample` and `harm` their prompt
batches. Work goes out in order, at most `IN_FLIGHT` calls per actor and at most `OUTSTANDING`
per actor between the first unfinished item and the last one sent; results come back in input
order, so combining them does not depend on how many actors there are, and the coordinator holds a
bounded number of items and results whatever the input's size.

Plain actors fed by this bounded loop rather than Ray Data's `map_batches`: the items are small
descriptions (a range of windows, a batch of prompts) and each actor reads the data itself (its
range of the token shards), so there are no blocks to move; the loop needs no CPU of its own
beside the actors (on a 2-CPU machine a Ray Data read task waiting for one stalls the stream);
and results arrive in order for an exact combination. An actor that dies is restarted and its
calls rerun once (they are pure); the stage fails with one line if it dies again.

With `in_process` the stage's own process holds the model and runs the items one after another:
no actor process imports torch and loads the model (seconds of CPU each), which on a machine of
a few CPUs, where the eval stages run side by side, is most of what a small model's evaluation
costs. The stage then reserves the CPUs an actor would (`cpus_of_stage`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.location import is_bucket

if TYPE_CHECKING:
    from lmforge.pipeline.engine.stage import StageContext

log = logging.getLogger(__name__)

IN_FLIGHT = 2
"""Calls queued on one actor: the next is ready when the current one ends."""
OUTSTANDING = 4
"""Items per actor between the oldest unfinished one and the newest sent (bounds reordering)."""
WAIT_NOTICE_S = 60.0
"""How long the pool waits for its first actor before saying so (and waiting on)."""


@dataclass(kw_only=True, slots=True)
class ModelPoolConfig:
    """Where an eval stage runs the model: settings shared by `eval.perplexity`, `eval.sample`
    and `eval.harm` (each section has its own values)."""

    actors: int = 1
    "Model actors the work is spread over (0 = one per GPU, or per `threads_per_actor` CPUs)."
    threads_per_actor: int = 1
    "torch threads of an actor on CPU; it reserves as many CPUs."
    device: Literal["auto", "cpu", "cuda"] = "auto"
    "auto: a GPU per actor (bf16 autocast) when the cluster has GPUs, else CPU; cpu/cuda force."
    batch_size: int = 16
    "Sequences per forward pass of an actor: windows when scoring, prompts when sampling."
    in_process: bool = False
    """Run the model in the stage's own process on `threads_per_actor` CPUs (which the stage then
    reserves) instead of on actors; `actors` is ignored. For small models on a machine of a few
    CPUs: it saves each eval stage the processes that import torch and load the model. CPU
    only."""

    def __post_init__(self) -> None:
        for name in ("threads_per_actor", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.actors < 0:
            raise ValueError(f"actors must be >= 0 (0 = fill the cluster), got {self.actors}")
        if self.in_process and self.device == "cuda":
            raise ValueError(
                "in_process runs the model on the stage's own CPUs: set device to cpu or auto, "
                "or in_process to false"
            )


def cpus_of_stage(cfg: ModelPoolConfig) -> float:
    """The CPUs an eval stage reserves: none when actors hold them, its threads in process."""
    return float(cfg.threads_per_actor) if cfg.in_process else 0.0


class ModelWorker:
    """One actor: the trained model and tokenizer, loaded once, and what callers cache in it."""

    def __init__(
        self,
        pretrain_dir: str,
        tokenizer_dir: str,
        device: str,
        threads: int,
        own_process: bool = True,
    ) -> None:
        """`own_process`: an actor's, whose peak RSS starts here; False in the stage's process."""
        import torch

        from lmforge.pipeline.cluster.process_stats import reset_peak_rss
        from lmforge.pipeline.evaluation.trained_model import TrainedModel

        if own_process:
            reset_peak_rss()  # a reused worker process's history is not this actor's
        self._cpu_started = time.process_time()
        torch.set_num_threads(threads)
        self.device = device
        self.trained = TrainedModel(Path(pretrain_dir), Path(tokenizer_dir), device=device)
        self.cache: dict[str, Any] = {}
        """State a caller keeps between its calls (an opened stream), keyed by the caller."""

    def ready(self) -> int:
        return os.getpid()

    def usage(self) -> dict[str, float]:
        """Peak RSS (bytes) and CPU seconds of this actor since it started."""
        from lmforge.pipeline.cluster.process_stats import task_peak_rss_bytes

        return {
            "peak_rss": task_peak_rss_bytes(),
            "cpu_s": time.process_time() - self._cpu_started,
        }

    def apply(self, fn: Callable[[ModelWorker, Any], Any], item: Any) -> Any:
        """fn(this worker, item), under bf16 autocast on a GPU."""
        import torch

        if self.device == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return fn(self, item)
        return fn(self, item)


def _logprobs(worker: ModelWorker, texts: list[str]) -> list[float]:
    return worker.trained.logprobs(texts)


def _complete(worker: ModelWorker, job: tuple) -> list[str]:
    return worker.trained.complete(*job)


def _complete_ids(worker: ModelWorker, job: tuple) -> list[list[int]]:
    return worker.trained.complete_ids(*job)


class ModelPool:
    """Actors holding the model of a pretrain artifact; `with ModelPool(...) as pool:`."""

    def __init__(
        self,
        cfg: ModelPoolConfig,
        pretrain_dir: str | os.PathLike[str],
        tokenizer_dir: str | os.PathLike[str],
        *,
        section: str,
        node_id: str | None = None,
    ) -> None:
        """`node_id`: start every actor on that node (where the artifact paths exist)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.cfg, self.section = cfg, section
        self.actors: list = []
        self._starting: dict = {}
        self._ready: list[int] = []
        self._local: ModelWorker | None = None
        if cfg.in_process:
            self.device = "cpu"
            from safetensors import SafetensorError

            try:
                self._local = ModelWorker(
                    str(pretrain_dir), str(tokenizer_dir), "cpu", cfg.threads_per_actor, False
                )
            except (OSError, ValueError, SafetensorError) as exc:  # an actor's death, said here
                raise LmforgeError(
                    f"{section}: the model did not load: {exc}; `lmforge run --verify` checks "
                    "the cached artifacts and recomputes a damaged one"
                ) from exc
            log.info("%s: the model in the stage's process on cpu", section)
            return
        self.device = _device(cfg, section)
        gpus = self.device == "cuda"
        n = cfg.actors or _fill(cfg, gpus)
        _check_fits(cfg, section)
        remote = ray.remote(ModelWorker).options(
            num_cpus=cfg.threads_per_actor,
            num_gpus=1 if gpus else 0,
            max_restarts=1,
            max_task_retries=1,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
            if node_id
            else "DEFAULT",
        )
        args = (str(pretrain_dir), str(tokenizer_dir), self.device, cfg.threads_per_actor)
        self.actors = [remote.remote(*args) for _ in range(n)]
        self._starting = {a.ready.remote(): i for i, a in enumerate(self.actors)}
        log.info("%s: %d model actor(s) on %s", section, n, self.device)

    @classmethod
    def for_stage(cls, ctx: StageContext, cfg: ModelPoolConfig, section: str) -> ModelPool:
        """The pool of an eval stage, for the model of its `pretrain` and `train_tokenizer`
        inputs. With the store in a bucket the inputs are staged on the stage's node only, so
        the actors start there (until inputs are read through a cache on every node)."""
        import ray

        bucket = is_bucket(ctx.store_uri)
        node = ray.get_runtime_context().get_node_id() if bucket else None
        pretrain, tokenizer = ctx.input("pretrain"), ctx.input("train_tokenizer")
        return cls(cfg, pretrain, tokenizer, section=section, node_id=node)

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the actors, those still starting first: killed after a ready one, an actor
        waiting for a CPU gets the CPU that one frees and starts (torch imported, the model
        loaded: seconds of CPU) only to be killed, beside the other stages' actors."""
        import ray

        self._local = None
        order = [*self._starting.values(), *self._ready]
        for actor in [self.actors[i] for i in order]:
            ray.kill(actor, no_restart=True)
        self.actors = []

    def map(self, fn: Callable[[ModelWorker, Any], Any], items: Iterable) -> Iterator:
        """fn(worker, item) for every item on the actors, yielded in input order."""
        if self._local is not None:
            yield from (self._local.apply(fn, item) for item in items)
            return
        items = iter(items)
        load = [0] * len(self.actors)
        running: dict[Any, tuple[int, int]] = {}  # call -> (item number, actor)
        finished: dict[int, Any] = {}
        sent = done = 0
        exhausted = False
        while True:
            while not exhausted and sent - done < OUTSTANDING * len(self.actors):
                free = [i for i in self._ready if load[i] < IN_FLIGHT]
                if not free:
                    break
                item = next(items, _END)
                if item is _END:
                    exhausted = True
                    break
                actor = min(free, key=lambda i: load[i])
                running[self.actors[actor].apply.remote(fn, item)] = (sent, actor)
                load[actor] += 1
                sent += 1
            if done in finished:
                yield finished.pop(done)
                done += 1
                continue
            if exhausted and not running:
                return
            for ref in self._wait(list(running)):
                number, actor = running.pop(ref)
                load[actor] -= 1
                finished[number] = self._get(ref)

    def _wait(self, calls: list) -> list:
        """The calls that ended, after waiting for one call or a starting actor."""
        import ray

        pending = set(calls)
        waiting = calls + list(self._starting)
        timeout = None if self._ready else WAIT_NOTICE_S
        ended, _ = ray.wait(waiting, num_returns=1, timeout=timeout)
        if not ended:
            log.warning("%s: no model actor has started yet; waiting for resources", self.section)
        for ref in ended:
            if ref in self._starting:
                self._get(ref)
                self._ready.append(self._starting.pop(ref))
        return [ref for ref in ended if ref in pending]

    def _get(self, ref: Any) -> Any:
        import ray

        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, LmforgeError | ValueError):
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            cause = lines[-1][:300] if lines else type(exc).__name__  # the error, or the exit
            raise LmforgeError(
                f"{self.section}: a model actor died: {cause}; if it ran out of memory, lower "
                f"{self.section}.batch_size or give the actors more memory"
            ) from exc

    def logprobs(self, texts: list[str]) -> list[float]:
        """TrainedModel.logprobs of every text, batch by batch over the actors."""
        size = self.cfg.batch_size
        batches = (texts[i : i + size] for i in range(0, len(texts), size))
        return [score for batch in self.map(_logprobs, batches) for score in batch]

    def complete(self, prompts: list[str], sampling: Any) -> list[str]:
        """TrainedModel.complete of every prompt: the same rows and seeds as one batch."""
        return self._generate(_complete, prompts, sampling)

    def complete_ids(self, prompts: list[list[int]], sampling: Any) -> list[list[int]]:
        return self._generate(_complete_ids, prompts, sampling)

    def _generate(self, fn: Callable, prompts: list, sampling: Any) -> list:
        size = self.cfg.batch_size
        jobs = (
            (prompts[i : i + size], dataclasses.replace(sampling, seed=sampling.seed + i))
            for i in range(0, len(prompts), size)
        )  # row r of the whole list samples with seed + r, however it is batched
        return [out for batch in self.map(fn, jobs) for out in batch]

    def usage(self) -> list[dict[str, float]]:
        """Peak RSS (bytes) and CPU seconds of every started actor since it started (in process:
        the stage process's peak, and the CPU seconds since the model was loading)."""
        import ray

        if self._local is not None:
            return [self._local.usage()]
        return ray.get([self.actors[i].usage.remote() for i in sorted(self._ready)])

    def peak_rss_mb(self) -> float | None:
        """The largest started actor's peak RSS, in MiB (what the stage's estimate checks); None
        in process, where the stage's own peak, which the estimate measures anyway, holds it."""
        if self._local is not None:
            return None
        return max((u["peak_rss"] for u in self.usage()), default=0) / 2**20


_END = object()


def _device(cfg: ModelPoolConfig, section: str) -> str:
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    if cfg.device == "cuda" and not gpus:
        raise LmforgeError(
            f"{section}.device is cuda but the Ray cluster has no GPU; set {section}.device=auto"
        )
    return "cuda" if cfg.device != "cpu" and gpus else "cpu"


def _fill(cfg: ModelPoolConfig, gpus: bool) -> int:
    import ray

    resources = ray.cluster_resources()
    if gpus:
        return max(1, int(resources.get("GPU", 1)))
    return max(1, int(resources.get("CPU", 1)) // cfg.threads_per_actor)


def _check_fits(cfg: ModelPoolConfig, section: str) -> None:
    """An actor larger than every node would wait forever: say so instead."""
    import ray

    largest = max((n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]), default=0)
    if cfg.threads_per_actor > largest:
        raise LmforgeError(
            f"{section}.threads_per_actor={cfg.threads_per_actor} exceeds the CPUs of every node "
            f"(at most {int(largest)}); lower it"
        )
