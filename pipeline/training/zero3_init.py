"""GPT's initial weights written straight into this rank's ZeRO-3 partitions.

Under `deepspeed.zero.Init` every parameter is split across the ranks as soon as its module is
built. Gathering each module to run GPT's init on it would hold a whole module per rank (the
token embedding alone is a fifth of a 250M model); instead a normal draw runs through the whole
tensor's random stream on CPU in chunks and each rank keeps the elements of its own partition.
torch's CPU `normal_` draws in blocks of 16 elements, so chunks that are multiples of 16 (the
last at least 16 long) give exactly the numbers of one `normal_` over the whole tensor: every
rank draws the same stream, the global RNG ends where a single process leaves it, and a seed
gives the same weights at every ZeRO stage (tests/unit/training/test_zero_shards.py).
"""

from __future__ import annotations

import torch
from torch import nn

from lmforge.pipeline.training.checkpoint.zero_shards import zero3_range

CHUNK = 1 << 20
"""Elements drawn at a time (a multiple of 16)."""


def normal_range(
    numel: int, std: float, start: int, out: torch.Tensor, chunk: int = CHUNK
) -> torch.Tensor:
    """Fill the 1-D `out` with elements [start, start + len(out)) of
    `torch.empty(numel).normal_(0, std)`, drawing the whole stream (the RNG advances as for the
    whole tensor) but holding one chunk at a time; returns `out`."""
    count = out.numel()
    for lo, hi in _chunks(numel, chunk):
        values = torch.empty(hi - lo).normal_(0.0, std)
        a, b = max(lo, start), min(hi, start + count)
        if a < b:
            out[a - start : b - start] = values[a - lo : b - lo]
    return out


def _chunks(numel: int, chunk: int) -> list[tuple[int, int]]:
    bounds = list(range(0, numel, chunk)) + [numel]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < 16:
        del bounds[-2]  # a last chunk under 16 elements would be drawn another way
    return list(zip(bounds[:-1], bounds[1:], strict=True))


class PartitionInit:
    """A `ParamInit` (see `lmforge.model.gpt`) that sets this rank's partition only."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def normal_(self, param: nn.Parameter, std: float) -> None:
        start, count = zero3_range(param, self.rank)
        normal_range(param.ds_numel, std, start, param.ds_tensor.data.reshape(-1)[:count])

    def fill_(self, param: nn.Parameter, value: float) -> None:
        _, count = zero3_range(param, self.rank)
        param.ds_tensor.data.reshape(-1)[:count].fill_(value)
