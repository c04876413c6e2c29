"""Total negative log-likelihood of a long token sequence under the model, for perplexity.

The sequence is scored in windows of up to `block_size` tokens that start `stride` tokens apart.
Every token after the first is predicted exactly once: in the first window that reaches it, so
with stride < block_size each prediction (after the first window) sees at least
block_size - stride tokens of context. Perplexity = exp(total_nll / count) (F1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lmforge.model.gpt import GPT


def sliding_windows(n_tokens: int, block_size: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, done) per window: inputs ids[begin:end], targets ids[begin+1:end+1], of which
    targets at ids index <= done were already scored by an earlier window."""
    if not 1 <= stride <= block_size:
        raise ValueError(f"stride must be in [1, block_size={block_size}], got {stride}")
    windows, begin, done = [], 0, 0
    while done < n_tokens - 1:
        end = min(begin + block_size, n_tokens - 1)
        windows.append((begin, end, done))
        done = end
        begin += stride
    return windows


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
    if block_size > model.config.block_size:
        raise ValueError(
            f"block_size={block_size} exceeds the model's block_size={model.config.block_size}"
        )
    device = model.wte.weight.device
    ids = ids.to(device=device, dtype=torch.long)
    out = torch.zeros(max(ids.numel() - 1, 0), dtype=torch.float64)
    windows = sliding_windows(ids.numel(), block_size, stride)
    was_training = model.training
    model.eval()
    try:
        by_length: dict[int, list[tuple[int, int, int]]] = {}
        for window in windows:
            by_length.setdefault(window[1] - window[0], []).append(window)
        for group in by_length.values():
            for i in range(0, len(group), batch_size):
                _score_batch(model, ids, group[i : i + batch_size], out)
    finally:
        model.train(was_training)
    return out


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
