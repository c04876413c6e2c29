"""The decoder-only language model: embeddings, a stack of blocks, and the LM head (A1-A22).

X = E[ids] + P[positions]; H = blocks(X); logits = LN_f(H) E^T (LN_f only for pre-norm; the head
is tied to E unless `tie_weights` is false). The model is single-device: data/ZeRO parallelism is
applied from outside by the training stage.

Generation with a KV cache uses the same `forward`: pass `kv_cache=model.new_kv_cache(batch)`
and feed the prompt once, then one token per step; position ids continue from the cache length.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.model.attention import ATTENTION_IMPLS, CausalSelfAttention
from lmforge.model.block import Block
from lmforge.model.config import ModelConfig
from lmforge.model.kv_cache import KVCache
from lmforge.model.positions import position_encoding

INIT_STD = 0.02  # GPT-2's initializer range (a project choice: no seed gives an init, B14)


class ParamInit(Protocol):
    """How `GPT.reset_parameters` sets a parameter: in place here, or straight into the
    partitions of a model whose parameters are split across processes (ZeRO-3)."""

    def normal_(self, param: nn.Parameter, std: float) -> None: ...
    def fill_(self, param: nn.Parameter, value: float) -> None: ...


class InPlaceInit:
    """`nn.init` on the whole parameter."""

    def normal_(self, param: nn.Parameter, std: float) -> None:
        nn.init.normal_(param, mean=0.0, std=std)

    def fill_(self, param: nn.Parameter, value: float) -> None:
        nn.init.constant_(param, value)


def _tied_head(wte: nn.Embedding, cfg: ModelConfig) -> nn.Linear:
    """The unembedding as a Linear holding the token embedding's own tensor.

    Built as a 1x1 Linear whose weight is then replaced, so no |V| x d weight is allocated only
    to be dropped (for a ZeRO-3 model built partitioned, that tensor would be the largest thing
    any rank holds). The random numbers nn.Linear's default init draws for a |V| x d weight are
    drawn all the same, a chunk at a time, so a seed gives the weights it always gave."""
    head = nn.Linear(1, 1, bias=False)  # its default init draws one uniform number
    head.in_features, head.out_features = cfg.d_model, cfg.vocab_size
    head.weight = wte.weight
    left = cfg.d_model * cfg.vocab_size - 1
    for start in range(0, left, 1 << 20):
        torch.empty(min(1 << 20, left - start)).uniform_()  # one draw per element, in order
    return head


class GPT(nn.Module):
    """GPT-style transformer LM; `forward(idx, targets)` returns (logits, mean cross-entropy)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)  # E, [|V| x d]
        self.wpe = position_encoding(cfg.positions, cfg.block_size, cfg.d_model, cfg.pos_base)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
            if cfg.norm == "pre"
            else None
        )
        if cfg.tie_weights:
            self.lm_head = _tied_head(self.wte, cfg)  # one tensor: u = h E^T
        else:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)  # unembedding
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg: ModelConfig | dict[str, Any]) -> GPT:
        """Build from a ModelConfig or a plain mapping of its fields (seed torch first)."""
        return cls(cfg if isinstance(cfg, ModelConfig) else ModelConfig.from_dict(cfg))

    @torch.no_grad()
    def reset_parameters(self, init: ParamInit | None = None) -> None:
        """GPT-2 init: N(0, 0.02) weights, zero biases, residual projections scaled by
        1/sqrt(2 * n_layer) (two residual branches per block). Uses torch's global RNG.

        init: how each parameter is set (default in place; ZeRO-3 passes one that writes each
        process's partition, drawing the same numbers)."""
        init = init or InPlaceInit()
        for name, module in self.named_modules():
            tied_head = name == "lm_head" and self.config.tie_weights
            if isinstance(module, nn.Linear) and not tied_head:
                init.normal_(module.weight, INIT_STD)
                if module.bias is not None:
                    init.fill_(module.bias, 0.0)
            elif isinstance(module, nn.Embedding):
                init.normal_(module.weight, INIT_STD)
            elif isinstance(module, nn.LayerNorm):
                init.fill_(module.weight, 1.0)
                if module.bias is not None:
                    init.fill_(module.bias, 0.0)
        residual_std = INIT_STD / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            init.normal_(block.attn.c_proj.weight, residual_std)
            init.normal_(block.mlp.c_proj.weight, residual_std)

    def hidden_states(
        self,
        idx: Tensor,
        *,
        positions: Tensor | None = None,
        attn_mask: Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> Tensor:
        """Final hidden states [B, T, d] (after LN_f for pre-norm), just below the LM head.

        positions: ids [T] or [B, T]; default past..past+T-1 where past is the cache length.
        attn_mask: boolean [B, 1, T, past+T], True = may attend; default causal.
        kv_cache: appended to in place (see `new_kv_cache`).
        """
        n_new = idx.size(1)
        past = kv_cache.length if kv_cache is not None else 0
        if past + n_new > self.config.block_size:
            raise ValueError(
                f"{past + n_new} positions exceed model.block_size={self.config.block_size}; "
                "crop the input to the last block_size tokens"
            )
        if positions is None:
            positions = torch.arange(past, past + n_new, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))
        for i, block in enumerate(self.blocks):
            kv = kv_cache.layers[i] if kv_cache is not None else None
            x = block(x, attn_mask=attn_mask, kv=kv)
        return self.ln_f(x) if self.ln_f is not None else x

    def forward(
        self,
        idx: Tensor,
        targets: Tensor | None = None,
        *,
        positions: Tensor | None = None,
        attn_mask: Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """idx [B, T] -> (logits [B, T, V], loss or None).

        targets [B, T] holds the token that should follow each input position (the caller shifts
        by one, teacher forcing, B4); the loss is the mean natural-log cross-entropy over targets
        that are not -100. The keyword arguments are those of `hidden_states`.
        """
        h = self.hidden_states(idx, positions=positions, attn_mask=attn_mask, kv_cache=kv_cache)
        logits = self.head_logits(h)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100, reduction="mean"
        )
        return logits, loss

    def head_logits(self, h: Tensor) -> Tensor:
        """Logits [B, T, V] of hidden states h. Under CPU autocast the head runs in fp32: bf16
        logits keep 8 bits of mantissa, and the tiny preset trained that way got two minimal
        pairs fewer on a seed (18 of 26, under the demo's bar; 20 with the head in fp32) for no
        time saved (the head is a fifth of its FLOPs; its step took as long either way, Zen 5).
        GPUs keep the bf16 head, where an fp32 matmul costs several times a bf16 one."""
        if h.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", enabled=False):
                return self.lm_head(h.float())
        return self.lm_head(h)

    def new_kv_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        """An empty cache for `batch_size` rows, up to `max_len` (default block_size) positions."""
        cfg = self.config
        weight = self.wte.weight
        return KVCache(
            n_layer=cfg.n_layer,
            batch_size=batch_size,
            n_head=cfg.n_head,
            head_dim=cfg.head_dim,
            max_len=min(max_len or cfg.block_size, cfg.block_size),
            dtype=weight.dtype,
            device=weight.device,
        )

    def set_attention_impl(self, impl: str) -> None:
        """Switch every attention layer to 'sdpa' (default) or 'reference' (explicit formula)."""
        if impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention impl must be one of {ATTENTION_IMPLS}, got {impl!r}")
        for module in self.modules():
            if isinstance(module, CausalSelfAttention):
                module.attn_impl = impl

    def num_parameters(self, non_embedding: bool = True) -> int:
        """Parameter count, a tied head counted once.

        non_embedding drops the token and learned position embeddings, and an untied LM head
        too: Kaplan's N (B8) excludes the vocabulary matrices."""
        total = sum(p.numel() for p in self.parameters())
        if non_embedding:
            total -= self.wte.weight.numel()
            if isinstance(self.wpe, nn.Embedding):
                total -= self.wpe.weight.numel()
            if not self.config.tie_weights:
                total -= self.lm_head.weight.numel()
        return total

    def param_groups(self, weight_decay: float) -> list[dict[str, Any]]:
        """AdamW groups: decay on matmul weights only; none on norms, biases and embeddings."""
        embeddings = {id(self.wte.weight)}
        if isinstance(self.wpe, nn.Embedding):
            embeddings.add(id(self.wpe.weight))
        decay, no_decay = [], []
        for p in self.parameters():  # shared (tied) tensors are yielded once
            if not p.requires_grad:
                continue
            (decay if p.dim() >= 2 and id(p) not in embeddings else no_decay).append(p)
        return [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
