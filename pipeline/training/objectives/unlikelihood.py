"""Token-level unlikelihood: a training term against repeating the context (Welleck et al.,
"Neural Text Generation with Unlikelihood Training", ICLR 2020).

At each position the model is also asked to give little probability to the tokens already in
its context that are not the next token: the term is the mean over positions of
`-sum log(1 - p(c))` over those candidates `c`. Added to cross-entropy with a weight
(`train.unlikelihood`), it teaches a model not to fall into the loops that greedy decoding of a
small model falls into ("the function of the function of the ..."), at a small cost in
perplexity. Scoring and decoding are unchanged: it is a property of the trained weights.

The candidates of a position are gathered from its context ([B, T, T]) rather than masked over
the vocabulary ([B, T, V]): a block is much shorter than a vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

_MAX_PROB = 1.0 - 1e-5
"""log(1 - p) is clamped here so a confident wrong candidate gives a large but finite term."""


def unlikelihood_penalty(log_prob: Tensor) -> Tensor:
    """-log(1 - p) of each log-probability, p clamped below 1 (the penalty of both the token-level
    and the sequence-level term)."""
    return -torch.log1p(-log_prob.exp().clamp(max=_MAX_PROB))


def context_candidates(inputs: Tensor, targets: Tensor) -> Tensor:
    """[B, T, S] bool: inputs[b, s] is a candidate of position t, that is s <= t, s is the first
    position of its token in the row (each token counts once), and it is not targets[b, t]."""
    positions = torch.arange(inputs.size(1), device=inputs.device)
    in_context = positions[None, :] <= positions[:, None]  # [T, S]: s <= t
    same_token = inputs[:, :, None] == inputs[:, None, :]  # [B, S', S]
    is_first = ~(same_token & ~in_context).any(dim=1)  # no s' < s holds the same token
    not_target = inputs[:, None, :] != targets[:, :, None]
    return is_first[:, None, :] & in_context & not_target


def token_unlikelihood(log_probs: Tensor, inputs: Tensor, targets: Tensor) -> Tensor:
    """Mean over positions whose target is not -100 of -sum log(1 - p(c)) over the context
    candidates c of that position (`context_candidates`); log_probs [B, T, V]."""
    batch, length = inputs.shape
    candidates = context_candidates(inputs, targets)
    index = inputs[:, None, :].expand(batch, length, length)
    per_position = (unlikelihood_penalty(log_probs.gather(2, index)) * candidates).sum(dim=-1)
    scored = targets != -100
    return (per_position * scored).sum() / scored.sum().clamp_min(1)


def cross_entropy_and_unlikelihood(
    logits: Tensor, inputs: Tensor, targets: Tensor
) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy over targets that are not -100 (as GPT.forward gives it) and
    `token_unlikelihood`, from one log-softmax."""
    log_probs = logits.float().log_softmax(dim=-1)
    ce = F.nll_loss(log_probs.flatten(0, 1), targets.flatten(), ignore_index=-100)
    return ce, token_unlikelihood(log_probs, inputs, targets)


def training_objective(
    forward: Callable[..., tuple[Tensor, Tensor | None]],
    inputs: Tensor,
    targets: Tensor,
    weight: float,
) -> tuple[Tensor, Tensor | None, Tensor]:
    """(cross-entropy, the unlikelihood term or None when `weight` is 0, what to backpropagate)
    of one micro-batch; `forward` is GPT's (or an engine wrapping it): (idx, targets) -> (logits,
    loss)."""
    if weight <= 0:
        _, ce = forward(inputs, targets)
        return ce, None, ce
    logits, _ = forward(inputs)
    ce, unlikely = cross_entropy_and_unlikelihood(logits, inputs, targets)
    return ce, unlikely, ce + weight * unlikely
