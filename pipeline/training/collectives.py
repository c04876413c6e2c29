"""Python objects exchanged between the ranks of a run (small ones: names, outcomes, indexes).

A world of one needs no process group; `group` None is the training's default group.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist


def broadcast_from_rank0(value: Any, world: int, group=None) -> Any:
    """Rank 0's `value`, on every rank."""
    if world == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


def all_gather(value: Any, world: int, group=None) -> list[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    if world == 1:
        return [value]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, value, group=group)
    return out
