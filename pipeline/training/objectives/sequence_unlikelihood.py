"""Sequence-level unlikelihood: training against the loops of the model's own greedy decoding
(Welleck et al., "Neural Text Generation with Unlikelihood Training", ICLR 2020, section 5.2).

The model continues a prefix of a training window greedily, as the demo's greedy samples do;
every token of the continuation that belongs to a word-piece n-gram already produced earlier in
that continuation is a loop the model fell into, and the term is `-log(1 - p(token))` at those
positions, averaged over the continuation's positions. Unlike the token-level term
(`unlikelihood.py`), which pushes down every context token at every position of the training
text, this one touches only what the model actually repeats, so it leaves most of what
cross-entropy learned alone.

Decoding costs about `new_tokens` small forward passes per micro-batch, so the term runs on the
last steps of a run only (`train.sequence_unlikelihood_steps`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lmforge.model.generate import SamplingConfig, generate
from lmforge.pipeline.training.objectives.unlikelihood import unlikelihood_penalty


def repeated_ngram_mask(continuation: Tensor, n: int) -> Tensor:
    """[B, N] bool: the positions of `continuation` [B, N] that lie in an n-gram which already
    occurred (whole) earlier in the same row."""
    batch, length = continuation.shape
    mask = torch.zeros(batch, length, dtype=torch.bool, device=continuation.device)
    if length < n:
        return mask
    grams = continuation.unfold(1, n, 1)  # [B, K, n]
    count = grams.size(1)
    same = (grams[:, :, None, :] == grams[:, None, :, :]).all(dim=-1)  # [B, K, K]
    earlier = torch.ones(count, count, dtype=torch.bool, device=continuation.device).tril(-1)
    repeated = (same & earlier).any(dim=-1)  # [B, K]: gram i occurred at some j < i
    for offset in range(n):
        mask[:, offset : offset + count] |= repeated
    return mask


def greedy_continuations(model: torch.nn.Module, prefixes: Tensor, new_tokens: int) -> Tensor:
    """[B, P + new_tokens]: each prefix [B, P] followed by the model's greedy continuation (no
    end-of-text stop: a window's prefix is mid-document). `model` holds its full parameters
    (`GreedyDecoder` for a ZeRO-3 engine's)."""
    with torch.no_grad():
        rows = generate(
            model,
            prefixes.tolist(),
            SamplingConfig(max_new_tokens=new_tokens, greedy=True),
            eos_id=None,
        )
    continued = torch.tensor(rows, dtype=prefixes.dtype, device=prefixes.device)
    return torch.cat([prefixes, continued], dim=1)


class GreedyDecoder:
    """`greedy_continuations` of a DeepSpeed engine's module, under any ZeRO stage.

    ZeRO-3 holds a partition of each parameter, and its hooks gather a module's parameters at
    every forward, even inside `GatheredParameters`: decoding token by token with the module
    took 9x ZeRO-1's time (a 2-layer d=64 model, 32 tokens). So under ZeRO-3 the parameters are
    gathered once per decoding and copied into a plain replica of the model, which decodes
    without DeepSpeed's hooks; other stages decode with the module itself."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.partitioned = any(hasattr(p, "ds_id") for p in module.parameters())
        self._replica: torch.nn.Module | None = None

    def __call__(self, prefixes: Tensor, new_tokens: int) -> Tensor:
        model = self._gathered_replica() if self.partitioned else self.module
        return greedy_continuations(model, prefixes, new_tokens)

    def _gathered_replica(self) -> torch.nn.Module:
        import deepspeed

        if self._replica is None:
            with torch.random.fork_rng(devices=[]):  # its init must not move training's RNG
                self._replica = type(self.module)(self.module.config)
            # ZeRO-3 partitions parameters only, and the buffers (a fixed position table) do
            # not change in training: copied once, onto the module's device
            buffers = dict(self.module.named_buffers())
            for name, buffer in self._replica.named_buffers():
                buffer.data = buffers[name].data.clone()
        replica = self._replica.train(self.module.training)
        params = dict(self.module.named_parameters())
        with deepspeed.zero.GatheredParameters(list(params.values()), modifier_rank=None):
            for name, param in replica.named_parameters():
                param.data = params[name].data.detach().clone()
        return replica


def looping_rows(sequences: Tensor, prefix: int, n: int) -> Tensor:
    """[B] bool: the rows of `sequences` [B, L] whose continuation (after `prefix` tokens)
    repeats an n-gram, the only rows on which the term is not zero."""
    return repeated_ngram_mask(sequences[:, prefix:], n).any(dim=1)


def sequence_unlikelihood(
    logits: Tensor, sequences: Tensor, prefix: int, n: int, positions: int | None = None
) -> Tensor:
    """Mean over the continuation's positions of `-log(1 - p(token))` where the token lies in a
    repeated n-gram (`repeated_ngram_mask`); `logits` [B, L-1, V] are the model's over
    `sequences[:, :-1]`, `sequences` [B, L] a prefix of `prefix` tokens and its continuation.
    `positions` divides the sum instead of the continuation's size: the size of the whole batch
    when `sequences` holds only its `looping_rows`, so the term is the whole batch's."""
    continuation = sequences[:, prefix:]
    mask = repeated_ngram_mask(continuation, n)
    log_probs = logits[:, prefix - 1 :].float().log_softmax(dim=-1)
    per_token = unlikelihood_penalty(log_probs.gather(2, continuation.unsqueeze(-1)).squeeze(-1))
    per_token = per_token * mask
    return per_token.sum() / (continuation.numel() if positions is None else positions)
