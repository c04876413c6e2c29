"""What Ray Train runs on every worker: `train_loop_per_worker({"payload": TrainingPayload})`.

Kept apart from `worker`, which imports torch, DeepSpeed and the rest of training: Ray Train's
controller unpickles the entry point and its config, so whatever their module imports, the
controller imports too, before it starts any worker (4.5 s of imports on the critical path of
every run on two cores). Here the entry point imports `worker` only once it runs on a worker.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Iterator

from lmforge.pipeline.training.train_config import TrainConfig

HIDDEN_FROM_DEEPSPEED = ("mlflow",)
"""What DeepSpeed imports for a feature lmforge never uses: its autotuner imports MLflow whenever
it is installed, 1.5-1.7 CPU-s of every rank's start on two cores. Only rank 0 of a tracked run
logs to MLflow, and it imports MLflow when it opens its client."""


def train_loop_per_worker(config: dict) -> None:
    """Ray Train entry point; `config["payload"]` is a `payload.TrainingPayload`."""
    payload = config["payload"]
    run_worker = import_worker(payload.train)
    run_worker(payload)


COMPILED_AT_IMPORT = ("deepspeed.runtime.zero.muon.muon_optimizer",)
"""What DeepSpeed imports on a ZeRO rank's first step (ZeRO-1/2's gradient averaging looks up its
Muon optimizer class) and `torch.compile`s a function of at import: torch's compiler stack
imported for an optimizer lmforge never uses, 1.3-2.5 CPU-s of every ZeRO rank's start on two
cores. Imported with its compilation deferred to the function's first call (`compile_deferred`)."""


def import_worker(cfg: TrainConfig) -> Callable:
    """`worker.run_worker`, its training stack imported for a run of `cfg`."""
    name_deepspeed_accelerator(cfg)
    with hidden_modules(HIDDEN_FROM_DEEPSPEED):
        from lmforge.pipeline.training.worker import run_worker
    with compile_deferred():
        for name in COMPILED_AT_IMPORT:
            if importlib.util.find_spec(name) is not None:  # where this DeepSpeed has it
                importlib.import_module(name)
    return run_worker


@contextlib.contextmanager
def compile_deferred() -> Iterator[None]:
    """Inside, `torch.compile(fn)` of a plain function returns a wrapper that compiles `fn` on its
    first call: a module that compiles a kernel at import pays for torch's compiler only if the
    kernel runs. Modules (and `torch.compile(**options)` used as a decorator factory with a module
    later) compile as usual; afterwards `torch.compile` is torch's again."""
    import torch

    compile_now = torch.compile

    def deferred(model=None, **options):
        if model is None:
            return functools.partial(deferred, **options)
        if isinstance(model, torch.nn.Module) or not callable(model):
            return compile_now(model, **options)
        compiled = None

        @functools.wraps(model)
        def compiled_on_first_call(*args, **kwargs):
            nonlocal compiled
            if compiled is None:
                compiled = compile_now(model, **options)
            return compiled(*args, **kwargs)

        return compiled_on_first_call

    torch.compile = deferred
    try:
        yield
    finally:
        torch.compile = compile_now


@contextlib.contextmanager
def hidden_modules(names: Iterable[str]) -> Iterator[None]:
    """Inside, importing any of `names` not yet loaded fails with ImportError (Python's rule for a
    `None` entry in `sys.modules`), so a library's optional import of it is skipped; afterwards
    they import as usual."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


def name_deepspeed_accelerator(cfg: TrainConfig) -> None:
    """Tell DeepSpeed a CPU run's accelerator before it is imported (unless the environment
    names one): left to detect it, DeepSpeed warns on every rank that it found no GPU ("If you
    have GPU or other accelerator, we were unable to detect it"), which reads as a fault in a run
    meant for CPUs."""
    if not cfg.use_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
