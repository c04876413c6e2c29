"""Total negative log-likelihood of a long token sequence under the model, for perplexity.

The sequence is scored in windows of up to `block_size` tokens that start `stride` tokens apart.
Every token after the first is predicted exactly once: in the first window that reaches it, so
with stride < block_size each prediction (after the first window) sees at least
block_size - stride tokens of context. Perplexity = exp(total_nll / count) (F1).

`WindowPlan` gives window k in closed form, so a range of windows can be scored on its own (by
one of many processes, `range_nll`) without listing the windows of the whole sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from lmforge.model.gpt import GPT


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """The sliding windows over a sequence of `n_tokens` ids."""

    n_tokens: int
    block_size: int
    stride: int

    def __post_init__(self) -> None:
        if not 1 <= self.stride <= self.block_size:
            raise ValueError(
                f"stride must be in [1, block_size={self.block_size}], got {self.stride}"
            )

    @property
    def count(self) -> int:
        """Number of windows: the first, then one per `stride` until the last id is predicted."""
        if self.n_tokens < 2:
            return 0
        beyond_first = self.n_tokens - 1 - self.block_size
        return 1 + max(0, -(-beyond_first // self.stride))

    def window(self, k: int) -> tuple[int, int, int]:
        """(begin, end, done) of window k: inputs ids[begin:end], targets ids[begin+1:end+1], of
        which targets at ids index <= done were already scored by an earlier window."""
        last = self.n_tokens - 1
        begin = k * self.stride
        done = 0 if k == 0 else min((k - 1) * self.stride + self.block_size, last)
        return begin, min(begin + self.block_size, last), done

    def scored(self, first: int, stop: int) -> tuple[int, int]:
        """Windows [first, stop) predict ids[i + 1] for i in the returned [start, end)."""
        return self.window(first)[2], self.window(stop - 1)[1]

    def span(self, first: int, stop: int) -> tuple[int, int]:
        """The ids that windows [first, stop) read, inputs and targets: ids[begin:end]."""
        return self.window(first)[0], self.window(stop - 1)[1] + 1


def sliding_windows(n_tokens: int, block_size: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, done) per window (see `WindowPlan.window`), for short sequences."""
    plan = WindowPlan(n_tokens, block_size, stride)
    return [plan.window(k) for k in range(plan.count)]


@torch.no_grad()
def token_nll(
    model: GPT, ids: Tensor, block_size: int, stride: int, *, batch_size: int = 8
) -> tuple[float, int]:
    """(sum of -ln p(token | context), number of predicted tokens) over a 1-D id sequence.

    block_size may not exceed the model's; windows of equal length run `batch_size` at a time.
    """
    nll = position_nll(model, ids, block_size, stride, batch_size=batch_size)
    return float(nll.sum()), int(nll.numel())


@torch.no_grad()
def position_nll(
    model: GPT, ids: Tensor, block_size: int, stride: int, *, batch_size: int = 8
) -> Tensor:
    """-ln p(ids[i + 1] | context) for i = 0 .. len-2, float64 on CPU: the per-token losses that
    `token_nll` sums (for sums over documents, e.g. a bootstrap)."""
    if ids.dim() != 1:
        raise ValueError(f"token_nll expects a 1-D id tensor, got shape {tuple(ids.shape)}")
    plan = WindowPlan(ids.numel(), block_size, stride)
    if plan.count == 0:
        return torch.zeros(0, dtype=torch.float64)
    return range_nll(model, plan, 0, plan.count, ids, batch_size=batch_size)


@torch.no_grad()
def range_nll(
    model: GPT, plan: WindowPlan, first: int, stop: int, ids: Tensor, *, batch_size: int = 8
) -> Tensor:
    """The losses that windows [first, stop) of `plan` score, float64 on CPU: -ln p(ids[i + 1])
    for i in `plan.scored(first, stop)`. `ids` holds exactly the sequence's `plan.span(first,
    stop)`. The same windows are batched the same way whoever scores the range."""
    if plan.block_size > model.config.block_size:
        raise ValueError(
            f"block_size={plan.block_size} exceeds the model's block_size={model.config.block_size}"
        )
    base, end = plan.span(first, stop)
    if ids.numel() != end - base:
        raise ValueError(f"windows {first}..{stop} read {end - base} ids, got {ids.numel()}")
    start, _ = plan.scored(first, stop)
    ids = ids.to(device=model.wte.weight.device, dtype=torch.long)
    out = torch.zeros(end - 1 - base, dtype=torch.float64)  # indexed by input id, from `base`
    by_length: dict[int, list[tuple[int, int, int]]] = {}
    for k in range(first, stop):
        begin, stop_at, done = plan.window(k)
        by_length.setdefault(stop_at - begin, []).append(
            (begin - base, stop_at - base, done - base)
        )
    was_training = model.training
    model.eval()
    try:
        for group in by_length.values():
            for i in range(0, len(group), batch_size):
                _score_batch(model, ids, group[i : i + batch_size], out)
    finally:
        model.train(was_training)
    return out[start - base :]


def _score_batch(model: GPT, ids: Tensor, windows: list[tuple[int, int, int]], out: Tensor) -> None:
    """Write the losses of the windows' not-yet-scored targets into `out` (indexed by input)."""
    inputs = torch.stack([ids[begin:end] for begin, end, _ in windows])
    targets = torch.stack([ids[begin + 1 : end + 1] for begin, end, _ in windows])
    logits, _ = model(inputs)
    nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    nll = nll.view(targets.shape).double().cpu()
    for row, (begin, end, done) in enumerate(windows):
        first = max(done - begin, 0)  # targets before it were scored by an earlier window
        out[begin + first : end] = nll[row, first:]
