"""Ray Train's local mode: the one worker of a `train.local_mode` run trains in the process that
calls `fit` (the pretrain stage's Ray task), so no worker, controller or synchronisation actor
starts. Each of those is a process importing torch and Ray Train: about 10 CPU-s and 8 s of a
small model's 20-step pretrain on two cores (13.1 s against 4.5 s).

The process outlives the run (Ray runs later tasks in it), so what a worker actor would have had
to itself is set for the run and put back after it, whether it finished or failed: the rank
variables DeepSpeed reads and torch's thread count. The process group is the exception: the
first local run in a process sets up a group of one (gloo on an in-process store, no port) and
the process keeps it for its later local runs, because DeepSpeed keeps the group it first saw for
the life of the process (a second run on a fresh group fails on the stale one); so the trainer
uses Ray Train's plain local controller, not its torch one, which destroys the group after every
run (`trainer.PipelineTrainer`). For the same reason the worker neither pins its thread nor keeps
freed memory in local mode (`worker`). Its final checkpoint's location comes back in its metrics
(`FINAL_LOCATION`): Ray Train keeps no copy of a local run's reported checkpoint, whose directory
is gone once reported.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from lmforge.environ import environ_set

FINAL_LOCATION = "final_checkpoint_location"
"""The metric of a local run's last report that holds its final checkpoint's location."""

RANK_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
"""Where DeepSpeed reads the rank (its engine requires LOCAL_RANK)."""

LOCAL_MODE_LOGGER = "ray.train.v2.api.config"
"""Where Ray Train logs, at INFO, that a run is in local mode and where to report its issues."""


@contextlib.contextmanager
def in_this_process() -> Iterator[None]:
    """Around a local-mode `fit`: the rank variables and the process's group of one; torch's
    thread count and the environment put back after it."""
    import torch

    threads = torch.get_num_threads()
    try:
        with environ_set(RANK_ENV):
            world_of_one()
            yield
    finally:
        torch.set_num_threads(threads)


def world_of_one() -> None:
    """This process's torch.distributed group of one, set up on first use and kept."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    elif dist.get_world_size() != 1:
        raise RuntimeError(
            f"train.local_mode trains a world of one, but this process is in a group of "
            f"{dist.get_world_size()}"
        )


@contextlib.contextmanager
def quiet_local_mode_notice() -> Iterator[None]:
    """Ray Train's INFO line on every local-mode run asks to report issues upstream: not news to
    a user who chose `train.local_mode`."""
    logger = logging.getLogger(LOCAL_MODE_LOGGER)
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
