"""Autoregressive decoding: greedy, temperature, top-k and top-p (nucleus) sampling (E1-E8).

`generate` runs a batch of prompts of different lengths together. Prompts are left-padded; a
key-padding mask hides the pads and each row's position ids count only its own tokens, so a
row's output equals running that prompt alone (with seed + row index, see below). With
`use_cache` each step feeds only the new token through a KV cache; once prompt plus output would
exceed `block_size`, it falls back to recomputing the last `block_size` tokens every step (the
same cropping the cache-less path always uses), so both paths give the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from lmforge.model.attention import causal_allowed
from lmforge.model.gpt import GPT
from lmforge.model.kv_cache import KVCache


@dataclass(kw_only=True, slots=True)
class SamplingConfig:
    """How `generate` picks each next token."""

    max_new_tokens: int = 64
    """Tokens to generate per prompt at most (fewer when the row emits eos)."""
    greedy: bool = False
    """Always take the argmax (E1); temperature, top_k and top_p are then ignored."""
    temperature: float = 1.0
    """Divide logits by this before the softmax: < 1 sharper, > 1 flatter (E6)."""
    top_k: int = 0
    """Keep only the k most probable tokens; 0 keeps all (E4)."""
    top_p: float = 1.0
    """Keep the smallest set of tokens whose probability mass reaches p; 1.0 keeps all (E5)."""
    seed: int = 0
    """Row i of a batch samples with a torch.Generator seeded with seed + i."""
    use_cache: bool = True
    """Reuse past keys/values (KV cache) instead of recomputing the whole context each step."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0 (use greedy=True for argmax), got {self.temperature}"
            )
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 disables it), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1.0 disables it), got {self.top_p}")


def filter_logits(
    logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> Tensor:
    """Logits [..., V] divided by temperature, with tokens outside top-k / top-p set to -inf.

    top-p keeps, in order of decreasing probability, every token whose preceding mass is below p:
    the smallest set whose mass reaches p, and always at least the most probable token.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logits = logits / temperature
    if 0 < top_k < logits.size(-1):
        top = torch.topk(logits, top_k, dim=-1).indices
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, top, True)
        logits = logits.masked_fill(~keep, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


@torch.no_grad()
def generate(
    model: GPT, prompts: list[list[int]], cfg: SamplingConfig, eos_id: int | None = None
) -> list[list[int]]:
    """Continue each prompt; returns only the new tokens of each row, eos included when emitted.

    A row stops after emitting eos_id; the batch stops when every row has stopped or after
    cfg.max_new_tokens steps. The model is put in eval mode for the call and restored after.
    """
    if not prompts:
        return []
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token (e.g. the end-of-text id)")
    vocab_size = model.config.vocab_size
    if any(not 0 <= t < vocab_size for p in prompts for t in p):
        raise ValueError(f"prompt token ids must be in [0, model.vocab_size={vocab_size})")
    was_training = model.training
    model.eval()
    try:
        return _decode(model, prompts, cfg, eos_id)
    finally:
        model.train(was_training)


def _decode(
    model: GPT, prompts: list[list[int]], cfg: SamplingConfig, eos_id: int | None
) -> list[list[int]]:
    device = model.wte.weight.device
    block_size = model.config.block_size
    tokens, valid = _left_pad(prompts, device)
    generators = None
    if not cfg.greedy:
        generators = [
            torch.Generator(device=device).manual_seed(cfg.seed + i) for i in range(len(prompts))
        ]
    cache = model.new_kv_cache(len(prompts)) if cfg.use_cache else None
    fed = 0  # columns of `tokens` already stored in the cache
    outputs: list[list[int]] = [[] for _ in prompts]
    finished = [False] * len(prompts)
    for _ in range(cfg.max_new_tokens):
        if cache is not None and tokens.size(1) > block_size:
            cache = None  # the cache would overflow the context: crop from now on
        if cache is not None:
            logits = _next_logits(model, tokens[:, fed:], valid, cache)
            fed = tokens.size(1)
        else:
            logits = _next_logits(model, tokens[:, -block_size:], valid[:, -block_size:], None)
        chosen = _choose(logits, cfg, generators)
        for row, token in enumerate(chosen.tolist()):
            if not finished[row]:
                outputs[row].append(token)
                finished[row] = token == eos_id
        if all(finished):
            break
        tokens = torch.cat([tokens, chosen.unsqueeze(1)], dim=1)
        valid = torch.cat([valid, valid.new_ones(len(prompts), 1)], dim=1)
    return outputs


def _left_pad(prompts: list[list[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Token matrix [B, W] with prompts right-aligned, and the mask of real (non-pad) tokens."""
    width = max(len(p) for p in prompts)
    tokens = torch.zeros(len(prompts), width, dtype=torch.long)
    valid = torch.zeros(len(prompts), width, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        tokens[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        valid[row, width - len(prompt) :] = True
    return tokens.to(device), valid.to(device)


def _next_logits(model: GPT, idx: Tensor, valid: Tensor, cache: KVCache | None) -> Tensor:
    """Logits [B, V] after the last column of idx. valid [B, S] covers cached and new columns."""
    positions = attn_mask = None
    if not bool(valid.all()):
        n_new, n_key = idx.size(1), valid.size(1)
        positions = (valid.long().cumsum(dim=1) - 1).clamp(min=0)[:, n_key - n_new :]
        allowed = causal_allowed(n_new, n_key, device=idx.device) & valid[:, None, None, :]
        own_key = torch.zeros(n_new, n_key, dtype=torch.bool, device=idx.device)
        own_key[:, n_key - n_new :] = torch.eye(n_new, dtype=torch.bool, device=idx.device)
        attn_mask = allowed | own_key  # a pad query sees itself, so no softmax row is empty
    h = model.hidden_states(idx, positions=positions, attn_mask=attn_mask, kv_cache=cache)
    return model.head_logits(h[:, -1]).float()


def _choose(
    logits: Tensor, cfg: SamplingConfig, generators: list[torch.Generator] | None
) -> Tensor:
    if cfg.greedy or generators is None:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filter_logits(logits, cfg.temperature, cfg.top_k, cfg.top_p), dim=-1)
    picks = [torch.multinomial(probs[row], 1, generator=g) for row, g in enumerate(generators)]
    return torch.cat(picks)
