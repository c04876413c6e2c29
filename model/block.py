"""One transformer block: self-attention and a position-wise FFN, each with a residual and a
LayerNorm, in pre-norm (A17) or post-norm (A18) placement."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.model.attention import CausalSelfAttention
from lmforge.model.config import ModelConfig
from lmforge.model.kv_cache import LayerKV

ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": functools.partial(F.gelu, approximate="tanh"),
    # On CPU the erf GELU and its backward take about a third of the tanh form's time: torch's
    # vectorised tanh is the slow part (docs/training.md, "Why it is what it is").
    "gelu_exact": F.gelu,
    "relu": F.relu,
}
"""The FFN's nonlinearity by `ModelConfig.activation`."""


class MLP(nn.Module):
    """FFN(x) = act(x W1 + b1) W2 + b2, expanding d -> d_ff and contracting back (A15)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.act = ACTIVATION_FNS[cfg.activation]
        self.c_fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)  # W1
        self.c_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)  # W2
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm: x + attn(ln_1(x)), then + mlp(ln_2(.)).
    Post-norm: ln_1(x + attn(x)), then ln_2(. + mlp(.))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg.d_model, cfg.n_head, bias=cfg.bias, dropout=cfg.dropout)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(
        self, x: Tensor, *, attn_mask: Tensor | None = None, kv: LayerKV | None = None
    ) -> Tensor:
        if self.pre_norm:
            x = x + self.attn(self.ln_1(x), attn_mask=attn_mask, kv=kv)
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x, attn_mask=attn_mask, kv=kv))
        return self.ln_2(x + self.mlp(x))
